// Adam and AdamW (PyTorch semantics, torch.optim.Adam / AdamW without amsgrad). Per parameter,
// with t the parameter's step count (starting at 1):
//   Adam:  g = g + weight_decay * p          (L2 penalty through the gradient)
//   AdamW: p = p * (1 - lr * weight_decay)   (decoupled decay, before the Adam step)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#pragma once

#include <utility>

#include "nn/optim/optimizer.h"

namespace define::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};  // each in [0, 1)
  double eps = 1e-8;
  double weight_decay = 0;  // AdamW's constructor defaults it to 1e-2 when not given
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<GroupSpec> groups, AdamOptions opt = {});
  Adam(NamedParameters params, AdamOptions opt = {});
  Adam(const std::vector<Tensor>& params, AdamOptions opt = {});
  template <NamedTensorRange R>
  explicit Adam(const R& params, AdamOptions opt = {}) : Adam(to_named_parameters(params), opt) {}

  const AdamOptions& options() const { return opt_; }

 protected:
  Adam(const char* name, bool decoupled, std::vector<GroupSpec> groups, AdamOptions opt);
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::vector<std::string> state_tensor_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::vector<std::string> state_scalar_names() const override { return {"step"}; }

 private:
  AdamOptions opt_;
  bool decoupled_;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<GroupSpec> groups, AdamWOptions opt = {});
  AdamW(NamedParameters params, AdamWOptions opt = {});
  AdamW(const std::vector<Tensor>& params, AdamWOptions opt = {});
  template <NamedTensorRange R>
  explicit AdamW(const R& params, AdamWOptions opt = {}) : AdamW(to_named_parameters(params), opt) {}
};

}  // namespace define::optim
