// Fast CPU attention row kernels (see kernels/cpu/attention.h).
//
// A row is the Tk scores of one (batch, head, query). Causal masking only shortens the row: keys
// past the query's horizon are never read and get probability 0. Padding is applied by a masked
// copy (-inf for padded keys) into a per-thread buffer, so the max / exp / sum loops stay
// branch-free and vectorise. The row max / sum-of-exp / dot reductions and the float32
// polynomial exp are shared with the other softmax-style families (kernels/cpu/row_math.h).
//
// Dropout: the keep decision of element e is (word_e >> 8) >= ceil(p * 2^24), word_e the Philox
// word offset + e. That integer test equals the float test u >= p of the contract exactly (p * 2^24
// is exact in double), so the mask is bit-identical to the reference and to kernels/dropout.h.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/row_math.h"
#include "kernels/dropout.h"

namespace define::kernels::cpu {
namespace {

using row_math::row_dot;
using row_math::row_max;
using row_math::store_softmax;
using row_math::SumOrder;

constexpr std::int64_t kParallelGrain = 1 << 14;  // elements; below this, threads cost more than they save
// Row sums add their scalar tail first, then each lane partial (row_math::SumOrder), as this
// family always has.
constexpr SumOrder kSumOrder = SumOrder::kTailThenLanes;
// Philox blocks computed together, lane-wise (at 16 GCC 12 unrolled the round loop instead of
// vectorising it; 32 vectorises and wastes little on rows of ~100 keys).
constexpr int kPhiloxBatch = 32;

// Philox 4x32-10 blocks first_block .. first_block + kPhiloxBatch - 1, computed lane-wise (the
// same rounds as philox::philox4x32_10, so they vectorise): words[4 * b + w] is word w of block b.
void philox_batch(std::uint64_t first_block, std::uint32_t k0, std::uint32_t k1, std::uint32_t* words) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t x0[kPhiloxBatch], x1[kPhiloxBatch], x2[kPhiloxBatch], x3[kPhiloxBatch];
  for (int b = 0; b < kPhiloxBatch; ++b) {
    const std::uint64_t counter = first_block + static_cast<std::uint64_t>(b);
    x0[b] = static_cast<std::uint32_t>(counter);
    x1[b] = static_cast<std::uint32_t>(counter >> 32);
    x2[b] = 0;
    x3[b] = 0;
  }
  for (int round = 0; round < 10; ++round) {
    for (int b = 0; b < kPhiloxBatch; ++b) {
      const std::uint64_t prod0 = static_cast<std::uint64_t>(kMul0) * x0[b];
      const std::uint64_t prod1 = static_cast<std::uint64_t>(kMul1) * x2[b];
      const std::uint32_t y0 = static_cast<std::uint32_t>(prod1 >> 32) ^ x1[b] ^ k0;
      const std::uint32_t y2 = static_cast<std::uint32_t>(prod0 >> 32) ^ x3[b] ^ k1;
      x1[b] = static_cast<std::uint32_t>(prod1);
      x3[b] = static_cast<std::uint32_t>(prod0);
      x0[b] = y0;
      x2[b] = y2;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int b = 0; b < kPhiloxBatch; ++b) {
    words[4 * b] = x0[b];
    words[4 * b + 1] = x1[b];
    words[4 * b + 2] = x2[b];
    words[4 * b + 3] = x3[b];
  }
}

// keep[j] = 1 when element first_element + j (j < n) survives dropout, else 0.
void keep_flags(std::uint64_t seed, std::uint64_t offset, std::int64_t first_element, std::int64_t n,
                std::uint32_t threshold, std::uint32_t* keep) {
  const auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  const std::uint64_t first_word = offset + static_cast<std::uint64_t>(first_element);
  const std::uint64_t end_word = first_word + static_cast<std::uint64_t>(n);
  std::uint32_t words[4 * kPhiloxBatch];
  // Batches are aligned to whole Philox blocks; words outside [first_word, end_word) are skipped.
  for (std::uint64_t block = first_word / 4; 4 * block < end_word; block += kPhiloxBatch) {
    philox_batch(block, k0, k1, words);
    const std::uint64_t lo = std::max(4 * block, first_word), hi = std::min(4 * block + 4 * kPhiloxBatch, end_word);
    for (std::uint64_t w = lo; w < hi; ++w)
      keep[w - first_word] = (words[w - 4 * block] >> 8) >= threshold ? 1 : 0;
  }
}

std::uint32_t keep_threshold(double p) { return static_cast<std::uint32_t>(std::ceil(p * 16777216.0)); }

// Keys 0 .. horizon - 1 of a row may be valid; the rest are causally masked.
std::int64_t row_horizon(bool causal, std::int64_t query, std::int64_t tq, std::int64_t tk) {
  return causal ? std::clamp<std::int64_t>(query + (tk - tq) + 1, 0, tk) : tk;
}

// Per-thread scratch for one row.
template <typename T>
struct RowScratch {
  std::vector<T> values;
  std::vector<std::uint32_t> keep;
  RowScratch(std::int64_t tk, bool dropping)
      : values(static_cast<std::size_t>(tk)), keep(dropping ? static_cast<std::size_t>(tk) : 0) {}
};

// What every row of one call shares.
template <typename T>
struct RowParams {
  std::int64_t heads, tq, tk;
  bool causal;
  const std::int32_t* padding;  // null, or [B, Tk]
  std::uint64_t seed, offset;
  std::uint32_t threshold;      // dropout keep threshold on the top 24 bits of a word
  T drop_scale;
};

// Row r of the forward kernel: P into out (which may be s itself: every loop reads element j
// before writing it), D into d when d is not null. Kept out of the OpenMP region's body: inlined
// there, GCC did not vectorise the max and exp loops.
template <typename T>
[[gnu::noinline]] void softmax_row(const RowParams<T>& rp, std::int64_t r, const T* s, T* out, T* d,
                                   RowScratch<T>& scratch) {
  const std::int64_t tk = rp.tk;
  const std::int64_t n = row_horizon(rp.causal, r % rp.tq, rp.tq, tk);
  const T* x = s;
  bool any = n > 0;
  if (rp.padding != nullptr) {
    const std::int32_t* pad = rp.padding + (r / (rp.heads * rp.tq)) * tk;
    T* masked = scratch.values.data();
    std::int64_t unpadded = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      masked[j] = pad[j] != 0 ? -std::numeric_limits<T>::infinity() : s[j];
      unpadded += pad[j] == 0;
    }
    x = masked;
    any = unpadded > 0;
  }
  std::int64_t live = 0;  // out[0, live) holds probabilities; the rest of the row is zero
  const T m = any ? row_max(x, n) : T(0);
  if (any && m != -std::numeric_limits<T>::infinity()) {  // all valid scores -inf: fully masked
    store_softmax<kSumOrder>(x, out, n, m);
    live = n;
  }
  std::fill(out + live, out + tk, T(0));
  if (d != nullptr) {
    std::uint32_t* keep = scratch.keep.data();
    keep_flags(rp.seed, rp.offset, r * tk, live, rp.threshold, keep);
    for (std::int64_t j = 0; j < live; ++j) d[j] = keep[j] ? static_cast<T>(out[j] * rp.drop_scale) : T(0);
    std::fill(d + live, d + tk, T(0));
  }
}

// Row r of the backward kernel: dS into gs (which may be gd itself: element j is read before it
// is written), D into d when d is not null.
template <typename T>
[[gnu::noinline]] void softmax_backward_row(const RowParams<T>& rp, std::int64_t r, const T* pr, const T* gd, T* gs,
                                            T* d, T scale, RowScratch<T>& scratch) {
  const std::int64_t tk = rp.tk;
  // Probabilities past the causal horizon are zero, and so are their gradients.
  const std::int64_t n = row_horizon(rp.causal, r % rp.tq, rp.tq, tk);
  const T* g = gd;  // dL/dP: dL/dD through the dropout mask and scale
  if (d != nullptr) {
    T* gp = scratch.values.data();
    std::uint32_t* keep = scratch.keep.data();
    keep_flags(rp.seed, rp.offset, r * tk, n, rp.threshold, keep);
    for (std::int64_t j = 0; j < n; ++j) {
      gp[j] = keep[j] ? gd[j] * rp.drop_scale : T(0);
      d[j] = keep[j] ? static_cast<T>(pr[j] * rp.drop_scale) : T(0);
    }
    std::fill(d + n, d + tk, T(0));
    g = gp;
  }
  const T dot = static_cast<T>(row_dot<kSumOrder>(g, pr, n));
  for (std::int64_t j = 0; j < n; ++j) gs[j] = scale * pr[j] * (g[j] - dot);
  std::fill(gs + n, gs + tk, T(0));
}

template <typename T>
RowParams<T> row_params(const Tensor& t, bool causal, const Tensor& key_padding, double p, std::uint64_t seed,
                        std::uint64_t offset) {
  return {t.size(1), t.size(2), t.size(3), causal,
          key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr,
          seed, offset, keep_threshold(p), dropout_scale<T>(p)};
}

template <typename T>
void softmax_typed(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                   bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  const RowParams<T> rp = row_params<T>(scores, causal, key_padding, p, seed, offset);
  const std::int64_t tk = rp.tk, rows = scores.numel() / tk;
  const T* s = scores.data<T>();
  T* out = probs.data<T>();
  T* d = dropped.defined() ? dropped.data<T>() : nullptr;
#pragma omp parallel if (scores.numel() > kParallelGrain)
  {
    RowScratch<T> scratch(tk, d != nullptr);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      softmax_row(rp, r, s + r * tk, out + r * tk, d ? d + r * tk : nullptr, scratch);
  }
}

template <typename T>
void softmax_backward_typed(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                            const Tensor& dropped, bool causal, double p, std::uint64_t seed, std::uint64_t offset,
                            double scale) {
  const RowParams<T> rp = row_params<T>(probs, causal, Tensor(), p, seed, offset);
  const std::int64_t tk = rp.tk, rows = probs.numel() / tk;
  const T* pr = probs.data<T>();
  const T* gd = grad_dropped.data<T>();
  T* gs = grad_scores.data<T>();
  T* d = dropped.defined() ? dropped.data<T>() : nullptr;
#pragma omp parallel if (probs.numel() > kParallelGrain)
  {
    RowScratch<T> scratch(tk, d != nullptr);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      softmax_backward_row(rp, r, pr + r * tk, gd + r * tk, gs + r * tk, d ? d + r * tk : nullptr,
                           static_cast<T>(scale), scratch);
  }
}

}  // namespace

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  DEFINE_DISPATCH_FLOAT(scores.dtype(), "attention_softmax", [&] {
    softmax_typed<scalar_t>(scores, probs, dropped, key_padding, causal, p, seed, offset);
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool causal, double p, std::uint64_t seed,
                                std::uint64_t offset, double scale) {
  DEFINE_DISPATCH_FLOAT(probs.dtype(), "attention_softmax_backward", [&] {
    softmax_backward_typed<scalar_t>(probs, grad_dropped, grad_scores, dropped, causal, p, seed, offset, scale);
  });
}

}  // namespace define::kernels::cpu
