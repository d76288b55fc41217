#include "autograd/function.h"

#include <atomic>

namespace define {

std::uint64_t next_sequence_number() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  t_ = t.alias();
  version_ = t.version();
}

Tensor SavedTensor::get(const char* op) const {
  if (t_.defined() && t_.version() != version_)
    fail(std::string(op) + " backward",
         "a tensor saved for backward (shape {}) was modified in place after it was saved "
         "(version {} at save, now {}); clone it before modifying, or modify a copy",
         shape_str(t_.shape()), version_, t_.version());
  return t_;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& m = t.autograd_meta();
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  // A leaf: one AccumulateGrad per leaf, shared by every op that uses it.
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr(), next_sequence_number());
    acc->outputs.push_back({t.shape(), t.dtype(), t.device()});
    acc->input_shapes.push_back(t.shape());
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void record(const std::string& name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn fn) {
  std::vector<Edge> edges;
  std::vector<Shape> in_shapes;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    edges.push_back(gradient_edge(t));
    in_shapes.push_back(t.defined() ? t.shape() : Shape{});
  }
  auto node = std::make_shared<FunctionNode>(name, next_sequence_number(), std::move(fn));
  node->next_edges = std::move(edges);
  node->input_shapes = std::move(in_shapes);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->outputs.push_back({out.shape(), out.dtype(), out.device()});
    if (!is_floating(out.dtype())) continue;  // integer outputs carry no gradient
    AutogradMeta& m = out.autograd_meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = static_cast<std::uint32_t>(i);
  }
}

}  // namespace define
