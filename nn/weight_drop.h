// WeightDrop (DropConnect, Wan et al. 2013; AWD-LSTM applies it to the hidden-to-hidden weights of
// its LSTMs): wraps a module and, in training, replaces some of its parameters by dropout(weight, p)
// for each forward call. One mask per weight per call, shared by everything the call computes
// (every time step of a recurrent layer), which regularises recurrent connections without
// disturbing the recurrence across steps. Identity in eval mode.
//
// The wrapped module is the child "module" (so its tensors read "module.weight_hh" in state dicts)
// and keeps its parameters: the raw weight stays the trained leaf, and gradients reach it through
// the dropout. Any parameter of any descendant can be named ("layers.0.weight_hh").
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace define::nn {

// The type-independent part: validation and the per-call masks.
class WeightDropBase : public Module {
 public:
  double p() const { return p_; }
  const std::vector<std::string>& weight_names() const { return names_; }

 protected:
  WeightDropBase(std::shared_ptr<Module> module, std::vector<std::string> weight_names, double p);
  // The named weights replaced by fresh DropConnect masks for the swaps' lifetime; none in eval
  // mode or with p == 0.
  std::vector<ParameterSwap> drop_weights();

 private:
  Module* inner_;
  std::vector<std::string> names_;
  double p_;
};

template <class M>
class WeightDrop : public WeightDropBase {
 public:
  WeightDrop(std::shared_ptr<M> module, std::vector<std::string> weight_names, double p)
      : WeightDropBase(module, std::move(weight_names), p), module_(std::move(module)) {}

  // The wrapped module's forward, whatever its signature, under dropped weights.
  template <class... Args>
  decltype(auto) forward(Args&&... args) {
    const std::vector<ParameterSwap> swaps = drop_weights();
    return module_->forward(std::forward<Args>(args)...);
  }

  const std::shared_ptr<M>& module() const { return module_; }

 private:
  std::shared_ptr<M> module_;
};

template <class M>
std::shared_ptr<WeightDrop<M>> weight_drop(std::shared_ptr<M> module, std::vector<std::string> weight_names, double p) {
  return std::make_shared<WeightDrop<M>>(std::move(module), std::move(weight_names), p);
}

}  // namespace define::nn
