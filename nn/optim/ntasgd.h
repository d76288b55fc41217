// Non-monotonically triggered averaged SGD (NT-ASGD, Merity et al. 2017, "Regularizing and
// Optimizing LSTM Language Models", the AWD-LSTM optimizer).
//
// Plain SGD (with optional L2 weight decay, p -= lr * (g + wd * p)) until the validation metric
// (lower is better: loss or perplexity) stops improving; from then on the same SGD steps continue
// and an average of the iterates is kept beside the parameters. The trigger is the paper's (and
// AWD-LSTM's main.py): evaluation k with value v switches to averaging when more than `nonmono`
// evaluations have been logged and v is worse than the best of all logged evaluations except
// the last `nonmono` ones:
//     k > nonmono  and  v > min(logs[0 .. k - nonmono - 1])
// i.e. nothing in the last `nonmono` evaluations, nor this one, beat what was reached before them.
//
// Averaging: after the trigger, each step() is followed by ax = ax + (p - ax) / n, n the number of
// steps since the trigger, so ax is the mean of the parameter values after each of those steps
// (parameters without a gradient in a step count with their unchanged value). This is PyTorch's
// ASGD with t0 = 0, lambd = 0, which is what AWD-LSTM switches to. Until the first averaged step,
// ax equals the parameters at the trigger.
//
// Evaluate with the averaged weights by swapping them into the parameters (swap_in_averaged()
// ... swap_back(), or the AveragedWeights guard); step(), state_dict() and load_state_dict()
// refuse while they are swapped in.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/optim/optimizer.h"

namespace define::optim {

struct NTASGDOptions {
  double lr = 30;  // AWD-LSTM's default for its LSTM language model
  double weight_decay = 0;
  std::int64_t nonmono = 5;  // >= 1
};

class NTASGD : public Optimizer {
 public:
  NTASGD(std::vector<GroupSpec> groups, NTASGDOptions opt = {});
  NTASGD(NamedParameters params, NTASGDOptions opt = {});
  NTASGD(const std::vector<Tensor>& params, NTASGDOptions opt = {});
  template <NamedTensorRange R>
  explicit NTASGD(const R& params, NTASGDOptions opt = {}) : NTASGD(to_named_parameters(params), opt) {}

  // Logs one validation result; returns true when this call switched to averaging.
  bool observe(double val_metric);
  // Switches to averaging now (no-op when already averaging).
  void start_averaging();
  bool averaging() const { return averaging_; }
  std::int64_t averaged_steps() const { return avg_steps_; }  // steps since the trigger
  const std::vector<double>& validation_log() const { return log_; }
  // The averaged copy of a parameter (undefined before the trigger).
  Tensor averaged(const std::string& param_name) const;

  // Copies the averaged weights into the parameters, keeping the live ones aside; swap_back()
  // restores them. swap_in_averaged() throws before the trigger or when already swapped in.
  void swap_in_averaged();
  void swap_back();
  bool swapped_in() const { return !backup_.empty(); }

  const NTASGDOptions& options() const { return opt_; }

 protected:
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::vector<std::string> state_tensor_names() const override { return {"ax"}; }
  void before_step() override;
  void after_step() override;
  void save_extra(std::map<std::string, double>& extra) const override;
  void validate_state(const std::map<std::string, ParamState>& state,
                      const std::map<std::string, double>& extra) const override;
  void load_extra(const std::map<std::string, double>& extra) override;

 private:
  void check_not_swapped(const char* what) const;

  NTASGDOptions opt_;
  bool averaging_ = false;
  std::int64_t avg_steps_ = 0;
  std::vector<double> log_;
  std::vector<Tensor> backup_;  // live parameters while the averaged ones are swapped in
};

// Evaluation scope with the averaged weights swapped in (nothing happens before the trigger).
class AveragedWeights {
 public:
  explicit AveragedWeights(NTASGD& opt) : opt_(opt), active_(opt.averaging()) {
    if (active_) opt_.swap_in_averaged();
  }
  ~AveragedWeights() {
    if (active_) opt_.swap_back();
  }
  AveragedWeights(const AveragedWeights&) = delete;
  AveragedWeights& operator=(const AveragedWeights&) = delete;

 private:
  NTASGD& opt_;
  bool active_;
};

}  // namespace define::optim
