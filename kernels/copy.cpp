#include "kernels/copy.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/cpu/copy.h"
#include "kernels/ref/copy.h"

namespace define::kernels {
namespace {

void check_copy_args(const char* op, const Tensor& dst, const Tensor& src) {
  check_same_device(op, {dst, src});
  // src must broadcast to dst's shape exactly (dst is never resized).
  if (broadcast_shapes(dst.shape(), src.shape(), op) != dst.shape())
    fail(op, "source of shape {} cannot be broadcast to destination {}", shape_str(src.shape()),
         shape_str(dst.shape()));
}

}  // namespace

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  return cast(t, t.dtype());
}

Tensor cast(const Tensor& t, DType dtype) {
  Tensor out = empty(t.shape(), {dtype, t.device()});
  copy_into(out, t);
  return out;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  check_copy_args("copy", dst, src);
  if (dst.numel() == 0) return;
  DEFINE_BACKEND_CALL("copy", dst, copy_into, dst, src);
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  check_copy_args("accumulate", dst, src);
  check_same_dtype("accumulate", {dst, src});
  if (dst.numel() == 0) return;
  DEFINE_BACKEND_CALL("accumulate", dst, accumulate_into, dst, src);
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  DEFINE_BACKEND_CALL("fill", dst, fill, dst, value);
}

}  // namespace define::kernels
