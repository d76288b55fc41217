#include "autograd/node.h"

#include "autograd/grad_hooks.h"
#include "kernels/copy.h"

namespace define {
namespace {
thread_local LeafGradientObserver* t_observer = nullptr;
}  // namespace

LeafGradientObserverGuard::LeafGradientObserverGuard(LeafGradientObserver* observer) : previous_(t_observer) {
  t_observer = observer;
}
LeafGradientObserverGuard::~LeafGradientObserverGuard() { t_observer = previous_; }

std::vector<Tensor> FunctionNode::apply(const BackwardArgs& args) {
  if (!fn_)
    fail("backward", "the graph of '{}' was already freed by an earlier backward(); pass "
                     "retain_graph=true to the first backward() to run backward twice", name());
  return fn_(args);
}

std::vector<Tensor> AccumulateGrad::apply(const BackwardArgs& args) {
  const Tensor& g = args.grad(0);
  AutogradMeta& m = *leaf_->autograd;
  if (!m.grad) {
    // The leaf's .grad must be private: the incoming gradient may be shared with other leaves
    // (both inputs of an add receive the same tensor) or be a view of a node's saved tensor.
    // When the engine handed over its only handle, nothing else can see it, so it is taken over
    // instead of copied (for a tied 33K-word table that copy was 17 MB a step).
    m.grad = g.is_exclusive() ? g.impl_ptr() : kernels::cast(g, g.dtype()).impl_ptr();
  } else {
    Tensor acc(m.grad);
    kernels::accumulate_into(acc, g);
    acc.bump_version();
  }
  if (t_observer) t_observer->gradient_ready(leaf_.get());
  return {};
}

}  // namespace define
