// What the CPU loss kernels over class targets share (kernels/cpu/softmax.cpp's cross entropy and
// NLL, kernels/cpu/linear_cross_entropy.cpp): the dispatch on (float dtype, index dtype) and the
// ignore_index test.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace define::kernels::cpu {

// Calls fn.template operator()<T, I>() for the float type T of `values` and index type I of `target`.
template <typename Fn>
void dispatch_loss(const char* op, DType values, DType target, Fn&& fn) {
  DEFINE_DISPATCH_FLOAT(values, op, [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(target, op, [&] { fn.template operator()<T, scalar_t>(); });
  });
}

template <typename I>
bool ignored(I t, std::int64_t ignore_index) {
  return static_cast<std::int64_t>(t) == ignore_index;
}

}  // namespace define::kernels::cpu
