#include "nn/module.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "autograd/elementwise.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/views.h"

namespace define::nn {

namespace {

// "missing key 'a'", or "missing key 'a' (and 2 more: 'b', 'c')": the first key is what the
// user needs to act on; the rest shows how far the mismatch goes without flooding the message.
std::string key_list(const char* what, const std::vector<std::string>& keys) {
  std::string s = fmt::format("{} key '{}'", what, keys.front());
  if (keys.size() > 1) {
    const std::size_t shown = std::min<std::size_t>(keys.size() - 1, 5);
    s += fmt::format(" (and {} more: ", keys.size() - 1);
    for (std::size_t i = 1; i <= shown; ++i) s += fmt::format("{}'{}'", i > 1 ? ", " : "", keys[i]);
    s += keys.size() - 1 > shown ? ", ...)" : ")";
  }
  return s;
}

// "decoder.layers.3" -> {"decoder", "layers", "3"}; "" -> {}.
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const std::size_t dot = path.find('.');
    parts.push_back(path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return parts;
}

// The descendant at `path`, or null (no throw: callers name the key they were looking for).
Module* find_module(Module& root, std::string_view path) {
  Module* m = &root;
  for (std::string_view part : split_path(path)) {
    Module* next = nullptr;
    for (const auto& [name, child] : m->named_children())
      if (name == part) next = child.get();
    if (!next) return nullptr;
    m = next;
  }
  return m;
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

template <class Fn>
void Module::walk(const std::string& prefix, bool dedupe, Fn&& fn) const {
  std::unordered_set<const Module*> seen;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& p) {
    if (dedupe && !seen.insert(&m).second) return;
    fn(p, m);
    for (const auto& [name, child] : m.children_) visit(*child, p + name + ".");
  };
  visit(*this, prefix);
}

void Module::check_new_name(const char* op, const std::string& name) const {
  if (name.empty()) fail(op, "empty name in {}", type_name_);
  if (name.find('.') != std::string::npos) fail(op, "name '{}' must not contain '.'", name);
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) {
      if constexpr (requires { e.name; }) return e.name == name;
      else return e.first == name;
    });
  };
  if (taken(params_) || taken(buffers_) || taken(children_))
    fail(op, "'{}' is already registered in {}", name, type_name_);
}

Tensor& Module::register_parameter(std::string name, Tensor value, bool requires_grad) {
  const char* op = "register_parameter";
  check_new_name(op, name);
  if (!value.defined()) fail(op, "'{}' is an undefined tensor", name);
  if (!is_floating(value.dtype())) fail(op, "'{}' must be a floating tensor, got {}", name, dtype_name(value.dtype()));
  if (!value.is_leaf()) fail(op, "'{}' must be a leaf tensor (detach it first)", name);
  value.set_requires_grad(requires_grad);
  params_.push_back({std::move(name), std::move(value), true});
  return params_.back().value;
}

Tensor& Module::register_buffer(std::string name, Tensor value, bool persistent) {
  check_new_name("register_buffer", name);
  if (!value.defined()) fail("register_buffer", "'{}' is an undefined tensor", name);
  buffers_.push_back({std::move(name), std::move(value), persistent});
  return buffers_.back().value;
}

void Module::add_child(std::string name, std::shared_ptr<Module> child) {
  const char* op = "register_module";
  check_new_name(op, name);
  if (!child) fail(op, "'{}' is a null module", name);
  bool cycle = false;
  child->walk("", true, [&](const std::string&, const Module& m) { cycle = cycle || &m == this; });
  if (cycle) fail(op, "registering '{}' in {} would make a cycle", name, type_name_);
  children_.emplace_back(std::move(name), std::move(child));
}

std::vector<Tensor> Module::parameters() const { return named_parameters().values(); }

OrderedDict<Tensor> Module::named_parameters() const {
  OrderedDict<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;  // tied weights: listed once, under the first name
  walk("", true, [&](const std::string& p, const Module& m) {
    for (const Slot& s : m.params_)
      if (seen.insert(s.value.impl()).second) out.insert(p + s.name, s.value);
  });
  return out;
}

std::vector<Tensor> Module::buffers() const { return named_buffers().values(); }

OrderedDict<Tensor> Module::named_buffers() const {
  OrderedDict<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  walk("", true, [&](const std::string& p, const Module& m) {
    for (const Slot& s : m.buffers_)
      if (seen.insert(s.value.impl()).second) out.insert(p + s.name, s.value);
  });
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  walk("", true, [&](const std::string& p, const Module& m) {
    // Strip the trailing '.' of the prefix: "decoder.layers.3." names module "decoder.layers.3".
    out.emplace_back(p.empty() ? p : p.substr(0, p.size() - 1), const_cast<Module*>(&m));
  });
  return out;
}

Module& Module::submodule(std::string_view path) {
  Module* m = find_module(*this, path);
  if (!m) fail("submodule", "no module '{}' in {}", path, type_name_);
  return *m;
}

const Module& Module::submodule(std::string_view path) const { return const_cast<Module*>(this)->submodule(path); }

void Module::fail_wrong_type(std::string_view path, const Module& m) const {
  fail("submodule", "module '{}' is a {}, not the requested type", path, m.type_name());
}

Module::Slot* Module::find_parameter_slot(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  Module* owner = dot == std::string_view::npos ? this : find_module(*this, name.substr(0, dot));
  const std::string_view leaf = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (!owner) return nullptr;
  for (Slot& s : owner->params_)
    if (s.name == leaf) return &s;
  return nullptr;
}

const Tensor& Module::parameter(std::string_view name) const {
  Slot* s = const_cast<Module*>(this)->find_parameter_slot(name);
  if (!s) fail("parameter", "no parameter '{}' in {}", name, type_name_);
  return s->value;
}

bool Module::has_parameter(std::string_view name) const {
  return const_cast<Module*>(this)->find_parameter_slot(name) != nullptr;
}

void Module::train(bool on) {
  // walk() hands out const modules; this is a non-const method on their owner, so the cast is safe.
  walk("", true, [&](const std::string&, const Module& m) { const_cast<Module&>(m).training_ = on; });
}

void Module::set_generator(Generator& gen) {
  walk("", true, [&](const std::string&, const Module& m) { const_cast<Module&>(m).generator_ = &gen; });
}

std::int64_t Module::num_parameters(bool trainable_only) const {
  std::int64_t n = 0;
  for (const auto& [name, t] : named_parameters())
    if (!trainable_only || t.requires_grad()) n += t.numel();
  return n;
}

std::vector<std::pair<std::string, std::int64_t>> Module::parameter_breakdown() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const Slot& s : params_) out.emplace_back(s.name, seen.insert(s.value.impl()).second ? s.value.numel() : 0);
  for (const auto& [name, child] : children_) {
    std::int64_t n = 0;
    child->walk("", true, [&](const std::string&, const Module& m) {
      for (const Slot& s : m.params_)
        if (seen.insert(s.value.impl()).second) n += s.value.numel();
    });
    out.emplace_back(name, n);
  }
  return out;
}

std::string Module::summary(int max_depth) const {
  std::string out = fmt::format("{}: {}\n", type_name_, format_count(num_parameters()));
  std::function<void(const Module&, int)> rec = [&](const Module& m, int depth) {
    if (max_depth >= 0 && depth > max_depth) return;
    for (const auto& [name, child] : m.children_) {
      out += fmt::format("{:{}}{} ({}): {}\n", "", 2 * depth, name, child->type_name(),
                         format_count(child->num_parameters()));
      rec(*child, depth + 1);
    }
  };
  rec(*this, 1);
  return out;
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    if (set_to_none) {
      if (p.has_autograd_meta()) p.set_grad(Tensor());
    } else if (Tensor g = p.grad(); g.defined()) {
      zero_(g);
    }
  }
}

void Module::convert_in_place(const std::function<Tensor(const Tensor&)>& convert, bool floating_only) {
  NoGradGuard no_grad;
  std::unordered_set<const TensorImpl*> seen;
  auto move = [&](const Tensor& t) {
    if (!seen.insert(t.impl()).second || (floating_only && !is_floating(t.dtype()))) return;
    const Tensor moved = convert(t.alias());
    if (moved.impl() == t.impl() || moved.shares_storage_with(t)) return;  // nothing to do
    // Rewrite the TensorImpl itself rather than the slot: every handle to this tensor (layer
    // code, optimizers, tied modules) follows it to the new device or dtype.
    TensorImpl& impl = *t.impl();
    impl.storage = moved.storage();
    impl.strides = moved.strides();
    impl.offset = moved.offset();
    impl.dtype = moved.dtype();
    if (Tensor g = t.grad(); g.defined()) t.set_grad(convert(g.alias()));
  };
  walk("", true, [&](const std::string&, const Module& m) {
    for (const Slot& s : m.params_) move(s.value);
    for (const Slot& s : m.buffers_) move(s.value);
  });
}

Module& Module::to(Device device) {
  convert_in_place([device](const Tensor& t) { return to_device(contiguous(t), device); }, false);
  return *this;
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype)) fail("Module::to", "target dtype must be floating, got {}", dtype_name(dtype));
  convert_in_place([dtype](const Tensor& t) { return to_dtype(t, dtype); }, true);
  return *this;
}

StateDict Module::state_dict() const {
  StateDict out;
  walk("", false, [&](const std::string& p, const Module& m) {
    for (const Slot& s : m.params_) out.insert(p + s.name, s.value.alias());
    for (const Slot& s : m.buffers_)
      if (s.persistent) out.insert(p + s.name, s.value.alias());
  });
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  const char* op = "load_state_dict";
  OrderedDict<Tensor*> targets;  // key -> the model's tensor
  walk("", false, [&](const std::string& p, const Module& m) {
    auto& mm = const_cast<Module&>(m);  // non-const method: the cast only restores the owner's constness
    for (Slot& s : mm.params_) targets.insert(p + s.name, &s.value);
    for (Slot& s : mm.buffers_)
      if (s.persistent) targets.insert(p + s.name, &s.value);
  });

  LoadResult r;
  for (const auto& [key, dst] : targets)
    if (!state.contains(key)) r.missing_keys.push_back(key);
  for (const auto& [key, src] : state)
    if (!targets.contains(key)) r.unexpected_keys.push_back(key);
  if (strict && !r.missing_keys.empty()) fail(op, "{}", key_list("missing", r.missing_keys));
  if (strict && !r.unexpected_keys.empty()) fail(op, "{}", key_list("unexpected", r.unexpected_keys));

  // Validate every pair before the first copy, so a failed load leaves the model untouched.
  for (const auto& [key, dst] : targets) {
    const Tensor* src = state.find(key);
    if (!src) continue;
    if (!src->defined()) fail(op, "'{}' is an undefined tensor", key);
    if (src->shape() != dst->shape())
      fail(op, "shape mismatch for '{}': checkpoint {} vs model {}", key, shape_str(src->shape()),
           shape_str(dst->shape()));
    if (is_floating(src->dtype()) != is_floating(dst->dtype()))
      fail(op, "dtype mismatch for '{}': checkpoint {} vs model {}", key, dtype_name(src->dtype()),
           dtype_name(dst->dtype()));
  }
  NoGradGuard no_grad;
  for (const auto& [key, dst] : targets) {
    const Tensor* src = state.find(key);
    if (!src) continue;
    Tensor v = to_dtype(detach(*src), dst->dtype());
    if (v.device() != dst->device()) v = to_device(contiguous(v), dst->device());
    copy_(*dst, v);
  }
  return r;
}

StateDict deep_copy(const StateDict& state) {
  NoGradGuard no_grad;
  StateDict out;
  for (const auto& [key, t] : state) out.insert(key, clone(detach(t)));
  return out;
}

ParameterSwap::ParameterSwap(Module& module, std::string_view name, Tensor value) {
  Module::Slot* s = module.find_parameter_slot(name);
  if (!s) fail("ParameterSwap", "no parameter '{}' in {}", name, module.type_name());
  if (!value.defined() || value.shape() != s->value.shape())
    fail("ParameterSwap", "'{}' has shape {}; the replacement has {}", name, shape_str(s->value.shape()),
         value.defined() ? shape_str(value.shape()) : "none");
  original_ = std::exchange(s->value, std::move(value));
  slot_ = &s->value;
}

ParameterSwap::~ParameterSwap() {
  if (slot_) *slot_ = std::move(original_);
}

std::string format_count(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace define::nn
