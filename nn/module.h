// Module: the base of every layer and model. A module owns named parameters (trainable leaf
// tensors), named buffers (state that is saved but not trained) and named child modules, each in
// registration order. Names compose with dots, so a deep model's tensors read
// `decoder.layers.3.dextra.glt.2.weight`, and that name is the key in state dicts and checkpoints.
//
// Traversal order (parameters(), named_parameters(), state_dict()) is pre-order: a module's own
// parameters, then its buffers, then each child in registration order (PyTorch's order, so names and
// orderings line up with reference implementations).
//
// Tensors live in slots owned by the module; register_parameter() returns a reference to the
// slot and forward code reads the parameter through it (not through a copy taken at construction).
// That is what lets ParameterSwap substitute a transformed weight for one call (WeightDrop,
// EmbeddingDropout). to() and load_state_dict() change tensors in place (same TensorImpl), so
// every handle to a parameter, including an optimizer's, stays valid across them.
//
// Forward signatures differ between layers (an LSTM takes a state, a DeFINE unit a sequence), so
// forward is not virtual here; each layer declares its own, and containers adapt (Sequential).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "nn/ordered_dict.h"

namespace define::nn {

using StateDict = OrderedDict<Tensor>;

// What a non-strict load_state_dict skipped (a strict load throws instead).
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the model, not in the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, not in the model
};

class Module {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  // Slots are referenced by address from layer code, and children are shared: copying would
  // silently alias or dangle, so modules are neither copyable nor movable.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The layer's class name, for summaries and error messages ("Linear").
  const std::string& type_name() const { return type_name_; }

  // ---- registration. Names are non-empty, contain no '.', and are unique within the module
  // across parameters, buffers and children. The returned reference stays valid for the module's
  // lifetime.
  // A parameter: a floating leaf tensor; requires_grad is set as given (false = frozen).
  // Registering a tensor that is already another module's parameter ties the two (shared weights
  // are counted and handed to optimizers once).
  Tensor& register_parameter(std::string name, Tensor value, bool requires_grad = true);
  // A buffer: state that moves with to() but gets no gradient; persistent ones are in state_dict().
  Tensor& register_buffer(std::string name, Tensor value, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

  // ---- traversal (each tensor / module once, even when shared).
  std::vector<Tensor> parameters() const;
  OrderedDict<Tensor> named_parameters() const;
  std::vector<Tensor> buffers() const;
  OrderedDict<Tensor> named_buffers() const;
  // Direct children, in registration order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // This module ("") and every descendant ("decoder", "decoder.layers.3", ...), pre-order.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // A descendant by dotted path ("decoder.layers.3"); "" is this module. Throws naming the
  // first missing component.
  Module& submodule(std::string_view path);
  const Module& submodule(std::string_view path) const;
  template <class M>
  M& submodule_as(std::string_view path) {
    Module& m = submodule(path);
    auto* typed = dynamic_cast<M*>(&m);
    if (!typed) fail_wrong_type(path, m);
    return *typed;
  }
  // A parameter by dotted name ("layers.0.weight"); throws naming the missing key.
  const Tensor& parameter(std::string_view name) const;
  bool has_parameter(std::string_view name) const;

  // ---- mode. train() sets this module and every current descendant (a child registered later
  // keeps its own mode); dropout layers read is_training().
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- random stream used by this module's stochastic layers (dropout masks); the default
  // generator unless set. set_generator applies to every current descendant too. The generator
  // must outlive the module's use of it.
  Generator& generator() const { return generator_ ? *generator_ : default_generator(); }
  void set_generator(Generator& gen);

  // ---- sizes. Elements over every distinct parameter (trainable_only: requires_grad ones).
  std::int64_t num_parameters(bool trainable_only = false) const;
  // Own parameters by name, then children by name, each with its element count. A tensor shared
  // between entries counts at its first entry only, so the counts add up to num_parameters().
  std::vector<std::pair<std::string, std::int64_t>> parameter_breakdown() const;
  // Indented tree "name (Type): 461,150" down to max_depth levels of children (-1: all).
  std::string summary(int max_depth = -1) const;

  // ---- gradients. set_to_none drops each .grad (the next backward allocates it afresh);
  // otherwise existing gradients are filled with zeros.
  void zero_grad(bool set_to_none = true);

  // ---- placement. Moves (converts) every parameter, buffer and existing gradient in place.
  // to(DType) converts floating tensors only (integer buffers such as token ids stay as they
  // are). Views between two tensors of the model are not preserved (each gets its own storage).
  Module& to(Device device);
  Module& to(DType dtype);

  // ---- state. Every parameter and persistent buffer by dotted name, pre-order. Values are
  // detached aliases sharing storage with the model: later training steps show through, so use
  // deep_copy() for a snapshot. A module shared under two names appears under both.
  StateDict state_dict() const;
  // Copies values into the model's tensors (cast to the model's dtype and device). Checks
  // everything before copying anything. Shape mismatches always throw
  //   "load_state_dict: shape mismatch for 'w': checkpoint [3,4] vs model [4,4]";
  // with strict, so do missing and unexpected keys
  //   "load_state_dict: missing key 'encoder.weight'", "load_state_dict: unexpected key 'x'".
  // Without strict, those are skipped and reported in the result.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

 private:
  friend class ParameterSwap;
  struct Slot {
    std::string name;
    Tensor value;
    bool persistent = true;
  };
  // fn(prefix, module) for this module and every descendant, pre-order; prefix is "" or ends in
  // '.'. With dedupe, a module reachable along two paths is visited once (first path).
  template <class Fn>
  void walk(const std::string& prefix, bool dedupe, Fn&& fn) const;
  void add_child(std::string name, std::shared_ptr<Module> child);
  void check_new_name(const char* op, const std::string& name) const;
  Slot* find_parameter_slot(std::string_view name);
  [[noreturn]] void fail_wrong_type(std::string_view path, const Module& m) const;
  void convert_in_place(const std::function<Tensor(const Tensor&)>& convert, bool floating_only);

  std::string type_name_;
  bool training_ = true;
  Generator* generator_ = nullptr;
  std::deque<Slot> params_;   // deque: push_back keeps references to earlier slots valid
  std::deque<Slot> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// A snapshot: each value cloned into fresh storage (the model may keep training).
StateDict deep_copy(const StateDict& state);

// For its lifetime, parameter `name` (dotted, relative to `module`) reads as `value` in forward
// code; the original tensor is put back on destruction. `value` must have the parameter's shape
// and is usually computed from it (a dropped or masked weight), so gradients still reach the
// original leaf. Movable, so a wrapper can hold several in a vector.
class ParameterSwap {
 public:
  ParameterSwap(Module& module, std::string_view name, Tensor value);
  ~ParameterSwap();
  ParameterSwap(ParameterSwap&& o) noexcept : slot_(std::exchange(o.slot_, nullptr)), original_(std::move(o.original_)) {}
  ParameterSwap(const ParameterSwap&) = delete;
  ParameterSwap& operator=(const ParameterSwap&) = delete;
  ParameterSwap& operator=(ParameterSwap&&) = delete;

 private:
  Tensor* slot_ = nullptr;
  Tensor original_;
};

// "461,150": counts in summaries and logs.
std::string format_count(std::int64_t n);

}  // namespace define::nn
