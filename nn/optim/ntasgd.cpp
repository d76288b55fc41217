#include "nn/optim/ntasgd.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "autograd/grad_mode.h"

namespace define::optim {

NTASGD::NTASGD(std::vector<GroupSpec> groups, NTASGDOptions opt)
    : Optimizer("NTASGD", std::move(groups), opt.lr, opt.weight_decay), opt_(opt) {
  check_hparam(opt.nonmono >= 1, "nonmono", static_cast<double>(opt.nonmono), ">= 1");
}
NTASGD::NTASGD(NamedParameters params, NTASGDOptions opt)
    : NTASGD(std::vector<GroupSpec>{{std::move(params), {}, {}}}, opt) {}
NTASGD::NTASGD(const std::vector<Tensor>& params, NTASGDOptions opt) : NTASGD(name_parameters(params), opt) {}

bool NTASGD::observe(double v) {
  bool trigger = false;
  const auto n = static_cast<std::int64_t>(log_.size());
  if (!averaging_ && n > opt_.nonmono) {
    const double best_before = *std::min_element(log_.begin(), log_.end() - opt_.nonmono);
    // NaN compares false: a diverged evaluation alone does not trigger averaging.
    trigger = v > best_before;
  }
  log_.push_back(v);
  if (trigger) start_averaging();
  return trigger;
}

void NTASGD::start_averaging() {
  if (averaging_) return;
  check_not_swapped("start_averaging");
  NoGradGuard no_grad;
  for (const auto& [pname, p] : named_parameters()) state_[pname].tensors["ax"] = detail::clone_detached(p);
  averaging_ = true;
  avg_steps_ = 0;
}

Tensor NTASGD::averaged(const std::string& param_name) const {
  auto it = state_.find(param_name);
  if (it == state_.end() || !it->second.tensors.count("ax")) return Tensor();
  return it->second.tensors.at("ax");
}

void NTASGD::check_not_swapped(const char* what) const {
  if (swapped_in()) fail("NTASGD", "{}: the averaged weights are swapped in; call swap_back() first", what);
}

void NTASGD::before_step() { check_not_swapped("step"); }

void NTASGD::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState&) {
  if (group.weight_decay != 0) detail::scale_(p, 1 - group.lr * group.weight_decay);
  detail::add_scaled_(p, g, -group.lr);
}

// ax = ax * (1 - mu) + mu * p, mu = 1 / n: two in-place kernels, no temporary. At n = 1 that is
// a copy of p (exactly the first iterate, whatever ax held).
void NTASGD::after_step() {
  if (!averaging_) return;
  ++avg_steps_;
  const double mu = 1.0 / static_cast<double>(avg_steps_);
  for (const auto& [pname, p] : named_parameters()) {
    const Tensor& ax = state_.at(pname).tensors.at("ax");
    if (avg_steps_ == 1) {
      detail::copy_(ax, p);
    } else {
      detail::scale_(ax, 1 - mu);
      detail::add_scaled_(ax, p, mu);
    }
    ax.bump_version();
  }
}

void NTASGD::swap_in_averaged() {
  if (!averaging_) fail("NTASGD", "swap_in_averaged: averaging has not started (no averaged weights yet)");
  check_not_swapped("swap_in_averaged");
  NoGradGuard no_grad;
  std::vector<Tensor> backup;
  for (const auto& [pname, p] : named_parameters()) {
    backup.push_back(detail::clone_detached(p));
    detail::copy_(p, state_.at(pname).tensors.at("ax"));
    p.bump_version();
  }
  backup_ = std::move(backup);
}

void NTASGD::swap_back() {
  if (!swapped_in()) fail("NTASGD", "swap_back: the averaged weights are not swapped in");
  NoGradGuard no_grad;
  std::size_t i = 0;
  for (const auto& [pname, p] : named_parameters()) {
    detail::copy_(p, backup_[i++]);
    p.bump_version();
  }
  backup_.clear();
}

void NTASGD::save_extra(std::map<std::string, double>& extra) const {
  check_not_swapped("state_dict");
  extra["averaging"] = averaging_ ? 1 : 0;
  extra["avg_steps"] = static_cast<double>(avg_steps_);
  extra["log_size"] = static_cast<double>(log_.size());
  for (std::size_t i = 0; i < log_.size(); ++i) extra["log." + std::to_string(i)] = log_[i];
}

void NTASGD::validate_state(const std::map<std::string, ParamState>& state,
                            const std::map<std::string, double>& extra) const {
  check_not_swapped("load_state_dict");
  const std::string op = "NTASGD.load_state_dict";
  for (const char* k : {"averaging", "avg_steps", "log_size"})
    if (!extra.count(k)) fail(op, "missing key 'optimizer.{}'", k);
  const double av = extra.at("averaging"), steps = extra.at("avg_steps"), size = extra.at("log_size");
  if (av != 0 && av != 1) fail(op, "key 'optimizer.averaging' must be 0 or 1 (got {})", av);
  if (!(steps >= 0) || steps != std::floor(steps)) fail(op, "key 'optimizer.avg_steps' must be a count (got {})", steps);
  if (!(size >= 0) || size != std::floor(size)) fail(op, "key 'optimizer.log_size' must be a count (got {})", size);
  for (std::size_t i = 0; i < static_cast<std::size_t>(size); ++i)
    if (!extra.count("log." + std::to_string(i))) fail(op, "missing key 'optimizer.log.{}'", i);
  for (const auto& entry : extra) {
    const std::string& k = entry.first;
    bool known = k == "averaging" || k == "avg_steps" || k == "log_size";
    if (!known && k.rfind("log.", 0) == 0) {
      std::size_t i = 0;
      const auto res = std::from_chars(k.data() + 4, k.data() + k.size(), i);
      known = res.ec == std::errc() && k.substr(4) == std::to_string(i) && static_cast<double>(i) < size;
    }
    if (!known) fail(op, "unexpected key 'optimizer.{}'", k);
  }
  // Every parameter has an averaged copy exactly when averaging.
  for (const auto& [pname, p] : named_parameters()) {
    (void)p;
    auto it = state.find(pname);
    const bool has = it != state.end() && it->second.tensors.count("ax");
    if (av == 1 && !has) fail(op, "missing key 'state.{}.ax'", pname);
    if (av == 0 && has) fail(op, "unexpected key 'state.{}.ax' (averaging has not started)", pname);
  }
}

void NTASGD::load_extra(const std::map<std::string, double>& extra) {
  averaging_ = extra.at("averaging") == 1;
  avg_steps_ = static_cast<std::int64_t>(extra.at("avg_steps"));
  log_.assign(static_cast<std::size_t>(extra.at("log_size")), 0.0);
  for (std::size_t i = 0; i < log_.size(); ++i) log_[i] = extra.at("log." + std::to_string(i));
}

}  // namespace define::optim
