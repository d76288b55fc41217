// Optimizer base: parameter groups (each with its own lr and weight decay), step(), zero_grad()
// and the optimizer state as named tensors + scalars (state_dict / load_state_dict) so that it can
// go into a checkpoint next to the model's parameters.
//
// Parameters come as named tensors (a vector of (name, tensor) pairs, or any range of such pairs,
// e.g. a Module's named_parameters()) or as plain tensors, named "param.0", "param.1", ... by
// position. The names key the state,
// so a checkpoint written by one process loads into another whose parameters have the same names.
//
// Updates run under NoGradGuard with the in-place elementwise kernels of kernels/elementwise.h,
// which dispatch on the tensor's device: the same optimizer runs CPU, emulated-device and GPU
// parameters unchanged. Subclasses implement update() for one parameter.
#pragma once

#include <concepts>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace define::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// Any other range of (name, tensor) pairs (e.g. an ordered dict of parameters), so optimizers and
// clipping accept it without depending on the container's type.
template <class R>
concept NamedTensorRange = !std::same_as<std::remove_cvref_t<R>, NamedParameters> && requires(const R& r) {
  { r.begin()->first } -> std::convertible_to<std::string>;
  { r.begin()->second } -> std::convertible_to<Tensor>;
  r.end();
};
template <NamedTensorRange R>
NamedParameters to_named_parameters(const R& r) {
  NamedParameters out;
  for (const auto& item : r) out.emplace_back(item.first, item.second);
  return out;
}

// Plain tensors named "<prefix>0", "<prefix>1", ... by position.
NamedParameters name_parameters(const std::vector<Tensor>& params, const std::string& prefix = "param.");

// What the caller asks for: a set of parameters and optional per-group overrides of the
// optimizer's lr and weight decay (e.g. no decay for biases and layer-norm gains).
struct GroupSpec {
  NamedParameters params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// A group as the optimizer holds it; lr is what learning-rate schedules change.
struct ParamGroup {
  NamedParameters params;
  double lr = 0;
  double weight_decay = 0;
};

// Checkpointable state. Keys:
//   "state.<param>.<buffer>"  per-parameter tensors (exp_avg, momentum_buffer, ax, ...) and
//                             scalars (step);
//   "group.<i>.lr", "group.<i>.weight_decay"  the groups' hyper-parameters (so a resumed run
//                             continues with the scheduled lr);
//   "optimizer.<name>"        optimizer-wide scalars (NT-ASGD's trigger state).
// Step counts are stored as doubles (exact up to 2^53).
struct OptimizerState {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (parameters without one are skipped and
  // their state does not advance, as in PyTorch).
  void step();
  // Drops every gradient (set_to_none) or fills it with zeros in place.
  void zero_grad(bool set_to_none = true);

  const std::string& name() const { return name_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  std::size_t num_groups() const { return groups_.size(); }
  double lr(std::size_t group = 0) const;
  void set_lr(double lr);  // every group
  void set_lr(std::size_t group, double lr);
  void set_weight_decay(std::size_t group, double weight_decay);
  std::vector<Tensor> parameters() const;
  NamedParameters named_parameters() const;

  // A snapshot: the tensors are copies, so later steps do not change a saved state.
  OptimizerState state_dict() const;
  // Restores a state_dict() of an optimizer of the same kind over parameters with the same names.
  // Tensors are copied onto each parameter's device and dtype. Throws define::Error naming the
  // offending key (unknown, missing, wrong shape) and changes nothing in that case.
  void load_state_dict(const OptimizerState& state);

 protected:
  // Per-parameter state, created lazily by update() on the parameter's first step.
  struct ParamState {
    std::map<std::string, Tensor> tensors;
    std::map<std::string, double> scalars;
  };

  Optimizer(std::string name, std::vector<GroupSpec> groups, double default_lr, double default_weight_decay);

  // Updates `param` in place from `grad` (same shape, dtype and device). Runs under NoGradGuard.
  virtual void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // Names of the state buffers this optimizer may keep per parameter (for load_state_dict).
  virtual std::vector<std::string> state_tensor_names() const = 0;
  virtual std::vector<std::string> state_scalar_names() const { return {}; }
  // Hooks around one step(), under NoGradGuard.
  virtual void before_step() {}
  virtual void after_step() {}
  // Optimizer-wide scalars ("optimizer.<name>" keys, stored without the prefix).
  virtual void save_extra(std::map<std::string, double>& /*extra*/) const {}
  // Checks a parsed state before anything is committed; throws naming the key. The default
  // requires each parameter to have all of its buffers or none, and no optimizer-wide scalars.
  virtual void validate_state(const std::map<std::string, ParamState>& state,
                              const std::map<std::string, double>& extra) const;
  // Commits the optimizer-wide scalars after validate_state() accepted them.
  virtual void load_extra(const std::map<std::string, double>& /*extra*/) {}

  // Throws "<name>: <what> must be <requirement> (got <value>)" unless ok.
  void check_hparam(bool ok, const std::string& what, double value, const char* requirement) const;
  void check_group(const ParamGroup& g, std::size_t index) const;

  ParamState* find_state(const std::string& param_name);
  std::map<std::string, ParamState> state_;  // keyed by parameter name

 private:
  std::string name_;
  std::vector<ParamGroup> groups_;
};

// In-place helpers shared by the optimizers (device-agnostic kernels; no autograd).
namespace detail {
void scale_(const Tensor& x, double s);                               // x *= s
void add_scaled_(const Tensor& x, const Tensor& y, double alpha);     // x += alpha * y
void copy_(const Tensor& dst, const Tensor& src);                     // dst = src
Tensor clone_detached(const Tensor& t);                               // fresh contiguous copy
}  // namespace detail

}  // namespace define::optim
