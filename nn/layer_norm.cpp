#include "nn/layer_norm.h"

#include "autograd/layer_norm.h"
#include "core/factory.h"

namespace define::nn {

LayerNorm::LayerNorm(std::int64_t dim, LayerNormOptions opt) : Module("LayerNorm"), dim_(dim), eps_(opt.eps) {
  if (dim_ <= 0) fail("LayerNorm", "dim must be positive, got {}", dim_);
  if (opt.affine) {
    weight_ = &register_parameter("weight", ones({dim_}));
    bias_ = &register_parameter("bias", zeros({dim_}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != dim_)
    fail("LayerNorm", "expected input [..., {}], got {}", dim_, shape_str(x.shape()));
  return layer_norm(x, weight(), bias(), eps_);
}

}  // namespace define::nn
