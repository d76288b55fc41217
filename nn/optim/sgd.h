// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay,
// with PyTorch's semantics (torch.optim.SGD):
//   d = g + weight_decay * p
//   buf = d                                      on a parameter's first step
//   buf = momentum * buf + (1 - dampening) * d   afterwards
//   d = d + momentum * buf   (nesterov)   or   d = buf   (momentum > 0)
//   p = p - lr * d
#pragma once

#include "nn/optim/optimizer.h"

namespace define::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<GroupSpec> groups, SGDOptions opt = {});
  SGD(NamedParameters params, SGDOptions opt = {});
  SGD(const std::vector<Tensor>& params, SGDOptions opt = {});
  template <NamedTensorRange R>
  explicit SGD(const R& params, SGDOptions opt = {}) : SGD(to_named_parameters(params), opt) {}

  const SGDOptions& options() const { return opt_; }

 protected:
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::vector<std::string> state_tensor_names() const override;

 private:
  SGDOptions opt_;
};

}  // namespace define::optim
