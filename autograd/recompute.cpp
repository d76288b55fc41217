#include "autograd/recompute.h"

#include <optional>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"

namespace define {
namespace {

class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(GradMode::enabled()) { GradMode::set_enabled(on); }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

class GeneratorStateGuard {
 public:
  GeneratorStateGuard(Generator& g, GeneratorState s) : g_(g), prev_(g.state()) { g_.set_state(s); }
  ~GeneratorStateGuard() { g_.set_state(prev_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  Generator& g_;
  GeneratorState prev_;
};

}  // namespace

Tensor recompute(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& params, Generator& generator) {
  std::vector<Tensor> edges;  // the node's inputs: the defined inputs, then the parameters
  for (const Tensor& t : inputs)
    if (t.defined()) edges.push_back(t);
  for (const Tensor& p : params) edges.push_back(p);
  if (!needs_grad(edges)) return fn(inputs);

  const GeneratorState start = generator.state();
  const std::optional<DType> lower = autocast::lower_dtype();  // the re-run casts as the forward did
  Tensor out;
  {
    const GradModeGuard off(false);
    out = fn(inputs);
  }
  record("recompute", edges, {out}, [fn, saved = inputs, params, start, lower, &generator](const BackwardArgs& a) {
    // Leaves standing in for the inputs, so the re-run's graph ends at them.
    std::vector<Tensor> leaves;
    std::vector<Tensor> wrt;  // what the re-run's gradients are taken for, in the node's input order
    for (const Tensor& t : saved) {
      if (!t.defined()) {
        leaves.push_back(t);
        continue;
      }
      Tensor leaf = detach(t);
      if (t.requires_grad()) leaf.set_requires_grad(true);
      leaves.push_back(leaf);
      wrt.push_back(leaf);
    }
    for (const Tensor& p : params) wrt.push_back(p);
    Tensor again;
    {
      const GradModeGuard on(true);
      const GeneratorStateGuard same_draws(generator, start);
      const autocast::Scope same_casts(lower);
      again = fn(leaves);
    }
    // Gradients only for what requires them (grad() refuses the rest); zeros elsewhere are not
    // needed, the engine skips inputs whose needs() is false.
    std::vector<Tensor> asked;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < wrt.size(); ++i)
      if (wrt[i].requires_grad() && a.needs(i)) {
        asked.push_back(wrt[i]);
        where.push_back(i);
      }
    std::vector<Tensor> grads(wrt.size());
    if (asked.empty() || !again.requires_grad()) return grads;
    const std::vector<Tensor> g = grad(again, asked, a.grad());
    for (std::size_t k = 0; k < where.size(); ++k) grads[where[k]] = g[k];
    return grads;
  });
  return out;
}

}  // namespace define
