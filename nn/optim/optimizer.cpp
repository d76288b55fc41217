#include "nn/optim/optimizer.h"

#include <charconv>
#include <cmath>
#include <set>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"

namespace define::optim {

NamedParameters name_parameters(const std::vector<Tensor>& params, const std::string& prefix) {
  NamedParameters out;
  out.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) out.emplace_back(prefix + std::to_string(i), params[i]);
  return out;
}

namespace detail {

void scale_(const Tensor& x, double s) { kernels::unary_into(kernels::UnaryOp::MulScalar, x, x, s); }

void add_scaled_(const Tensor& x, const Tensor& y, double alpha) {
  kernels::binary_into(kernels::BinaryOp::AddScaled, x, x, y, alpha);
}

void copy_(const Tensor& dst, const Tensor& src) { kernels::copy_into(dst, src); }

// cast() to the same dtype always allocates: a copy that never aliases t.
Tensor clone_detached(const Tensor& t) { return kernels::cast(t, t.dtype()); }

}  // namespace detail

Optimizer::Optimizer(std::string name, std::vector<GroupSpec> groups, double default_lr,
                     double default_weight_decay)
    : name_(std::move(name)) {
  check_hparam(std::isfinite(default_lr) && default_lr >= 0, "lr", default_lr, ">= 0");
  check_hparam(std::isfinite(default_weight_decay) && default_weight_decay >= 0, "weight_decay",
               default_weight_decay, ">= 0");
  // Names key the state and a tensor listed twice would be updated twice per step: both must be
  // unique across all groups.
  std::map<std::string, std::size_t> seen_names;
  std::map<const TensorImpl*, std::string> seen_tensors;
  std::size_t total = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    GroupSpec& spec = groups[gi];
    ParamGroup g;
    g.lr = spec.lr.value_or(default_lr);
    g.weight_decay = spec.weight_decay.value_or(default_weight_decay);
    check_group(g, gi);
    for (auto& [pname, p] : spec.params) {
      if (!p.defined()) fail(name_, "parameter '{}' is an undefined tensor", pname);
      if (p.dtype() != DType::Float32 && p.dtype() != DType::Float64)
        fail(name_, "parameter '{}' has dtype {}; optimizers update float32 or float64 tensors", pname,
             dtype_name(p.dtype()));
      if (!seen_names.emplace(pname, gi).second) fail(name_, "parameter name '{}' appears twice", pname);
      auto [it, fresh] = seen_tensors.emplace(p.impl(), pname);
      if (!fresh) fail(name_, "parameter '{}' is the same tensor as '{}'", pname, it->second);
      g.params.emplace_back(pname, p);
      ++total;
    }
    groups_.push_back(std::move(g));
  }
  if (total == 0) fail(name_, "got an empty parameter list");
}

void Optimizer::check_hparam(bool ok, const std::string& what, double value, const char* requirement) const {
  if (!ok) fail(name_, "{} must be {} (got {})", what, requirement, value);
}

void Optimizer::check_group(const ParamGroup& g, std::size_t index) const {
  // Group 0's errors read like the constructor's ("lr must be ..."); others name the group.
  const std::string where = index == 0 ? "" : "param group " + std::to_string(index) + " ";
  check_hparam(std::isfinite(g.lr) && g.lr >= 0, where + "lr", g.lr, ">= 0");
  check_hparam(std::isfinite(g.weight_decay) && g.weight_decay >= 0, where + "weight_decay", g.weight_decay, ">= 0");
}

double Optimizer::lr(std::size_t group) const {
  if (group >= groups_.size()) fail(name_, "no param group {} (there are {})", group, groups_.size());
  return groups_[group].lr;
}

void Optimizer::set_lr(double lr) {
  for (std::size_t i = 0; i < groups_.size(); ++i) set_lr(i, lr);
}

void Optimizer::set_lr(std::size_t group, double lr) {
  if (group >= groups_.size()) fail(name_, "no param group {} (there are {})", group, groups_.size());
  ParamGroup g = groups_[group];
  g.lr = lr;
  check_group(g, group);
  groups_[group].lr = lr;
}

void Optimizer::set_weight_decay(std::size_t group, double weight_decay) {
  if (group >= groups_.size()) fail(name_, "no param group {} (there are {})", group, groups_.size());
  ParamGroup g = groups_[group];
  g.weight_decay = weight_decay;
  check_group(g, group);
  groups_[group].weight_decay = weight_decay;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_)
    for (const auto& np : g.params) out.push_back(np.second);
  return out;
}

NamedParameters Optimizer::named_parameters() const {
  NamedParameters out;
  for (const auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

Optimizer::ParamState* Optimizer::find_state(const std::string& param_name) {
  auto it = state_.find(param_name);
  return it == state_.end() ? nullptr : &it->second;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  before_step();
  for (const ParamGroup& g : groups_) {
    for (const auto& [pname, p] : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (grad.device() != p.device())
        fail(name_, "gradient of '{}' is on {} but the parameter is on {}", pname, grad.device().str(),
             p.device().str());
      update(g, p, grad, state_[pname]);
      // Autograd's saved-tensor check compares version counters: an update is an in-place write.
      p.bump_version();
    }
  }
  after_step();
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const auto& g : groups_) {
    for (const auto& np : g.params) {
      const Tensor& p = np.second;
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        kernels::fill(grad, 0.0);
        grad.bump_version();
      }
    }
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (const auto& [pname, st] : state_) {
    for (const auto& [buf, t] : st.tensors) out.tensors["state." + pname + "." + buf] = detail::clone_detached(t);
    for (const auto& [s, v] : st.scalars) out.scalars["state." + pname + "." + s] = v;
  }
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    out.scalars["group." + std::to_string(i) + ".lr"] = groups_[i].lr;
    out.scalars["group." + std::to_string(i) + ".weight_decay"] = groups_[i].weight_decay;
  }
  std::map<std::string, double> extra;
  save_extra(extra);
  for (const auto& [k, v] : extra) out.scalars["optimizer." + k] = v;
  return out;
}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "state.<param>.<buffer>" -> (param, buffer); the buffer name has no dots, the param name may.
bool split_state_key(const std::string& key, std::string& param, std::string& buffer) {
  if (!starts_with(key, "state.")) return false;
  const std::string rest = key.substr(6);
  const auto dot = rest.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) return false;
  param = rest.substr(0, dot);
  buffer = rest.substr(dot + 1);
  return true;
}

// "group.<i>.<field>" -> (i, field).
bool split_group_key(const std::string& key, std::size_t& index, std::string& field) {
  if (!starts_with(key, "group.")) return false;
  const std::string rest = key.substr(6);
  const auto dot = rest.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  const char* b = rest.data();
  auto [ptr, ec] = std::from_chars(b, b + dot, index);
  if (ec != std::errc() || ptr != b + dot) return false;
  field = rest.substr(dot + 1);
  return true;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (x == s) return true;
  return false;
}

}  // namespace

void Optimizer::validate_state(const std::map<std::string, ParamState>& state,
                               const std::map<std::string, double>& extra) const {
  if (!extra.empty()) fail(name_ + ".load_state_dict", "unexpected key 'optimizer.{}'", extra.begin()->first);
  const auto tensor_names = state_tensor_names();
  const auto scalar_names = state_scalar_names();
  for (const auto& [pname, st] : state) {
    // Buffers are created together on a parameter's first step: a partial set is corrupt.
    for (const auto& b : tensor_names)
      if (!st.tensors.count(b)) fail(name_ + ".load_state_dict", "missing key 'state.{}.{}'", pname, b);
    for (const auto& s : scalar_names)
      if (!st.scalars.count(s)) fail(name_ + ".load_state_dict", "missing key 'state.{}.{}'", pname, s);
  }
}

void Optimizer::load_state_dict(const OptimizerState& in) {
  const std::string op = name_ + ".load_state_dict";
  std::map<std::string, const Tensor*> params;
  for (const auto& g : groups_)
    for (const auto& np : g.params) params[np.first] = &np.second;
  const auto tensor_names = state_tensor_names();
  const auto scalar_names = state_scalar_names();

  // Parse everything into temporaries first, so a bad key leaves the optimizer untouched.
  std::map<std::string, ParamState> state;
  std::vector<ParamGroup> groups = groups_;
  std::vector<std::set<std::string>> group_fields(groups.size());
  std::map<std::string, double> extra;

  for (const auto& [key, t] : in.tensors) {
    std::string pname, buf;
    if (!split_state_key(key, pname, buf)) fail(op, "unexpected key '{}'", key);
    auto it = params.find(pname);
    if (it == params.end()) fail(op, "key '{}' names no parameter of this optimizer", key);
    if (!contains(tensor_names, buf)) fail(op, "unexpected key '{}' ({} keeps no '{}')", key, name_, buf);
    const Tensor& p = *it->second;
    if (!t.defined()) fail(op, "key '{}' holds an undefined tensor", key);
    if (t.shape() != p.shape())
      fail(op, "key '{}' has shape {} but the parameter has shape {}", key, shape_str(t.shape()),
           shape_str(p.shape()));
    if (!is_floating(t.dtype())) fail(op, "key '{}' has dtype {}", key, dtype_name(t.dtype()));
    // Onto the parameter's device (through the host when needed), then cast to its dtype.
    Tensor src = kernels::contiguous(t);
    if (src.device() != p.device()) src = copy_to_device(src, p.device());
    Tensor dst = empty(p.shape(), {p.dtype(), p.device()});
    kernels::copy_into(dst, src);
    state[pname].tensors[buf] = dst;
  }
  for (const auto& [key, v] : in.scalars) {
    std::string pname, field;
    std::size_t gi = 0;
    if (split_state_key(key, pname, field)) {
      if (!params.count(pname)) fail(op, "key '{}' names no parameter of this optimizer", key);
      if (!contains(scalar_names, field)) fail(op, "unexpected key '{}' ({} keeps no '{}')", key, name_, field);
      state[pname].scalars[field] = v;
    } else if (split_group_key(key, gi, field)) {
      if (gi >= groups.size()) fail(op, "key '{}': this optimizer has {} param groups", key, groups.size());
      if (field == "lr") groups[gi].lr = v;
      else if (field == "weight_decay") groups[gi].weight_decay = v;
      else fail(op, "unexpected key '{}'", key);
      group_fields[gi].insert(field);
    } else if (starts_with(key, "optimizer.") && key.size() > 10) {
      extra[key.substr(10)] = v;
    } else {
      fail(op, "unexpected key '{}'", key);
    }
  }
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    for (const char* f : {"lr", "weight_decay"})
      if (!group_fields[gi].count(f)) fail(op, "missing key 'group.{}.{}'", gi, f);
    check_group(groups[gi], gi);
  }
  validate_state(state, extra);

  // Commit.
  state_ = std::move(state);
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    groups_[gi].lr = groups[gi].lr;
    groups_[gi].weight_decay = groups[gi].weight_decay;
  }
  load_extra(extra);
}

}  // namespace define::optim
