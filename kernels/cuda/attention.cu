// CUDA attention row kernels: the fused masked softmax + dropout of kernels/attention.h and its
// backward. The GEMMs around them are kernels::gemm (cuBLAS / tiles), called by the entry points in
// kernels/attention.cpp, which hand these wrappers contiguous [B, H, Tq, Tk] tensors (probs may be
// the scores themselves, grad_scores may be grad_dropped itself; dropped is undefined without
// dropout) and a padding mask that is undefined or a contiguous int32 [B, Tk] of 0/1.
// Reference: kernels/ref/attention.cpp; tests: tests/ops/attention_test.cpp (mode emu) and
// tests/cuda/attention_kernels_test.cpp.
//
// Launch shapes (kernels/cuda/row_reduce.cuh, shared with softmax.cu): rows of up to
// kWarpRowLimit keys get one warp each (8 rows per 256-thread block, the row reduction in
// registers through __shfl_xor_sync); longer rows get one 512-thread block each (warp shuffles,
// then one shared-memory slot per warp). The masks are read where they live: the padding mask
// row of the batch, and the causal horizon computed from the query index (keys past it are never
// read and get 0).
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
//
// 16-bit tensors (T = Half / BFloat16) are read and written in their format; the row's max, sums,
// exponentials and products are float (C = compute_t<T>), and P, D and dS are each rounded once.
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dropout_stream.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "kernels/dropout.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Running max and sum of exp over the valid keys (a -inf key adds exp(-inf) = 0). A partial
// state that saw no key above -inf adds exactly 0 when merged, even if it saw a NaN score: this
// family has always merged that way (softmax.cu keeps the NaN), and its results are pinned.
template <typename T>
using KeyMaxSum = MaxSum<T, EmptyPartial::kZero>;

// ---------------------------------------------------------------------------------------------
// Row ops (the interface is described at the launch shapes in row_reduce.cuh).

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
  using C = compute_t<T>;
  using State = KeyMaxSum<C>;
  const T* scores;
  T* probs;    // may be scores itself: each element is read before it is written, by the same thread
  T* dropped;  // null without dropout
  const std::int32_t* padding;  // null, or [B, Tk]
  RowGeometry geo;
  DropoutStream stream;
  C drop_scale;

  __device__ const std::int32_t* padding_row(std::int64_t row) const {
    return padding == nullptr ? nullptr : padding + (row / geo.heads_x_queries) * geo.keys;
  }

  // Key j's score, -inf where the padding mask hides it (which adds nothing to the state and gets
  // probability 0, as a masked key should). Both loads are issued before the select.
  __device__ C score(const T* s, const std::int32_t* pad, std::int64_t j) const {
    const C v = load_value(s[j]);
    return pad != nullptr && pad[j] != 0 ? -infinity<C>() : v;
  }

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int32_t* pad = padding_row(row);
    map_row(
        0, 1, geo.horizon(row), first, step, [&](std::int64_t j) { return score(scores + base, pad, j); },
        [&](std::int64_t, C v) { st.add(v); });
  }

  __device__ void finish(const State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int32_t* pad = padding_row(row);
    const std::int64_t n = geo.horizon(row);
    // No valid key: every probability is 0 (inv is never used).
    const bool any = st.max != -infinity<C>();
    const C inv = any ? C(1) / st.sum.value() : C(0);
    const auto prob = [&](C v) { return any && v != -infinity<C>() ? dev_exp(v - st.max) * inv : C(0); };
    const auto read = [&](std::int64_t j) { return score(scores + base, pad, j); };
    if (dropped == nullptr) {
      map_row(0, 1, n, first, step, read, [&](std::int64_t j, C v) { probs[base + j] = store_value<T>(prob(v)); });
    } else {
      const std::uint64_t row_word = stream.offset + static_cast<std::uint64_t>(base);
      for_owned_elements<true, C>(stream, row_word, n, first, step, read, [&](std::int64_t j, std::uint32_t word, C v) {
        const C p = prob(v);
        probs[base + j] = store_value<T>(p);
        dropped[base + j] = store_value<T>(stream.keeps(word) ? static_cast<C>(p * drop_scale) : C(0));
      });
      for (std::int64_t j = n + first; j < geo.keys; j += step) dropped[base + j] = T{};
    }
    for (std::int64_t j = n + first; j < geo.keys; j += step) probs[base + j] = T{};
  }
};

// dP = keep ? dD * drop_scale : 0;  dS = scale * P * (dP - rowsum(dP * P)).
template <typename T>
struct SoftmaxBackward {
  using C = compute_t<T>;
  using State = Sum<C>;
  const T* probs;
  const T* grad_dropped;
  T* grad_scores;  // may be grad_dropped itself: read before written, by the same thread
  T* dropped;      // null without dropout; written in accumulate, read back in finish
  RowGeometry geo;
  DropoutStream stream;
  C drop_scale;
  C scale;

  // An element's P and dD (and D, when a pass reads it back).
  struct Element {
    C prob, grad, dropped;
  };

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int64_t n = geo.horizon(row);  // P is zero past the horizon
    if (dropped == nullptr) {
      map_row(
          base, 1, n, first, step, [&](std::int64_t k) { return load_value(grad_dropped[k]) * load_value(probs[k]); },
          [&](std::int64_t, C v) { st.add(v); });
      return;
    }
    // dD is read whether kept or not: a load under the keep branch would split the warp's request
    // by the random mask (no fewer sectors: its neighbours need them).
    const auto read = [&](std::int64_t j) {
      return Element{load_value(probs[base + j]), load_value(grad_dropped[base + j]), C(0)};
    };
    const std::uint64_t row_word = stream.offset + static_cast<std::uint64_t>(base);
    for_owned_elements<true, C>(stream, row_word, n, first, step, read,
                                [&](std::int64_t j, std::uint32_t word, const Element& e) {
                                  const bool keep = stream.keeps(word);
                                  dropped[base + j] = store_value<T>(keep ? static_cast<C>(e.prob * drop_scale) : C(0));
                                  if (keep) st.add(e.grad * drop_scale * e.prob);
                                });
  }

  __device__ void finish(const State& st, std::int64_t row, int first, int step) const {
    const std::int64_t base = row * geo.keys;
    const std::int64_t n = geo.horizon(row);
    const C dot = st.value();
    if (dropped == nullptr) {
      map_row(
          base, 1, n, first, step,
          [&](std::int64_t k) {
            return Element{load_value(probs[k]), load_value(grad_dropped[k]), C(0)};
          },
          [&](std::int64_t k, const Element& e) { grad_scores[k] = store_value<T>(scale * e.prob * (e.grad - dot)); });
    } else {
      // The keep decision comes back from D: a kept element with P != 0 has D != 0, and where
      // P == 0 the gradient is 0 whatever the decision was. dD is read unconditionally, as above.
      const auto read = [&](std::int64_t j) {
        const std::int64_t k = base + j;
        return Element{load_value(probs[k]), load_value(grad_dropped[k]), load_value(dropped[k])};
      };
      const std::uint64_t row_word = stream.offset + static_cast<std::uint64_t>(base);
      for_owned_elements<false, C>(stream, row_word, n, first, step, read,
                                   [&](std::int64_t j, std::uint32_t, const Element& e) {
                                     const C grad_prob = e.dropped != C(0) ? e.grad * drop_scale : C(0);
                                     grad_scores[base + j] = store_value<T>(scale * e.prob * (grad_prob - dot));
                                   });
      for (std::int64_t j = n + first; j < geo.keys; j += step) dropped[base + j] = T{};
    }
    for (std::int64_t j = n + first; j < geo.keys; j += step) grad_scores[base + j] = T{};
  }
};

RowGeometry geometry_of(const Tensor& t, bool causal) {
  return {t.size(1) * t.size(2), t.size(2), t.size(3), causal};
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t keys = scores.size(3), rows = scores.numel() / keys;
  DEFINE_DISPATCH_FLOATING(scores.dtype(), "attention_softmax", [&] {
    const SoftmaxForward<scalar_t> op{scores.data<scalar_t>(),
                                      probs.data<scalar_t>(),
                                      data_or_null<scalar_t>(dropped),
                                      data_or_null<std::int32_t>(key_padding),
                                      geometry_of(scores, causal),
                                      dropout_stream(p, seed, offset),
                                      dropout_scale<compute_t<scalar_t>>(p)};
    launch_rows("attention_softmax", op, rows, keys);
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool causal, double p, std::uint64_t seed,
                                std::uint64_t offset, double scale) {
  const std::int64_t keys = probs.size(3), rows = probs.numel() / keys;
  DEFINE_DISPATCH_FLOATING(probs.dtype(), "attention_softmax_backward", [&] {
    const SoftmaxBackward<scalar_t> op{probs.data<scalar_t>(),
                                       grad_dropped.data<scalar_t>(),
                                       grad_scores.data<scalar_t>(),
                                       data_or_null<scalar_t>(dropped),
                                       geometry_of(probs, causal),
                                       dropout_stream(p, seed, offset),
                                       dropout_scale<compute_t<scalar_t>>(p),
                                       static_cast<compute_t<scalar_t>>(scale)};
    launch_rows("attention_softmax_backward", op, rows, keys);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
