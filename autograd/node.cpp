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
    // Always a private copy: the incoming gradient may be shared with other leaves
    // (e.g. both inputs of an add receive the same tensor).
    Tensor own = kernels::cast(g, g.dtype());
    m.grad = own.impl_ptr();
  } else {
    Tensor acc(m.grad);
    kernels::accumulate_into(acc, g);
    acc.bump_version();
  }
  if (t_observer) t_observer->gradient_ready(leaf_.get());
  return {};
}

}  // namespace define
