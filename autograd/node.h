// The autograd graph. Every differentiable op that runs with grad mode on and at least one input
// requiring gradients records a Node: its backward closure, the edges to the nodes that produced
// its inputs, and a sequence number. backward() replays the recorded nodes in decreasing sequence
// number, i.e. the tape in reverse recording order, which is deterministic and topological
// (a node is always recorded after the producers of its inputs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace define {

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  std::uint32_t input_nr = 0;  // which output slot of `node` receives the gradient
};

// What backward needs to know about each output to make a zero gradient for unused outputs.
struct OutputInfo {
  Shape shape;
  DType dtype;
  Device device;
};

struct BackwardArgs {
  std::vector<Tensor> grad_outputs;     // one per output; zeros for outputs that got no gradient
  std::vector<bool> needs_input_grad;   // one per input
  // Set by the engine: pending(i)'s lookup.
  std::function<Tensor(std::size_t)> pending_lookup;
  const Tensor& grad(std::size_t i = 0) const { return grad_outputs.at(i); }
  bool needs(std::size_t i) const { return needs_input_grad.at(i); }
  // The gradient other nodes have already sent input i, when the engine holds the only handle to
  // it (undefined otherwise). A node may add its gradient for input i into it in place and return
  // an undefined tensor for i; the sum is then already where it belongs. For a sparse gradient
  // meeting a dense one: a tied table's embedding backward scatters its rows into the output
  // layer's dense gradient instead of building a second dense table to add. Looked up when asked
  // (a hash lookup per call), since almost no node asks.
  Tensor pending(std::size_t i) const { return pending_lookup ? pending_lookup(i) : Tensor(); }
};

// Returns one gradient per input (an undefined Tensor where none is needed).
using BackwardFn = std::function<std::vector<Tensor>(const BackwardArgs&)>;

class Node {
 public:
  Node(std::string name, std::uint64_t seq) : name_(std::move(name)), seq_(seq) {}
  virtual ~Node() = default;

  const std::string& name() const { return name_; }
  std::uint64_t seq() const { return seq_; }
  std::vector<Edge> next_edges;
  std::vector<OutputInfo> outputs;
  std::vector<Shape> input_shapes;  // checked against the gradients backward returns

  virtual std::vector<Tensor> apply(const BackwardArgs& args) = 0;
  // Drops the closure and its saved tensors (after a backward without retain_graph).
  virtual void release() {}
  virtual bool released() const { return false; }

 private:
  std::string name_;
  std::uint64_t seq_;
};

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::uint64_t seq, BackwardFn fn)
      : Node(std::move(name), seq), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const BackwardArgs& args) override;
  void release() override { fn_ = nullptr; }
  bool released() const override { return !fn_; }

 private:
  BackwardFn fn_;
};

// Sink for a leaf tensor: adds the incoming gradient into leaf.grad.
class AccumulateGrad final : public Node {
 public:
  AccumulateGrad(std::shared_ptr<TensorImpl> leaf, std::uint64_t seq)
      : Node("AccumulateGrad", seq), leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const BackwardArgs& args) override;

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

std::uint64_t next_sequence_number();

}  // namespace define
