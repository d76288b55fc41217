// LayerNorm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias.
// Parameters: 2 * dim with affine, 0 without.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace define::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool affine = true;  // learnable weight (init 1) and bias (init 0)
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t dim, LayerNormOptions opt = {});

  Tensor forward(const Tensor& x) const;

  // Undefined without affine.
  const Tensor& weight() const { return weight_ ? *weight_ : none_; }
  const Tensor& bias() const { return bias_ ? *bias_ : none_; }
  std::int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

 private:
  std::int64_t dim_;
  double eps_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor none_;
};

}  // namespace define::nn
