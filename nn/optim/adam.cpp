#include "nn/optim/adam.h"

#include <cmath>

#include "core/factory.h"
#include "kernels/optim.h"

namespace define::optim {

Adam::Adam(const char* name, bool decoupled, std::vector<GroupSpec> groups, AdamOptions opt)
    : Optimizer(name, std::move(groups), opt.lr, opt.weight_decay), opt_(opt), decoupled_(decoupled) {
  const auto [b1, b2] = opt.betas;
  check_hparam(b1 >= 0 && b1 < 1, "betas[0]", b1, "in [0, 1)");
  check_hparam(b2 >= 0 && b2 < 1, "betas[1]", b2, "in [0, 1)");
  check_hparam(std::isfinite(opt.eps) && opt.eps >= 0, "eps", opt.eps, ">= 0");
}

Adam::Adam(std::vector<GroupSpec> groups, AdamOptions opt) : Adam("Adam", false, std::move(groups), opt) {}
Adam::Adam(NamedParameters params, AdamOptions opt)
    : Adam(std::vector<GroupSpec>{{std::move(params), {}, {}}}, opt) {}
Adam::Adam(const std::vector<Tensor>& params, AdamOptions opt) : Adam(name_parameters(params), opt) {}

namespace {
AdamOptions as_adam(const AdamWOptions& o) { return {o.lr, o.betas, o.eps, o.weight_decay}; }
}  // namespace

AdamW::AdamW(std::vector<GroupSpec> groups, AdamWOptions opt) : Adam("AdamW", true, std::move(groups), as_adam(opt)) {}
AdamW::AdamW(NamedParameters params, AdamWOptions opt)
    : AdamW(std::vector<GroupSpec>{{std::move(params), {}, {}}}, opt) {}
AdamW::AdamW(const std::vector<Tensor>& params, AdamWOptions opt) : AdamW(name_parameters(params), opt) {}

// One fused pass per parameter (kernels/optim.h says why and gives the formula).
void Adam::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& st) {
  const auto [b1, b2] = opt_.betas;
  const double lr = group.lr, wd = group.weight_decay;
  if (st.tensors.empty()) {
    st.tensors["exp_avg"] = zeros_like(p);
    st.tensors["exp_avg_sq"] = zeros_like(p);
    st.scalars["step"] = 0;
  }
  const double t = ++st.scalars.at("step");
  kernels::adam_update(p, g, st.tensors.at("exp_avg"), st.tensors.at("exp_avg_sq"),
                       {.beta1 = b1,
                        .beta2 = b2,
                        .eps = opt_.eps,
                        .step_size = lr / (1 - std::pow(b1, t)),
                        .inv_bias_sqrt = 1 / std::sqrt(1 - std::pow(b2, t)),
                        .l2 = decoupled_ ? 0.0 : wd,
                        .decay = decoupled_ ? 1 - lr * wd : 1.0});
}

}  // namespace define::optim
