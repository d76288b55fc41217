// Dropout forward with its backward beside it.
//
// Backward regenerates the mask instead of saving it: the mask is a pure function of
// (seed, offset, i), so dx = dropout_apply(dy, p, seed, offset) costs one more Philox pass but no
// memory between forward and backward (a saved mask would be a tensor the size of x for every
// dropout layer, held for the whole step). It is also exactly what a CUDA kernel does, so both
// backends share the formula.
#include "autograd/dropout.h"

#include "autograd/function.h"
#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/dropout.h"

namespace define {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0)) fail("dropout", "probability {} is outside [0, 1]", p);
  kernels::check_floating("dropout", x);
  if (!training || p == 0.0) return x;

  if (p == 1.0) {  // everything dropped: no randomness needed, and 1 / (1 - p) would be infinite
    Tensor y = zeros(x.shape(), {x.dtype(), x.device()});
    if (needs_grad({x})) {
      // dx = 0.
      record("dropout", {x}, {y}, [](const BackwardArgs& a) {
        const Tensor& g = a.grad();
        return std::vector<Tensor>{zeros(g.shape(), {g.dtype(), g.device()})};
      });
    }
    return y;
  }

  const std::uint64_t seed = gen.state().seed;
  const std::uint64_t offset = gen.reserve(static_cast<std::uint64_t>(x.numel()));
  Tensor y = kernels::dropout_apply(x, p, seed, offset);
  if (needs_grad({x})) {
    // dx = dy * mask / (1 - p): the same masked scaling applied to dy, mask regenerated.
    record("dropout", {x}, {y}, [p, seed, offset](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::dropout_apply(a.grad(), p, seed, offset)};
    });
  }
  return y;
}

}  // namespace define
