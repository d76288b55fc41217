// SumAcc<T>: the accumulator of every sum the kernels compute over many elements (reduce.cu, the
// row reductions of row_reduce.cuh, layer_norm.cu, the loss reduction of softmax.cu, dbias of
// grouped_linear.cu).
//
// Why not double: GeForce GPUs (sm_61, sm_75) run double arithmetic at 1/32 of the float rate.
// Why not a plain float sum: once a running sum is large, every addend below half its ulp is lost
// whole, and a thread of a long reduction adds thousands of them (tests/cuda/reduce_kernels_test.cpp
// and the long-row tests of softmax and layer norm measure it: a plain float sum of their inputs is
// off by 1e-3 to 1e-4 relative). So a float sum carries, next to the running sum, the sum of the
// exact rounding errors of its additions (Knuth's branch-free TwoSum; no compare, so no divergence),
// which leaves about the error of a double accumulator, for about six float operations an element.
// double tensors keep a plain double sum: their precision is not the problem.
//
// Determinism: merged() is commutative bit for bit (TwoSum's error term is the exact error, whatever
// the operand order), so butterflies leave every lane with the same bits; callers combine partial
// sums in orders fixed by thread indices, as before.
//
// Plain aggregates (no constructors): they live in __shared__ arrays, where a constructor would run
// once per emulator OS thread rather than per block. Included by kernel files after common.cuh.
#pragma once

#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

template <typename T>
struct SumAcc;

template <>
struct SumAcc<float> {
  float hi;  // the running sum
  float lo;  // the rounding errors of the additions that made hi, summed (hi + lo is the sum)

  // a + b - s exactly, for s = a + b rounded, whichever operand is larger; valid while nothing
  // overflows. The expression must stay as written: nvcc and g++ do not reassociate it (no fast math).
  __device__ __forceinline__ static float rounding_error(float a, float b, float s) {
    const float b_part = s - a;
    return (a - (s - b_part)) + (b - b_part);
  }

  __device__ __forceinline__ static SumAcc zero() { return {0.0f, 0.0f}; }
  __device__ __forceinline__ static SumAcc of(float x) { return {x, 0.0f}; }

  __device__ __forceinline__ void add(float x) {
    const float s = hi + x;
    lo += rounding_error(hi, x, s);
    hi = s;
  }
  __device__ __forceinline__ SumAcc merged(const SumAcc& o) const {
    const float s = hi + o.hi;
    return {s, (lo + o.lo) + rounding_error(hi, o.hi, s)};
  }
  // The sum times f (the online softmax's rescaling); the product's own rounding is not tracked.
  __device__ __forceinline__ SumAcc scaled(float f) const { return {hi * f, lo * f}; }

  // An infinite or NaN running sum is the answer as it stands: its error terms are NaN (inf - inf).
  // x - x == 0 exactly when x is finite.
  __device__ __forceinline__ float value() const { return hi - hi == 0.0f ? hi + lo : hi; }
  // The sum before its last rounding to float, for a result that is scaled in double first.
  __device__ __forceinline__ double wide() const {
    return hi - hi == 0.0f ? static_cast<double>(hi) + static_cast<double>(lo) : static_cast<double>(hi);
  }

  __device__ __forceinline__ SumAcc shfl_xor(int lane_mask) const {
    return {__shfl_xor_sync(0xffffffffu, hi, lane_mask), __shfl_xor_sync(0xffffffffu, lo, lane_mask)};
  }
  __device__ __forceinline__ SumAcc shfl_down(int offset, int width) const {
    return {__shfl_down_sync(0xffffffffu, hi, offset, width), __shfl_down_sync(0xffffffffu, lo, offset, width)};
  }
};

template <>
struct SumAcc<double> {
  double v;

  __device__ __forceinline__ static SumAcc zero() { return {0.0}; }
  __device__ __forceinline__ static SumAcc of(double x) { return {x}; }
  __device__ __forceinline__ void add(double x) { v += x; }
  __device__ __forceinline__ SumAcc merged(const SumAcc& o) const { return {v + o.v}; }
  __device__ __forceinline__ SumAcc scaled(double f) const { return {v * f}; }
  __device__ __forceinline__ double value() const { return v; }
  __device__ __forceinline__ double wide() const { return v; }
  __device__ __forceinline__ SumAcc shfl_xor(int lane_mask) const {
    return {__shfl_xor_sync(0xffffffffu, v, lane_mask)};
  }
  __device__ __forceinline__ SumAcc shfl_down(int offset, int width) const {
    return {__shfl_down_sync(0xffffffffu, v, offset, width)};
  }
};

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
