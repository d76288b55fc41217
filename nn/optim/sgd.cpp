#include "nn/optim/sgd.h"

#include <cmath>

namespace define::optim {

SGD::SGD(std::vector<GroupSpec> groups, SGDOptions opt)
    : Optimizer("SGD", std::move(groups), opt.lr, opt.weight_decay), opt_(opt) {
  check_hparam(std::isfinite(opt.momentum) && opt.momentum >= 0, "momentum", opt.momentum, ">= 0");
  check_hparam(opt.dampening >= 0 && opt.dampening <= 1, "dampening", opt.dampening, "in [0, 1]");
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
    fail("SGD", "nesterov needs momentum > 0 and dampening == 0 (got momentum {}, dampening {})", opt.momentum,
         opt.dampening);
}

SGD::SGD(NamedParameters params, SGDOptions opt) : SGD(std::vector<GroupSpec>{{std::move(params), {}, {}}}, opt) {}

SGD::SGD(const std::vector<Tensor>& params, SGDOptions opt) : SGD(name_parameters(params), opt) {}

std::vector<std::string> SGD::state_tensor_names() const {
  if (opt_.momentum == 0) return {};
  return {"momentum_buffer"};
}

// The formulas above, rearranged so that no temporary is needed: the weight-decay term
// lr * wd * p is folded into a scaling of p (done last among the reads of the old p) and into
// the momentum buffer as a second scaled add.
void SGD::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& st) {
  const double lr = group.lr, wd = group.weight_decay, mom = opt_.momentum;
  if (mom == 0) {
    if (wd != 0) detail::scale_(p, 1 - lr * wd);
    detail::add_scaled_(p, g, -lr);
    return;
  }
  auto it = st.tensors.find("momentum_buffer");
  if (it == st.tensors.end()) {
    Tensor buf = detail::clone_detached(g);  // buf = g + wd * p, undamped
    if (wd != 0) detail::add_scaled_(buf, p, wd);
    it = st.tensors.emplace("momentum_buffer", buf).first;
  } else {
    const Tensor& buf = it->second;  // buf = mom * buf + (1 - damp) * (g + wd * p)
    const double keep = 1 - opt_.dampening;
    detail::scale_(buf, mom);
    detail::add_scaled_(buf, g, keep);
    if (wd != 0) detail::add_scaled_(buf, p, keep * wd);
  }
  const Tensor& buf = it->second;
  if (opt_.nesterov) {
    // p -= lr * (g + wd * p + mom * buf)
    if (wd != 0) detail::scale_(p, 1 - lr * wd);
    detail::add_scaled_(p, g, -lr);
    detail::add_scaled_(p, buf, -lr * mom);
  } else {
    detail::add_scaled_(p, buf, -lr);
  }
}

}  // namespace define::optim
