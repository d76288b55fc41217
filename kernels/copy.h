// Copy family: strided copies, dtype casts and accumulation. These are the primitives every
// other family uses to normalise its inputs (contiguous()) and that autograd uses to add up
// gradients. Reference: kernels/ref/copy.h; fast CPU path: kernels/cpu/copy.h.
#pragma once

#include "core/tensor.h"

namespace define::kernels {

// `t` itself when already contiguous, else a contiguous copy on the same device.
Tensor contiguous(const Tensor& t);
// Contiguous copy converted to `dtype` (a plain copy when the dtype is unchanged).
Tensor cast(const Tensor& t, DType dtype);
// dst[...] = src[...], dst any strides; src is broadcast to dst's shape and cast to its dtype.
void copy_into(const Tensor& dst, const Tensor& src);
// dst += src (same shape; dst any strides, src broadcast). Used for gradient accumulation.
void accumulate_into(const Tensor& dst, const Tensor& src);
// Every element of dst set to value.
void fill(const Tensor& dst, double value);

}  // namespace define::kernels
