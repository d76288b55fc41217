#include "nn/embedding.h"

#include <cmath>

#include "autograd/elementwise.h"
#include "autograd/embedding.h"
#include "autograd/views.h"
#include "nn/init.h"

namespace define::nn {

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim, EmbeddingOptions opt, Generator& gen)
    : Module("Embedding"), num_(num_embeddings), dim_(dim), padding_idx_(opt.padding_idx) {
  if (num_ <= 0 || dim_ <= 0) fail("Embedding", "sizes must be positive, got {} x {}", num_, dim_);
  if (padding_idx_ < -1 || padding_idx_ >= num_)
    fail("Embedding", "padding_idx {} out of range for {} rows (use -1 for none)", padding_idx_, num_);
  if (opt.init_std && opt.init_range) fail("Embedding", "give init_std or init_range, not both");
  const Shape shape{num_, dim_};
  Tensor w = opt.init_range ? init::uniform(shape, -*opt.init_range, *opt.init_range, gen)
                            : init::normal(shape, 0.0, opt.init_std.value_or(1.0 / std::sqrt(double(dim_))), gen);
  if (padding_idx_ >= 0) fill_(select(w, 0, padding_idx_), 0.0);  // padding reads as zeros
  weight_ = &register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) const {
  return embedding(*weight_, indices, padding_idx_);
}

}  // namespace define::nn
