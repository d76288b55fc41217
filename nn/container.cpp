#include "nn/container.h"

namespace define::nn {

const std::shared_ptr<Module>& ModuleList::item(std::size_t i) const {
  if (i >= items_.size()) fail("ModuleList", "index {} out of range for {} modules", i, items_.size());
  return items_[i];
}

void ModuleList::fail_type(std::size_t i) const {
  fail("ModuleList", "module {} is a {}, not the requested type", i, items_[i]->type_name());
}

Tensor Sequential::forward(const Tensor& x) const {
  Tensor y = x;
  for (const auto& step : steps_) y = step(y);
  return y;
}

}  // namespace define::nn
