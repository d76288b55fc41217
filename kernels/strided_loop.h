// A minimal two-operand strided loop used by the copy kernels: visits every element of `shape`
// in row-major order, handing the callback the element offsets of the destination and of a
// (possibly broadcast) source. Elementwise families use the fuller TensorIterator.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace define::kernels {

template <typename F>
void strided_loop2(const Shape& shape, const Strides& sa, const Strides& sb, F&& f) {
  const std::int64_t n = numel_of(shape);
  if (n == 0) return;
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) {
    f(std::int64_t{0}, std::int64_t{0});
    return;
  }
  std::vector<std::int64_t> idx(nd, 0);
  std::int64_t oa = 0, ob = 0;
  const std::int64_t inner = shape[nd - 1], ia = sa[nd - 1], ib = sb[nd - 1];
  for (std::int64_t done = 0; done < n; done += inner) {
    for (std::int64_t j = 0; j < inner; ++j) f(oa + j * ia, ob + j * ib);
    for (int k = nd - 2; k >= 0; --k) {  // odometer over the outer dims
      oa += sa[k];
      ob += sb[k];
      if (++idx[k] < shape[k]) break;
      oa -= sa[k] * shape[k];
      ob -= sb[k] * shape[k];
      idx[k] = 0;
    }
  }
}

}  // namespace define::kernels
