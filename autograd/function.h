// How an op records itself. The pattern, for y = exp(x):
//
//   Tensor exp(const Tensor& x) {
//     Tensor y = kernels::exp(x);                       // forward on x's device
//     if (needs_grad({x})) {
//       record("exp", {x}, {y}, [sy = SavedTensor(y)](const BackwardArgs& a) {
//         return std::vector<Tensor>{kernels::mul(a.grad(), sy.get("exp"))};
//       });
//     }
//     return y;
//   }
//
// Backward closures run with grad mode off and capture only what they need. Tensors they keep
// go through SavedTensor, which remembers the version counter and refuses to hand back a tensor
// that was modified in place after it was saved.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/tensor.h"

namespace define {

class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  // Returns the saved tensor, or throws "<op> backward: a tensor saved for backward was
  // modified in place ..." when its storage version moved on.
  Tensor get(const char* op) const;
  bool defined() const { return t_.defined(); }

 private:
  Tensor t_;  // alias without autograd metadata: no reference cycle through grad_fn
  std::uint64_t version_ = 0;
};

// True when grad mode is on and any defined input requires a gradient.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Records a node for `outputs` computed from `inputs`. Outputs become non-leaf tensors that
// require grad. Call only when needs_grad(inputs) is true.
void record(const std::string& name, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs, BackwardFn fn);

// The edge a gradient for `t` must flow along (its grad_fn, or its leaf accumulator).
Edge gradient_edge(const Tensor& t);

}  // namespace define
