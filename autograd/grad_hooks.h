// Being told when a leaf's gradient is complete: backward() accumulates each leaf's gradient
// exactly once per pass (every contribution reaches the leaf's accumulator before it runs), so
// right after that accumulation the leaf's .grad is final for this pass. The data-parallel
// gradient reducer (distributed/gradient_reducer.h) uses it to start reducing a bucket of gradients
// while backward goes on with the layers below, as PyTorch DDP does with its hooks.
#pragma once

#include "core/tensor.h"

namespace define {

class LeafGradientObserver {
 public:
  virtual ~LeafGradientObserver() = default;
  // `leaf`'s .grad now holds this pass's gradient. Runs on the thread that runs backward().
  virtual void gradient_ready(const TensorImpl* leaf) = 0;
};

// Installs `observer` for backward passes run on this thread while the guard lives; guards nest
// (the previous observer comes back).
class LeafGradientObserverGuard {
 public:
  explicit LeafGradientObserverGuard(LeafGradientObserver* observer);
  ~LeafGradientObserverGuard();
  LeafGradientObserverGuard(const LeafGradientObserverGuard&) = delete;
  LeafGradientObserverGuard& operator=(const LeafGradientObserverGuard&) = delete;

 private:
  LeafGradientObserver* previous_;
};

}  // namespace define
