#include "autograd/engine.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"

namespace define {
namespace {

// Everything reachable from the root, in reverse recording order (the tape, replayed backwards).
std::vector<Node*> collect_tape(Node* root) {
  std::vector<Node*> nodes;
  std::unordered_set<Node*> seen{root};
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    nodes.push_back(n);
    for (const Edge& e : n->next_edges)
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->seq() > b->seq(); });
  return nodes;
}

void add_gradient(std::vector<Tensor>& slot_grads, std::uint32_t slot, const Tensor& g) {
  Tensor& cur = slot_grads[slot];
  if (!cur.defined()) {
    cur = g;
    return;
  }
  if (g.shape() != cur.shape())
    fail("backward", "gradients of shapes {} and {} reach one output", shape_str(cur.shape()), shape_str(g.shape()));
  // `cur` may alias a gradient another node still holds: then the sum goes to a fresh tensor in
  // one pass (cur + g written out). When this slot holds the only handle, add in place.
  if (cur.is_exclusive() && cur.dtype() == g.dtype()) {
    kernels::accumulate_into(cur, g);
    return;
  }
  cur = kernels::binary(kernels::BinaryOp::Add, cur, g);
}

// The gradient already summed for the input behind edge e, when the engine's slot holds the only
// handle to it (a node may then add into it in place: BackwardArgs::pending).
Tensor exclusive_pending(const std::unordered_map<Node*, std::vector<Tensor>>& pending, const Edge& e) {
  if (!e.node) return {};
  const auto it = pending.find(e.node.get());
  if (it == pending.end() || e.input_nr >= it->second.size()) return {};
  const Tensor& slot = it->second[e.input_nr];
  return slot.defined() && slot.is_exclusive() ? slot : Tensor();
}

Tensor default_root_grad(const Tensor& root) {
  if (root.numel() != 1)
    fail("backward", "a gradient must be given for a root of shape {} (only one-element roots get "
                     "an implicit gradient of 1)", shape_str(root.shape()));
  return ones(root.shape(), {root.dtype(), root.device()});
}

// Runs the graph below `root`. With `capture` set, gradients reaching those (node, slot) edges
// are stored there instead of flowing on (used by grad()).
void run_backward(const Tensor& root, const Tensor& grad_root_in, BackwardOptions opt,
                  std::unordered_map<Node*, Tensor>* capture) {
  if (!root.defined()) fail("backward", "root tensor is undefined");
  if (!root.requires_grad())
    fail("backward", "the tensor does not require grad and has no grad_fn (was it computed under "
                     "NoGradGuard, or from inputs that do not require grad?)");
  Tensor grad_root = grad_root_in.defined() ? grad_root_in : default_root_grad(root);
  if (grad_root.shape() != root.shape())
    fail("backward", "gradient shape {} does not match root shape {}", shape_str(grad_root.shape()),
         shape_str(root.shape()));

  const Edge root_edge = gradient_edge(root);
  NoGradGuard no_grad;  // backward formulas are not themselves recorded
  std::vector<Node*> tape = collect_tape(root_edge.node.get());
  std::unordered_map<Node*, std::vector<Tensor>> pending;
  pending[root_edge.node.get()].resize(root_edge.node->outputs.size());
  pending[root_edge.node.get()][root_edge.input_nr] = grad_root;

  for (Node* node : tape) {
    auto it = pending.find(node);
    if (it == pending.end()) continue;  // nothing flowed into this node
    std::vector<Tensor> grads = std::move(it->second);
    pending.erase(it);
    grads.resize(node->outputs.size());
    if (capture && capture->count(node)) {
      (*capture)[node] = grads[0];
      continue;
    }
    BackwardArgs args;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const OutputInfo& info = node->outputs[i];
      // Moved, not copied: a gradient whose only handle is here can then be adopted downstream.
      args.grad_outputs.push_back(grads[i].defined() ? std::move(grads[i]) : zeros(info.shape, {info.dtype, info.device}));
    }
    for (const Edge& e : node->next_edges) args.needs_input_grad.push_back(e.node != nullptr);
    args.pending_lookup = [&pending, node](std::size_t i) {
      return i < node->next_edges.size() ? exclusive_pending(pending, node->next_edges[i]) : Tensor();
    };
    std::vector<Tensor> input_grads = node->apply(args);
    args = {};  // its handles on the output gradients would make them look shared below
    if (!opt.retain_graph) node->release();
    if (input_grads.size() > node->next_edges.size())
      fail("backward", "'{}' returned {} gradients for {} inputs", node->name(), input_grads.size(),
           node->next_edges.size());
    for (std::size_t i = 0; i < input_grads.size(); ++i) {
      const Edge& e = node->next_edges[i];
      const Tensor& g = input_grads[i];
      if (!e.node || !g.defined()) continue;
      if (g.shape() != node->input_shapes[i])
        fail("backward", "'{}' produced a gradient of shape {} for input {} of shape {}", node->name(),
             shape_str(g.shape()), i, shape_str(node->input_shapes[i]));
      auto& slots = pending[e.node.get()];
      slots.resize(e.node->outputs.size());
      add_gradient(slots, e.input_nr, g);
    }
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_root, BackwardOptions opt) {
  // Mixed precision's cached weight casts belong to one forward pass: the next one casts again
  // (after an update), and casts a recomputed block made during this pass are not reused.
  autocast::clear_cache();
  run_backward(root, grad_root, opt, nullptr);
  autocast::clear_cache();
}

std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs, const Tensor& grad_root,
                         BackwardOptions opt) {
  std::unordered_map<Node*, Tensor> capture;
  std::vector<Node*> keys;
  std::vector<std::shared_ptr<Node>> keep_alive;  // a leaf's accumulator must outlive this call
  for (const Tensor& t : inputs) {
    if (!t.requires_grad()) fail("grad", "an input does not require grad");
    if (!t.is_leaf()) fail("grad", "inputs must be leaf tensors");
    keep_alive.push_back(gradient_edge(t).node);
    Node* n = keep_alive.back().get();
    capture[n] = Tensor();
    keys.push_back(n);
  }
  run_backward(root, grad_root, opt, &capture);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor g = capture[keys[i]];
    out.push_back(g.defined() ? g : zeros_like(inputs[i]));
  }
  return out;
}

Tensor detach(const Tensor& t) { return t.alias(); }

}  // namespace define

