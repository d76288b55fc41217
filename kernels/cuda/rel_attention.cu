// CUDA relative-attention row kernels: the fused relative-shift + masked softmax + dropout of
// kernels/rel_attention.h, and the unshift of its backward (the backward softmax is attention.cu's
// row kernel). The GEMMs around them are kernels::gemm (cuBLAS / tiles), called by the entry
// points in kernels/rel_attention.cpp, which hand these wrappers contiguous [B, H, Tq, Tk] tensors
// (probs may be ac itself; dropped is undefined without dropout).
// Reference: kernels/ref/rel_attention.cpp; tests: tests/ops/rel_attention_test.cpp (mode emu) and
// tests/cuda/rel_attention_kernels_test.cpp.
//
// Launch shapes as in attention.cu (row_reduce.cuh): one warp per row up to kWarpRowLimit keys,
// one 512-thread block per longer row. Per row (b, h, i), M = Tk - Tq, the visible keys are the
// run [lo, hi), hi = i + M + 1, lo = max(0, hi - window) with a window; key j's position term is
// BD[i, j + Tq-1-i], so the shift is an offset into the BD row. Forward: one pass over the run for
// the online max and sum of exp of s_j = scale * (AC[j] + BD[j + Tq-1-i]), a reduction, then one
// pass that recomputes s_j (the same expression, so the same bits) and writes P and, with
// dropout, D; keys outside the run get 0 and are never read. Reductions combine in an order fixed
// by thread indices, so results are bit-identical run to run and under every emulator schedule.
//
// Dropout: the shared dropout stream (dropout_stream.cuh), over the row's visible run only.
// 16-bit AC, BD, P and D are read and written in their format and computed in float, as in
// attention.cu; the unshift is a data movement in any floating dtype.
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dropout_stream.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "kernels/dropout.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// A partial state that saw no visible key adds exactly 0 when merged, as in attention.cu.
template <typename T>
using KeyMaxSum = MaxSum<T, EmptyPartial::kZero>;

struct RelGeometry {
  std::int64_t queries;  // Tq
  std::int64_t keys;     // Tk
  std::int64_t window;   // > 0: at most `window` visible keys per query

  // Row `row`'s visible keys [lo, hi) and the offset of key j's position term (j + shift).
  __device__ void visible(std::int64_t row, std::int64_t& lo, std::int64_t& hi, std::int64_t& shift) const {
    const std::int64_t i = row % queries;
    hi = i + (keys - queries) + 1;
    lo = window > 0 && hi > window ? hi - window : 0;
    shift = queries - 1 - i;
  }
};

template <typename T>
struct RelSoftmaxForward {
  using C = compute_t<T>;
  using State = KeyMaxSum<C>;
  const T* ac;
  const T* bd;
  T* probs;    // may be ac itself: each element is read before it is written, by the same thread
  T* dropped;  // null without dropout
  RelGeometry geo;
  C scale;
  DropoutStream stream;
  C drop_scale;

  // Row `row` as the passes read it: its visible keys [lo, hi), and AC and BD rows positioned so
  // that key j's two terms are a[j] and b[j].
  struct Row {
    std::int64_t base, lo, hi;
    const T* a;
    const T* b;
  };
  __device__ Row row_of(std::int64_t row) const {
    std::int64_t lo, hi, shift;
    geo.visible(row, lo, hi, shift);
    const std::int64_t base = row * geo.keys;
    return {base, lo, hi, ac + base, bd + base + shift};
  }
  __device__ C score(const Row& rw, std::int64_t j) const {
    return scale * (load_value(rw.a[j]) + load_value(rw.b[j]));
  }

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    const Row rw = row_of(row);
    map_row(
        rw.lo, 1, rw.hi - rw.lo, first, step, [&](std::int64_t j) { return score(rw, j); },
        [&](std::int64_t, C v) { st.add(v); });
  }

  __device__ void finish(const State& st, std::int64_t row, int first, int step) const {
    const Row rw = row_of(row);
    T* p_row = probs + rw.base;
    // No visible key above -inf (only infinite inputs): every probability is 0 (inv is never used).
    const bool any = st.max != -infinity<C>();
    const C inv = any ? C(1) / st.sum.value() : C(0);
    const auto prob = [&](C v) { return any ? dev_exp(v - st.max) * inv : C(0); };
    if (dropped == nullptr) {
      map_row(
          rw.lo, 1, rw.hi - rw.lo, first, step, [&](std::int64_t j) { return score(rw, j); },
          [&](std::int64_t j, C v) { p_row[j] = store_value<T>(prob(v)); });
    } else {
      T* d_row = dropped + rw.base;
      const std::uint64_t run_word = stream.offset + static_cast<std::uint64_t>(rw.base + rw.lo);
      for_owned_elements<true, C>(
          stream, run_word, rw.hi - rw.lo, first, step, [&](std::int64_t jj) { return score(rw, rw.lo + jj); },
          [&](std::int64_t jj, std::uint32_t word, C v) {
            const std::int64_t j = rw.lo + jj;
            const C p = prob(v);
            p_row[j] = store_value<T>(p);
            d_row[j] = store_value<T>(stream.keeps(word) ? static_cast<C>(p * drop_scale) : C(0));
          });
      for (std::int64_t j = first; j < rw.lo; j += step) d_row[j] = T{};
      for (std::int64_t j = rw.hi + first; j < geo.keys; j += step) d_row[j] = T{};
    }
    // Hidden keys: never read by this pass or the last one, so any thread may write them.
    for (std::int64_t j = first; j < rw.lo; j += step) p_row[j] = T{};
    for (std::int64_t j = rw.hi + first; j < geo.keys; j += step) p_row[j] = T{};
  }
};

// grad_bd[row, pos] = grad_scores[row, pos - shift] for pos >= shift, else 0 (shift = Tq-1-i):
// a warp per row, coalesced reads and writes; no reduction, so any order gives the same bits. A
// lane issues kUnshiftAhead loads before it stores any: one at a time left the kernel bound by
// memory latency on an H200 (56% of the copy rate in the performance model, kernel_bench --profile).
constexpr int kUnshiftAhead = 4;
template <typename T>
__global__ void __launch_bounds__(kBlockSize) unshift_kernel(const T* __restrict__ grad_scores,
                                                             T* __restrict__ grad_bd, std::int64_t rows,
                                                             std::int64_t queries, std::int64_t keys) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; row < rows;
       row += warps) {
    const std::int64_t base = row * keys, shift = queries - 1 - row % queries;
    for (std::int64_t pos0 = lane; pos0 < keys; pos0 += kUnshiftAhead * kWarp) {
      T v[kUnshiftAhead];
      EMU_UNROLL
      for (int k = 0; k < kUnshiftAhead; ++k) {
        const std::int64_t pos = pos0 + k * kWarp;
        v[k] = pos < keys && pos >= shift ? grad_scores[base + pos - shift] : T{};
      }
#pragma unroll
      for (int k = 0; k < kUnshiftAhead; ++k)
        if (pos0 + k * kWarp < keys) grad_bd[base + pos0 + k * kWarp] = v[k];
    }
  }
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void rel_attention_softmax(const Tensor& ac, const Tensor& bd, const Tensor& probs, const Tensor& dropped,
                           std::int64_t window, double scale, double p, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t keys = ac.size(3), rows = ac.numel() / keys;
  DEFINE_DISPATCH_FLOATING(ac.dtype(), "rel_attention_softmax", [&] {
    const RelSoftmaxForward<scalar_t> op{ac.data<scalar_t>(),
                                         bd.data<scalar_t>(),
                                         probs.data<scalar_t>(),
                                         data_or_null<scalar_t>(dropped),
                                         RelGeometry{ac.size(2), keys, window},
                                         static_cast<compute_t<scalar_t>>(scale),
                                         dropout_stream(p, seed, offset),
                                         dropout_scale<compute_t<scalar_t>>(p)};
    launch_rows("rel_attention_softmax", op, rows, keys);
  });
}

void rel_attention_unshift(const Tensor& grad_scores, const Tensor& grad_bd) {
  const std::int64_t keys = grad_scores.size(3), rows = grad_scores.numel() / keys;
  if (rows == 0) return;
  DEFINE_DISPATCH_FLOATING(grad_scores.dtype(), "rel_attention_unshift", [&] {
    launch_checked("rel_attention_unshift", unshift_kernel<scalar_t>, grid_for(rows, kBlockSize / kWarp), kBlockSize,
                   0, grad_scores.data<scalar_t>(), grad_bd.data<scalar_t>(), rows, grad_scores.size(2), keys);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
