// Linear: y = x W^T + b for x [..., in], W [out, in], b [out]. Parameters: in * out (+ out).
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace define::nn {

enum class LinearInit {
  // W ~ U(+-sqrt(6 / (in + out))) (Glorot), b = 0. The default: what fairseq and DeLighT use for
  // every projection, and a zero bias keeps the initial output mean at the input's.
  XavierUniform,
  // PyTorch's nn.Linear default: W and b ~ U(+-1 / sqrt(in)) (kaiming_uniform with a = sqrt(5)),
  // for reproducing AWD-LSTM style models initialised that way.
  KaimingUniform,
};

struct LinearOptions {
  bool bias = true;
  LinearInit init = LinearInit::XavierUniform;
};

class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions opt = {},
         Generator& gen = default_generator());

  Tensor forward(const Tensor& x) const;

  const Tensor& weight() const { return *weight_; }
  // Undefined without a bias.
  const Tensor& bias() const { return bias_ ? *bias_ : none_; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

 private:
  std::int64_t in_, out_;
  Tensor* weight_;            // slots owned by Module (see module.h: read through, never copied)
  Tensor* bias_ = nullptr;
  Tensor none_;
};

}  // namespace define::nn
