#include "nn/weight_drop.h"

#include <algorithm>

#include "autograd/dropout.h"
#include "nn/dropout.h"

namespace define::nn {

WeightDropBase::WeightDropBase(std::shared_ptr<Module> module, std::vector<std::string> weight_names, double p)
    : Module("WeightDrop"), inner_(module.get()), names_(std::move(weight_names)), p_(p) {
  check_dropout_probability("WeightDrop", p);
  if (!module) fail("WeightDrop", "null module");
  if (names_.empty()) fail("WeightDrop", "no weights named");
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (!module->has_parameter(names_[i]))
      fail("WeightDrop", "{} has no parameter '{}'", module->type_name(), names_[i]);
    if (std::find(names_.begin(), names_.begin() + static_cast<std::ptrdiff_t>(i), names_[i]) !=
        names_.begin() + static_cast<std::ptrdiff_t>(i))
      fail("WeightDrop", "weight '{}' named twice", names_[i]);
  }
  register_module("module", std::move(module));
}

std::vector<ParameterSwap> WeightDropBase::drop_weights() {
  std::vector<ParameterSwap> swaps;
  if (!is_training() || p_ == 0.0) return swaps;
  swaps.reserve(names_.size());
  for (const std::string& name : names_)
    swaps.emplace_back(*inner_, name, dropout(inner_->parameter(name), p_, true, generator()));
  return swaps;
}

}  // namespace define::nn
