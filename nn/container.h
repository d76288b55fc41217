// Containers. Children are named "0", "1", ... so a stack of layers reads "layers.3.weight".
//   ModuleList  holds modules of any kind (forward signatures may differ); the owner iterates.
//   Sequential  chains modules whose forward maps one Tensor to one Tensor.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace define::nn {

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}

  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), module));
    return module;
  }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // Item i as M; throws when i is out of range or the item is another type.
  template <class M = Module>
  std::shared_ptr<M> at(std::size_t i) const {
    auto typed = std::dynamic_pointer_cast<M>(item(i));
    if (!typed) fail_type(i);
    return typed;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  const std::shared_ptr<Module>& item(std::size_t i) const;
  [[noreturn]] void fail_type(std::size_t i) const;
  std::vector<std::shared_ptr<Module>> items_;
};

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}

  // M must have Tensor forward(const Tensor&).
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(steps_.size()), module);
    steps_.push_back([m = module.get()](const Tensor& x) { return m->forward(x); });
    return module;
  }
  std::size_t size() const { return steps_.size(); }
  // Each module in order, the output of one the input of the next.
  Tensor forward(const Tensor& x) const;

 private:
  // Raw pointers: the modules are owned as children, which live as long as this container.
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};

}  // namespace define::nn
