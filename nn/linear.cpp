#include "nn/linear.h"

#include <cmath>

#include "autograd/matmul.h"
#include "core/factory.h"
#include "nn/init.h"

namespace define::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions opt, Generator& gen)
    : Module("Linear"), in_(in_features), out_(out_features) {
  if (in_ <= 0 || out_ <= 0) fail("Linear", "sizes must be positive, got {} -> {}", in_, out_);
  const Shape w{out_, in_};
  switch (opt.init) {
    case LinearInit::XavierUniform:
      weight_ = &register_parameter("weight", init::xavier_uniform(w, in_, out_, gen));
      if (opt.bias) bias_ = &register_parameter("bias", zeros({out_}));
      break;
    case LinearInit::KaimingUniform: {
      const double gain = 1.0 / std::sqrt(3.0);  // bound 1 / sqrt(in), as in PyTorch
      weight_ = &register_parameter("weight", init::kaiming_uniform(w, in_, gen, gain));
      if (opt.bias) bias_ = &register_parameter("bias", init::kaiming_uniform({out_}, in_, gen, gain));
      break;
    }
  }
}

Tensor Linear::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != in_)
    fail("Linear", "expected input [..., {}], got {}", in_, shape_str(x.shape()));
  return linear(x, *weight_, bias());
}

}  // namespace define::nn
