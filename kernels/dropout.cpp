// Entry point of the dropout family: checks, contiguous input, output allocation, dispatch.
#include "kernels/dropout.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/ref/dropout.h"

namespace define::kernels {

Tensor dropout_apply(const Tensor& x_in, double p, std::uint64_t seed, std::uint64_t offset) {
  const char* op = "dropout";
  // The GPUs have a 16-bit kernel; the CPU paths widen. The mask depends on (seed, offset, element)
  // only, so the widened input drops the same elements.
  if (any_float16({x_in}) && !has_float16_kernels(x_in))
    return narrow(dropout_apply(widen(x_in, x_in), p, seed, offset), x_in.dtype());
  check_floating(op, x_in);
  if (!(p >= 0.0 && p < 1.0)) fail(op, "probability {} is outside [0, 1) for the masking kernel", p);
  Tensor x = contiguous(x_in);
  Tensor y = empty(x.shape(), {x.dtype(), x.device()});
  if (x.numel() > 0) DEFINE_BACKEND_CALL(op, x, dropout_apply, x, y, p, seed, offset);
  return y;
}

}  // namespace define::kernels
