#include "nn/optim/adam.h"

#include <cmath>

#include "core/factory.h"
#include "kernels/elementwise.h"

namespace define::optim {

using kernels::BinaryOp;
using kernels::UnaryOp;

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

// Ten in-place kernel calls and one scratch tensor per parameter (allocated per step from the
// caching allocator): the scratch holds g (+ wd * p), then g^2, then the denominator, then the
// update direction.
void Adam::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& st) {
  const auto [b1, b2] = opt_.betas;
  const double lr = group.lr, wd = group.weight_decay;
  if (st.tensors.empty()) {
    st.tensors["exp_avg"] = zeros_like(p);
    st.tensors["exp_avg_sq"] = zeros_like(p);
    st.scalars["step"] = 0;
  }
  const Tensor& m = st.tensors.at("exp_avg");
  const Tensor& v = st.tensors.at("exp_avg_sq");
  const double t = ++st.scalars.at("step");

  Tensor tmp = empty_like(p);
  Tensor gg = g;  // the gradient the moments see
  if (decoupled_) {
    if (wd != 0) detail::scale_(p, 1 - lr * wd);
  } else if (wd != 0) {
    kernels::binary_into(BinaryOp::AddScaled, tmp, g, p, wd);
    gg = tmp;
  }
  detail::scale_(m, b1);
  detail::add_scaled_(m, gg, 1 - b1);
  kernels::binary_into(BinaryOp::Mul, tmp, gg, gg);  // may overwrite gg == tmp: read first, same element
  detail::scale_(v, b2);
  detail::add_scaled_(v, tmp, 1 - b2);

  const double bc1 = 1 - std::pow(b1, t);
  const double bc2_sqrt = std::sqrt(1 - std::pow(b2, t));
  kernels::unary_into(UnaryOp::Sqrt, tmp, v);
  kernels::unary_into(UnaryOp::MulScalar, tmp, tmp, 1 / bc2_sqrt);
  kernels::unary_into(UnaryOp::AddScalar, tmp, tmp, opt_.eps);
  kernels::binary_into(BinaryOp::Div, tmp, m, tmp);
  detail::add_scaled_(p, tmp, -lr / bc1);
}

}  // namespace define::optim
