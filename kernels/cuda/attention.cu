// CUDA attention row kernels: the fused masked softmax + dropout of kernels/attention.h and its
// backward. The GEMMs around them are kernels::gemm (cuBLAS / tiles), called by the entry points in
// kernels/attention.cpp, which hand these wrappers contiguous [B, H, Tq, Tk] tensors (probs may be
// the scores themselves, grad_scores may be grad_dropped itself; dropped is undefined without
// dropout) and a padding mask that is undefined or a contiguous int32 [B, Tk] of 0/1.
// Reference: kernels/ref/attention.cpp; tests: tests/ops/attention_test.cpp (mode emu) and
// tests/cuda/attention_kernels_test.cpp.
//
// Launch shapes (as in softmax.cu): rows of up to kWarpRowLimit keys get one warp each (8 rows per
// 256-thread block, the row reduction in registers through __shfl_xor_sync); longer rows get one
// 512-thread block each (warp shuffles, then one shared-memory slot per warp). The masks are read
// where they live: the padding mask row of the batch, and the causal horizon computed from the
// query index (keys past it are never read and get 0).
//
// Forward per row: one pass for the running max and sum of exp over the valid keys (online:
// rescaled whenever the max grows), a reduction, then one pass that writes P and, with dropout, D.
// Backward per row: one pass for rowsum(dP * P) (writing D on the way), a reduction, then one
// pass writing dS. Reductions combine in an order fixed by thread indices, so results are
// bit-identical run to run and under every emulator schedule.
//
// Dropout: stream word w is lane w % 4 of Philox block w / 4, so a thread takes whole Philox
// blocks (the up-to-4 elements of the row whose words one block holds) rather than single
// elements: one 10-round block per 4 elements instead of per element. The keep test u >= p is the
// exact integer form (word >> 8) >= ceil(p * 2^24), as in dropout.cu. A pass that must see the
// elements a thread handled in an earlier pass walks the row in the same block order, so every
// thread only ever reads back its own writes.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/dropout.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr std::int64_t kWarpRowLimit = 1024;  // keys per row up to which a warp owns the row
constexpr int kRowBlock = 512;                // threads of a block that owns one long row
constexpr int kRowBlockWarps = kRowBlock / kWarp;

template <typename T>
__device__ __forceinline__ T negative_infinity() {
  return -std::numeric_limits<T>::infinity();
}

// ---------------------------------------------------------------------------------------------
// Reduction states: plain aggregates (they live in __shared__ arrays) with empty(), merged()
// (commutative, so a butterfly leaves every lane with identical bits) and shfl_xor().

// Running max and sum of exp(x - max) over the valid keys seen so far.
template <typename T>
struct MaxSum {
  T max;  // -inf until the first finite-or-+inf key
  T sum;

  __device__ static MaxSum empty() { return {negative_infinity<T>(), T(0)}; }

  __device__ void add(T v) {
    if (v > max) {
      sum = sum * dev_exp(max - v) + T(1);
      max = v;
    } else if (v != negative_infinity<T>()) {  // a -inf key adds exp(-inf) = 0
      sum += dev_exp(v - max);
    }
  }

  __device__ T sum_at(T m) const { return max == negative_infinity<T>() ? T(0) : sum * dev_exp(max - m); }

  __device__ MaxSum merged(const MaxSum& o) const {
    const T m = o.max > max ? o.max : max;
    return {m, sum_at(m) + o.sum_at(m)};
  }

  __device__ MaxSum shfl_xor(int lane_mask) const {
    return {__shfl_xor_sync(kFullMask, max, lane_mask), __shfl_xor_sync(kFullMask, sum, lane_mask)};
  }
};

template <typename T>
struct Sum {
  T value;

  __device__ static Sum empty() { return {T(0)}; }
  __device__ Sum merged(const Sum& o) const { return {value + o.value}; }
  __device__ Sum shfl_xor(int lane_mask) const { return {__shfl_xor_sync(kFullMask, value, lane_mask)}; }
};

// Butterfly over a full warp; every lane ends with the result. Called with all 32 lanes.
template <typename State>
__device__ __forceinline__ State warp_allreduce(State st) {
#pragma unroll
  for (int lane_mask = kWarp / 2; lane_mask > 0; lane_mask /= 2) st = st.merged(st.shfl_xor(lane_mask));
  return st;
}

// Whole-block reduction, every thread gets the result; called by every thread of the block.
// scratch holds one state per warp plus a separate broadcast slot, so the next row's call may
// start writing the per-warp slots without a third barrier.
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
// Dropout stream.

struct DropoutStream {
  std::uint64_t offset;  // stream word of element 0 of the probability tensor
  std::uint32_t key_lo, key_hi;
  std::uint32_t threshold;  // keep iff (word >> 8) >= threshold

  __device__ bool keeps(std::uint32_t word) const { return (word >> 8) >= threshold; }
};

// Calls f(j, word) for the elements j in [0, n) of a row whose element 0 is stream word
// `row_word`, that thread `first` of `step` owns: whole Philox blocks t = first, first + step, ...
// of the row. With kWords false the Philox rounds are skipped (word is 0): the same elements, for
// a pass that only reads back what an earlier pass of this thread wrote.
template <bool kWords, typename F>
__device__ __forceinline__ void for_owned_elements(const DropoutStream& ds, std::uint64_t row_word, std::int64_t n,
                                                   int first, int step, F&& f) {
  if (n <= 0) return;
  const std::uint64_t first_block = row_word / 4;
  const auto blocks = static_cast<std::int64_t>((row_word + static_cast<std::uint64_t>(n) - 1) / 4 - first_block + 1);
  for (std::int64_t t = first; t < blocks; t += step) {
    const std::uint64_t block = first_block + static_cast<std::uint64_t>(t);
    philox::U32x4 words{{0u, 0u, 0u, 0u}};
    if constexpr (kWords) {
      const philox::U32x4 counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
      words = philox::philox4x32_10(counter, ds.key_lo, ds.key_hi);
    }
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const std::uint64_t word = 4 * block + static_cast<std::uint64_t>(lane);
      if (word < row_word || word - row_word >= static_cast<std::uint64_t>(n)) continue;  // another row's
      f(static_cast<std::int64_t>(word - row_word), words.v[lane]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Row ops. A launch shape calls, for each row, accumulate(state, row, first, step) on every thread,
// reduces the states, then finish(state, row, first, step) on every thread.

struct RowGeometry {
  std::int64_t heads_x_queries;  // H * Tq: rows per batch element
  std::int64_t queries;          // Tq
  std::int64_t keys;             // Tk
  bool causal;

  // Keys [0, horizon) may be valid; the rest are causally masked.
  __device__ std::int64_t horizon(std::int64_t row) const {
    if (!causal) return keys;
    const std::int64_t h = row % queries + (keys - queries) + 1;
    return h < 0 ? 0 : (h > keys ? keys : h);
  }
};

template <typename T>
struct SoftmaxForward {
  using State = MaxSum<T>;
  const T* scores;
  T* probs;    // may be scores itself: each element is read before it is written, by the same thread
  T* dropped;  // null without dropout
  const std::int32_t* padding;  // null, or [B, Tk]
  RowGeometry geo;
  DropoutStream stream;
  T drop_scale;

  __device__ const std::int32_t* padding_row(std::int64_t row) const {
    return padding == nullptr ? nullptr : padding + (row / geo.heads_x_queries) * geo.keys;
  }

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    const T* s = scores + row * geo.keys;
    const std::int32_t* pad = padding_row(row);
    const std::int64_t n = geo.horizon(row);
    for (std::int64_t j = first; j < n; j += step)
      if (pad == nullptr || pad[j] == 0) st.add(s[j]);
  }

  __device__ void finish(const State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int32_t* pad = padding_row(row);
    const std::int64_t n = geo.horizon(row);
    // No valid key: every probability is 0 (inv is never used).
    const bool any = st.max != negative_infinity<T>();
    const T inv = any ? T(1) / st.sum : T(0);
    const auto prob = [&](std::int64_t j) {
      return any && (pad == nullptr || pad[j] == 0) ? dev_exp(scores[base + j] - st.max) * inv : T(0);
    };
    if (dropped == nullptr) {
      for (std::int64_t j = first; j < n; j += step) probs[base + j] = prob(j);
    } else {
      const std::uint64_t row_word = stream.offset + static_cast<std::uint64_t>(base);
      for_owned_elements<true>(stream, row_word, n, first, step, [&](std::int64_t j, std::uint32_t word) {
        const T p = prob(j);
        probs[base + j] = p;
        dropped[base + j] = stream.keeps(word) ? static_cast<T>(p * drop_scale) : T(0);
      });
      for (std::int64_t j = n + first; j < geo.keys; j += step) dropped[base + j] = T(0);
    }
    for (std::int64_t j = n + first; j < geo.keys; j += step) probs[base + j] = T(0);
  }
};

// dP = keep ? dD * drop_scale : 0;  dS = scale * P * (dP - rowsum(dP * P)).
template <typename T>
struct SoftmaxBackward {
  using State = Sum<T>;
  const T* probs;
  const T* grad_dropped;
  T* grad_scores;  // may be grad_dropped itself: read before written, by the same thread
  T* dropped;      // null without dropout; written in accumulate, read back in finish
  RowGeometry geo;
  DropoutStream stream;
  T drop_scale;
  T scale;

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int64_t n = geo.horizon(row);  // P is zero past the horizon
    if (dropped == nullptr) {
      for (std::int64_t j = first; j < n; j += step) st.value += grad_dropped[base + j] * probs[base + j];
      return;
    }
    const std::uint64_t row_word = stream.offset + static_cast<std::uint64_t>(base);
    for_owned_elements<true>(stream, row_word, n, first, step, [&](std::int64_t j, std::uint32_t word) {
      const std::int64_t k = base + j;
      const bool keep = stream.keeps(word);
      dropped[k] = keep ? static_cast<T>(probs[k] * drop_scale) : T(0);
      if (keep) st.value += grad_dropped[k] * drop_scale * probs[k];
    });
  }

  __device__ void finish(const State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int64_t n = geo.horizon(row);
    const T dot = st.value;
    if (dropped == nullptr) {
      for (std::int64_t j = first; j < n; j += step) {
        const std::int64_t k = base + j;
        grad_scores[k] = scale * probs[k] * (grad_dropped[k] - dot);
      }
    } else {
      // The keep decision comes back from D: a kept element with P != 0 has D != 0, and where
      // P == 0 the gradient is 0 whatever the decision was.
      const std::uint64_t row_word = stream.offset + static_cast<std::uint64_t>(base);
      for_owned_elements<false>(stream, row_word, n, first, step, [&](std::int64_t j, std::uint32_t) {
        const std::int64_t k = base + j;
        const T grad_prob = dropped[k] != T(0) ? grad_dropped[k] * drop_scale : T(0);
        grad_scores[k] = scale * probs[k] * (grad_prob - dot);
      });
      for (std::int64_t j = n + first; j < geo.keys; j += step) dropped[base + j] = T(0);
    }
    for (std::int64_t j = n + first; j < geo.keys; j += step) grad_scores[base + j] = T(0);
  }
};

// ---------------------------------------------------------------------------------------------
// Launch shapes.

template <typename Op>
__global__ void __launch_bounds__(kBlockSize) warp_per_row_kernel(Op op, std::int64_t rows) {
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
  using State = typename Op::State;
  __shared__ State scratch[kRowBlockWarps + 1];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // block-uniform: barriers are safe
    State st = State::empty();
    op.accumulate(st, row, threadIdx.x, blockDim.x);
    st = block_allreduce(st, scratch);
    op.finish(st, row, threadIdx.x, blockDim.x);
  }
}

template <typename Op>
void launch_rows(const char* name, const Op& op, std::int64_t rows, std::int64_t keys) {
  if (keys <= kWarpRowLimit)
    launch_checked(name, warp_per_row_kernel<Op>, grid_for(rows, kBlockSize / kWarp), kBlockSize, 0, op, rows);
  else
    launch_checked(name, block_per_row_kernel<Op>, grid_for(rows, 1), kRowBlock, 0, op, rows);
}

RowGeometry geometry_of(const Tensor& t, bool causal) {
  return {t.size(1) * t.size(2), t.size(2), t.size(3), causal};
}

DropoutStream stream_of(double p, std::uint64_t seed, std::uint64_t offset) {
  return {offset, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
          static_cast<std::uint32_t>(std::ceil(p * 16777216.0))};
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t keys = scores.size(3), rows = scores.numel() / keys;
  DEFINE_DISPATCH_FLOAT(scores.dtype(), "attention_softmax", [&] {
    const SoftmaxForward<scalar_t> op{scores.data<scalar_t>(),
                                      probs.data<scalar_t>(),
                                      data_or_null<scalar_t>(dropped),
                                      data_or_null<std::int32_t>(key_padding),
                                      geometry_of(scores, causal),
                                      stream_of(p, seed, offset),
                                      dropout_scale<scalar_t>(p)};
    launch_rows("attention_softmax", op, rows, keys);
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool causal, double p, std::uint64_t seed,
                                std::uint64_t offset, double scale) {
  const std::int64_t keys = probs.size(3), rows = probs.numel() / keys;
  DEFINE_DISPATCH_FLOAT(probs.dtype(), "attention_softmax_backward", [&] {
    const SoftmaxBackward<scalar_t> op{probs.data<scalar_t>(),
                                       grad_dropped.data<scalar_t>(),
                                       grad_scores.data<scalar_t>(),
                                       data_or_null<scalar_t>(dropped),
                                       geometry_of(probs, causal),
                                       stream_of(p, seed, offset),
                                       dropout_scale<scalar_t>(p),
                                       static_cast<scalar_t>(scale)};
    launch_rows("attention_softmax_backward", op, rows, keys);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
