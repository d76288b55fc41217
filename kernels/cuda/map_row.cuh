// map_row: a thread's walk over its elements of a row with several loads in flight. Used by the
// row kernels (row_reduce.cuh and the files built on it, layer_norm.cu).
//
// Included by kernel files only, after common.cuh.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// use(k, load(k)) for the elements j = first, first + step, ... below n of a row at k = base + j *
// stride, in that order, four elements' loads issued before any of them is used: a thread has four
// loads in flight where a plain loop (a load, then the arithmetic that waits for it) has one. Without
// it the row kernels are bound by memory latency (kernel_bench --profile: log_softmax over a
// vocabulary at 41% of an H200's copy rate, where the H200 measured 40%). The order of use is the
// plain loop's, so results are the same bits. A use may store to the element it was given (each
// element is loaded before its own store; the loads ahead of it are of other elements).
//
// Loaded values of 8-byte alignment (double, or structs of doubles: the float64 forms of the row ops)
// go one at a time: four of them ahead, with the use unrolled around double exp, spill registers on
// sm_90 (scripts/checks/check-ptxas.sh fails on spills), and float64 is not a GPU training type.
template <typename Load, typename Use>
__device__ __forceinline__ void map_row(std::int64_t base, std::int64_t stride, std::int64_t n, int first, int step,
                                        const Load& load, const Use& use) {
  using Loaded = decltype(load(std::int64_t{0}));
  constexpr bool kAhead = alignof(Loaded) <= 4;
  std::int64_t j = first;
  if constexpr (kAhead) {
    for (; j + 3 * step < n; j += 4 * step) {
      Loaded v[4];
      EMU_UNROLL
      for (int u = 0; u < 4; ++u) v[u] = load(base + (j + u * step) * stride);
#pragma unroll
      for (int u = 0; u < 4; ++u) use(base + (j + u * step) * stride, v[u]);
    }
  }
  for (; j < n; j += step) {
    const std::int64_t k = base + j * stride;
    use(k, load(k));
  }
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
