// Row reductions shared by the softmax-style kernel files (softmax.cu, attention.cu,
// adaptive_softmax.cu): the reduction states (running max and sum of exp, plain sum), warp and
// block all-reduce, and the two launch shapes for "reduce a row, then use the result":
//   * rows of up to kWarpRowLimit elements: one warp per row (8 rows per 256-thread block), the
//     reduction entirely in registers with __shfl_xor_sync butterflies;
//   * longer rows (vocabulary logits, long key sequences): one 512-thread block per row, warp
//     butterflies and then one shared-memory slot per warp.
// Partial results are always combined in an order fixed by thread indices, so results are
// bit-identical run to run and under every emulator schedule. Sums are SumAcc (float_sum.cuh): a
// float row of a vocabulary's width adds thousands of terms per thread.
//
// Included by kernel files only, after common.cuh and device_math.cuh. Like the kernels of a
// kernel file, everything here is in an anonymous namespace inside the backend namespace.
#pragma once

#include <cstdint>
#include <limits>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/float_sum.cuh"
#include "kernels/cuda/map_row.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr std::int64_t kWarpRowLimit = 1024;  // rows up to this length get one warp each (<= 32 elements a lane)
constexpr int kRowBlock = 512;                // threads of a block that owns one longer row
constexpr int kRowBlockWarps = kRowBlock / kWarp;

template <typename T>
__device__ __forceinline__ T infinity() {
  return std::numeric_limits<T>::infinity();
}

// ---------------------------------------------------------------------------------------------
// Reduction states. Each is a plain aggregate (it lives in __shared__ arrays, where a constructor
// would run once per emulator OS thread rather than per block) with the same interface: empty(),
// merged() (commutative, so a butterfly leaves every lane with identical bits) and shfl_xor().

// What a partial MaxSum that never saw an element above -inf contributes to a merge.
enum class EmptyPartial {
  kSumTimesZero,  // its sum * 0: 0, or NaN when it saw a NaN (the softmax references' semantics)
  kZero,          // exactly 0, whatever it saw (attention.cu)
};

// Running max and sum of exp(x - max) of the elements seen so far. Matches the references' two
// passes (max, then sum of exp(x - max)), including their non-finite cases: a NaN element makes
// the sum NaN; a +inf maximum or an all -inf row gives NaN through final_sum() / log_sum().
template <typename T, EmptyPartial kEmpty = EmptyPartial::kSumTimesZero>
struct MaxSum {
  T max;  // -inf before the first element other than -inf; never NaN
  SumAcc<T> sum;

  __device__ static MaxSum empty() { return {-infinity<T>(), SumAcc<T>::zero()}; }

  __device__ void add(T v) {
    if (v > max) {
      sum = sum.scaled(dev_exp(max - v));
      sum.add(T(1));
      max = v;
    } else if (v != -infinity<T>()) {  // -inf adds exp(-inf) = 0; skipping it avoids exp(-inf - -inf)
      sum.add(dev_exp(v - max));        // a NaN v lands here and poisons the sum, as it should
    }
  }

  // The sum rescaled to a maximum m >= max.
  __device__ SumAcc<T> sum_at(T m) const {
    if constexpr (kEmpty == EmptyPartial::kZero)
      return max == -infinity<T>() ? SumAcc<T>::zero() : sum.scaled(dev_exp(max - m));
    else
      return max == -infinity<T>() ? sum.scaled(T(0)) : sum.scaled(dev_exp(max - m));
  }

  __device__ MaxSum merged(const MaxSum& o) const {
    const T m = o.max > max ? o.max : max;
    return {m, sum_at(m).merged(o.sum_at(m))};
  }

  __device__ MaxSum shfl_xor(int lane_mask) const {
    return {__shfl_xor_sync(kFullMask, max, lane_mask), sum.shfl_xor(lane_mask)};
  }

  // The row's sum of exp(x - max), as the references compute it: exp(inf - inf) and
  // exp(-inf - -inf) make it NaN when the maximum is not finite.
  __device__ T final_sum() const {
    return max == infinity<T>() || max == -infinity<T>() ? std::numeric_limits<T>::quiet_NaN() : sum.value();
  }
  // log(final_sum()).
  __device__ T log_sum() const { return dev_log(final_sum()); }
  // The log-sum-exp, max + log_sum() in double.
  __device__ double lse() const { return double(max) + double(log_sum()); }
};

template <typename T>
struct Sum {
  SumAcc<T> acc;

  __device__ static Sum empty() { return {SumAcc<T>::zero()}; }
  __device__ void add(T v) { acc.add(v); }
  __device__ T value() const { return acc.value(); }
  __device__ Sum merged(const Sum& o) const { return {acc.merged(o.acc)}; }
  __device__ Sum shfl_xor(int lane_mask) const { return {acc.shfl_xor(lane_mask)}; }
};

// Butterfly over a full warp: every lane ends with the warp's result. Callers keep all 32 lanes
// in the call (warp-uniform control flow).
template <typename State>
__device__ __forceinline__ State warp_allreduce(State st) {
#pragma unroll
  for (int lane_mask = kWarp / 2; lane_mask > 0; lane_mask /= 2) st = st.merged(st.shfl_xor(lane_mask));
  return st;
}

// Whole-block reduction of a kRowBlock-thread block; every thread gets the result. scratch holds
// one state per warp plus a broadcast slot; the broadcast slot is separate so that a following
// call may start writing the per-warp slots without a third barrier. Called by every thread.
template <typename State>
__device__ State block_allreduce(State st, State* scratch) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int warps = blockDim.x / kWarp;
  st = warp_allreduce(st);
  if (lane == 0) scratch[warp] = st;
  __syncthreads();
  if (warp == 0) {  // warp-uniform
    st = warp_allreduce(lane < warps ? scratch[lane] : State::empty());
    if (lane == 0) scratch[kRowBlockWarps] = st;
  }
  __syncthreads();
  return scratch[kRowBlockWarps];
}

// ---------------------------------------------------------------------------------------------
// Launch shapes. They run a row op, which has a State type and, for each row, is called by every
// thread of the row's group (a warp or a block), thread `first` of `step` (handling elements
// first, first + step, ... of the row):
//   accumulate(State& st, row, first, step)    the thread's share of the row into st
//   finish(const State& st, row, first, step)  with the row's reduced state

template <typename Op>
__global__ void __launch_bounds__(kBlockSize) warp_per_row_kernel(Op op, std::int64_t rows) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  using State = typename Op::State;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / kWarp);
  // The row is the same for all lanes of a warp: the shuffles see the full warp.
  for (std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; row < rows;
       row += warps) {
    State st = State::empty();
    op.accumulate(st, row, lane, kWarp);
    st = warp_allreduce(st);
    op.finish(st, row, lane, kWarp);
  }
}

template <typename Op>
__global__ void __launch_bounds__(kRowBlock) block_per_row_kernel(Op op, std::int64_t rows) {
  EMU_CHECK_LAUNCH_BOUNDS(kRowBlock);
  using State = typename Op::State;
  EMU_STATIC_SHARED(scratch, State[kRowBlockWarps + 1]);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // block-uniform: barriers are safe
    State st = State::empty();
    op.accumulate(st, row, threadIdx.x, blockDim.x);
    st = block_allreduce(st, scratch);
    op.finish(st, row, threadIdx.x, blockDim.x);
  }
}

// Runs a row op over `rows` rows of n elements: a warp per row up to kWarpRowLimit, else a block.
template <typename Op>
void launch_rows(const char* name, const Op& op, std::int64_t rows, std::int64_t n) {
  if (rows == 0) return;
  if (n <= kWarpRowLimit)
    launch_checked(name, warp_per_row_kernel<Op>, grid_for(rows, kBlockSize / kWarp), kBlockSize, 0, op, rows);
  else
    launch_checked(name, block_per_row_kernel<Op>, grid_for(rows, 1), kRowBlock, 0, op, rows);
}

// An element op sees a row as n elements at base + j * stride:
//   reads_row(row)              false: the row is finished without reading it
//   load(k)                     what the reduction reads of the element at offset k (a value, or a
//                               struct of the values of several inputs) ...
//   add(State& st, loaded)      ... and how that enters st (split so that map_row can issue
//                               several elements' loads before the additions that need them)
//   finish(const State& st, row, base, stride, n, first, step)
//                               with the row's reduced state, by every thread of the row's group
//                               (its loops over the row through map_row as well: map_row.cuh)
// ContiguousRows makes it a row op for rows of n contiguous elements (row r at r * n).
template <typename ElementOp>
struct ContiguousRows {
  using State = typename ElementOp::State;
  ElementOp op;
  std::int64_t n;

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    if (!op.reads_row(row)) return;
    map_row(
        row * n, 1, n, first, step, [&](std::int64_t k) { return op.load(k); },
        [&](std::int64_t, const auto& v) { op.add(st, v); });
  }
  __device__ void finish(const State& st, std::int64_t row, int first, int step) const {
    op.finish(st, row, row * n, 1, n, first, step);
  }
};

template <typename ElementOp>
void launch_contiguous_rows(const char* name, const ElementOp& op, std::int64_t rows, std::int64_t n) {
  launch_rows(name, ContiguousRows<ElementOp>{op, n}, rows, n);
}

// ---------------------------------------------------------------------------------------------
// Host side of the loss-style wrappers (logits of one float dtype, targets of an index dtype).

// Dispatches on (float dtype, index dtype) to fn.template operator()<T, I>().
template <typename Fn>
void dispatch_loss(const char* op, DType values, DType target, Fn&& fn) {
  DEFINE_DISPATCH_FLOAT(values, op, [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(target, op, [&] { fn.template operator()<T, scalar_t>(); });
  });
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
