#include "models/language_model.h"

#include "autograd/engine.h"
#include "autograd/views.h"
#include "core/error.h"

namespace define::models {

LmState detach(const LmState& state) {
  LmState out;
  for (const auto& [name, t] : state) out.emplace(name, define::detach(t));
  return out;
}

LmState to_device(const LmState& state, Device device) {
  LmState out;
  for (const auto& [name, t] : state) out.emplace(name, define::to_device(t, device));
  return out;
}

std::int64_t LanguageModel::state_batch_dim(const std::string& name) const {
  fail(type_name(), "this model carries no state across windows, yet a state tensor '{}' was asked about", name);
}

void LanguageModel::set_eval_memory(std::int64_t mem_len) {
  if (mem_len > 0) fail(type_name(), "this model keeps no memory across windows; an evaluation memory length ({}) "
                                     "applies to Transformer-XL only", mem_len);
}

}  // namespace define::models
