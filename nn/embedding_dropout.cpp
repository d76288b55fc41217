#include "nn/embedding_dropout.h"

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "core/factory.h"
#include "nn/dropout.h"

namespace define::nn {

EmbeddingDropout::EmbeddingDropout(double p) : Module("EmbeddingDropout"), p_(p) {
  check_dropout_probability("EmbeddingDropout", p);
}

void EmbeddingDropout::check_weight(const Module& module, std::string_view weight_name) const {
  if (!module.has_parameter(weight_name))
    fail("EmbeddingDropout", "{} has no parameter '{}'", module.type_name(), weight_name);
}

Tensor EmbeddingDropout::drop_rows(const Tensor& weight) const {
  if (weight.dim() < 1) fail("EmbeddingDropout", "expected a table [V, D], got {}", shape_str(weight.shape()));
  if (!is_training() || p_ == 0.0) return weight;
  // One draw per row ([V, 1, ...]), broadcast along the row: dropout of ones is the scaled mask.
  Shape mask_shape(weight.shape().size(), 1);
  mask_shape[0] = weight.size(0);
  const Tensor mask = dropout(ones(mask_shape, {weight.dtype(), weight.device()}), p_, true, generator());
  return mul(weight, mask);
}

}  // namespace define::nn
