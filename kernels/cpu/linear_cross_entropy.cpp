// Fused output layer and cross entropy on the CPU: see linear_cross_entropy.h for what and why.
//
// Tiling: the rows are cut into chunks and the classes into blocks so that one chunk's share of
// dx (rows x in) and one tile of logits or gradient (rows x cols) fit together in three quarters
// of L2. Forward, each (block, chunk) tile is the GEMM's output, written where the logits live and
// reduced to per-row statistics (maximum, sum of exponentials, sum of logits) while still in cache;
// the rows' log-sum-exp then merges the blocks' statistics in block order. Backward, a thread owns
// whole blocks (so dW's and db's rows of a block have one writer) and walks the chunks outermost:
// the chunk's dx partial stays in cache across the thread's blocks, and each tile's gradient is
// built in a per-thread buffer, used three times (db, dW, dx) and dropped.
#include "kernels/cpu/linear_cross_entropy.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/cpu/row_math.h"

namespace define::kernels::cpu {
namespace {

using row_math::max_of;
using row_math::row_max;
using row_math::row_sum;
using row_math::row_sum_exp;
using row_math::store_scaled_exp;
using row_math::SumOrder;

std::int64_t l2_bytes() {
  static const std::int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? std::int64_t(v) : std::int64_t(1) << 20;  // 1 MiB when the OS does not say
  }();
  return bytes;
}

thread_local std::int64_t forced_rows = 0, forced_cols = 0;  // LinearCrossEntropyTilesForTest

struct Tiling {
  std::int64_t rows = 1, cols = 16;  // rows per chunk, columns per block
  std::int64_t chunks = 1, blocks = 1;
};

Tiling tiling(std::int64_t n, std::int64_t in, std::int64_t v, std::size_t elem) {
  const std::int64_t budget = l2_bytes() * 3 / 4;
  const auto e = static_cast<std::int64_t>(elem);
  Tiling t;
  const std::int64_t rows_in_half = std::max<std::int64_t>(16, budget / 2 / std::max<std::int64_t>(1, in * e));
  t.rows = std::max<std::int64_t>(1, std::min(n, rows_in_half));
  t.cols = std::max<std::int64_t>(16, (budget - t.rows * in * e) / (t.rows * e) / 16 * 16);
  // A whole number of blocks per thread where there are enough: the backward's threads own
  // blocks, so one block more for some thread is that much more of the layer's time for all.
  const auto threads = static_cast<std::int64_t>(omp_get_max_threads());
  const std::int64_t blocks = (v + t.cols - 1) / t.cols;
  if (blocks >= threads) {
    const std::int64_t even = (blocks + threads - 1) / threads * threads;
    t.cols = std::max<std::int64_t>(16, ((v + even - 1) / even + 15) / 16 * 16);
  }
  if (forced_rows > 0) t.rows = forced_rows;
  if (forced_cols > 0) t.cols = forced_cols;
  t.chunks = std::max<std::int64_t>(1, (n + t.rows - 1) / t.rows);
  t.blocks = std::max<std::int64_t>(1, (v + t.cols - 1) / t.cols);
  return t;
}

template <typename I>
bool ignored(I t, std::int64_t ignore_index) {
  return static_cast<std::int64_t>(t) == ignore_index;
}

template <typename T>
constexpr bool kIsDouble = std::is_same_v<T, double>;

// The rows' log-sum-exp from the blocks' statistics (merged in block order), and the losses.
template <typename T, typename I>
void finish_rows(const I* t, std::int64_t n, std::int64_t v, const Tiling& tl, const std::vector<T>& block_max,
                 const std::vector<double>& block_sum, const std::vector<double>& block_sum_x,
                 const std::vector<T>& target_logit, const Tensor& loss, const Tensor& lse, const Tensor& nll,
                 std::int64_t ignore_index, double eps) {
  T* lp = loss.data<T>();
  T* lsep = lse.data<T>();
  T* nllp = nll.defined() ? nll.data<T>() : nullptr;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    if (ignored(t[i], ignore_index)) {
      lp[i] = 0;
      lsep[i] = 0;
      if (nllp) nllp[i] = 0;
      continue;
    }
    T m = -std::numeric_limits<T>::infinity();
    for (std::int64_t b = 0; b < tl.blocks; ++b) m = max_of(m, block_max[b * n + i]);
    double sum = 0, sum_x = 0;
    for (std::int64_t b = 0; b < tl.blocks; ++b) {
      const std::size_t cell = static_cast<std::size_t>(b * n + i);
      if (block_max[cell] != -std::numeric_limits<T>::infinity())
        sum += block_sum[cell] * std::exp(double(block_max[cell]) - double(m));
      if (eps > 0) sum_x += block_sum_x[cell];
    }
    const double row_lse = double(m) + std::log(sum);
    lp[i] = static_cast<T>((1.0 - eps) * (row_lse - double(target_logit[i])) + eps * (row_lse - sum_x / double(v)));
    lsep[i] = static_cast<T>(row_lse);
    if (nllp) nllp[i] = static_cast<T>(row_lse - double(target_logit[i]));
  }
}

template <typename T, typename I>
void rows_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target, const Tensor& logits,
                const Tensor& loss, const Tensor& lse, const Tensor& nll, std::int64_t ignore_index, double eps) {
  const std::int64_t n = x.size(0), in = x.size(1), v = weight.size(0);
  const T* xp = x.data<T>();
  const T* wp = weight.data<T>();
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  const I* t = target.data<I>();
  T* lg = logits.data<T>();
  const Tiling tl = tiling(n, in, v, sizeof(T));
  const GemmProvider provider = gemm_provider(std::min(n, tl.rows), std::min(v, tl.cols), in, kIsDouble<T>);

  // Per block and row: the maximum, sum exp(x - max) and (with smoothing) sum x over the block's
  // columns; the target's logit from the one block that holds it.
  const std::size_t cells = static_cast<std::size_t>(tl.blocks * n);
  std::vector<T> block_max(cells, -std::numeric_limits<T>::infinity());
  std::vector<double> block_sum(cells, 0.0), block_sum_x(eps > 0 ? cells : 0, 0.0);
  std::vector<T> target_logit(static_cast<std::size_t>(n), T(0));

#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < tl.blocks; ++b)
    for (std::int64_t r = 0; r < tl.chunks; ++r) {
      const std::int64_t c0 = b * tl.cols, w = std::min(tl.cols, v - c0);
      const std::int64_t r0 = r * tl.rows, rows = std::min(tl.rows, n - r0);
      T* tile = lg + r0 * v + c0;
      if (bp)
        for (std::int64_t i = 0; i < rows; ++i) std::memcpy(tile + i * v, bp + c0, sizeof(T) * w);
      gemm_row_major<T>(provider, false, true, rows, w, in, T(1), xp + r0 * in, in, wp + c0 * in, in,
                        bp ? T(1) : T(0), tile, v);
      for (std::int64_t i = r0; i < r0 + rows; ++i) {
        if (ignored(t[i], ignore_index)) continue;
        const T* row = lg + i * v + c0;
        const std::size_t cell = static_cast<std::size_t>(b * n + i);
        const T m = row_max(row, w);
        block_max[cell] = m;
        if (m != -std::numeric_limits<T>::infinity())
          block_sum[cell] = row_sum_exp<SumOrder::kLanesThenTail, T>(row, nullptr, w, m);
        if (eps > 0) block_sum_x[cell] = row_sum<SumOrder::kLanesThenTail>(row, w);
        const std::int64_t c = static_cast<std::int64_t>(t[i]) - c0;
        if (c >= 0 && c < w) target_logit[i] = row[c];
      }
    }

  finish_rows<T, I>(t, n, v, tl, block_max, block_sum, block_sum_x, target_logit, loss, lse, nll, ignore_index, eps);
}

template <typename T, typename I>
void backward_typed(const Tensor& x, const Tensor& weight, const Tensor& logits, const Tensor& lse,
                    const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_x,
                    const Tensor& grad_weight, const Tensor& grad_bias, std::int64_t ignore_index, double eps) {
  const std::int64_t n = x.size(0), in = x.size(1), v = weight.size(0);
  const T* xp = x.data<T>();
  const T* wp = weight.data<T>();
  const T* lg = logits.data<T>();
  const T* lsep = lse.data<T>();
  const I* t = target.data<I>();
  const T* g = grad_loss.data<T>();
  const bool per_row = grad_loss.numel() != 1;
  const double total = double(total_weight.data<T>()[0]);
  T* dxp = grad_x.defined() ? grad_x.data<T>() : nullptr;
  T* dwp = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
  T* dbp = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
  if (!dxp && !dwp && !dbp) return;

  const Tiling tl = tiling(n, in, v, sizeof(T));
  const std::int64_t tile_rows = std::min(n, tl.rows), tile_cols = std::min(v, tl.cols);
  const GemmProvider for_dw = gemm_provider(tile_cols, in, tile_rows, kIsDouble<T>);
  const GemmProvider for_dx = gemm_provider(tile_rows, in, tile_cols, kIsDouble<T>);
  const int max_threads = omp_get_max_threads();
  // Scratch from the caching allocator: one gradient tile per thread, and the dx partials of
  // threads 1.. (thread 0 accumulates straight into grad_x).
  const Tensor tiles = empty({max_threads, tile_rows * tile_cols}, {x.dtype()});
  const Tensor partials = dxp && max_threads > 1 ? empty({max_threads - 1, n * in}, {x.dtype()}) : Tensor();
  int team = 1;

#pragma omp parallel num_threads(max_threads)
  {
    const int tid = omp_get_thread_num(), threads = omp_get_num_threads();
    if (tid == 0) team = threads;
    const std::int64_t first = tl.blocks * tid / threads, last = tl.blocks * (tid + 1) / threads;
    T* tile = tiles.data<T>() + tid * tile_rows * tile_cols;
    T* dx_mine = !dxp ? nullptr : tid == 0 ? dxp : partials.data<T>() + (tid - 1) * n * in;
    if (dx_mine && first == last) std::fill(dx_mine, dx_mine + n * in, T(0));
    for (std::int64_t r = 0; r < tl.chunks; ++r) {
      const std::int64_t r0 = r * tl.rows, rows = std::min(tl.rows, n - r0);
      for (std::int64_t b = first; b < last; ++b) {
        const std::int64_t c0 = b * tl.cols, w = std::min(tl.cols, v - c0);
        // The tile's gradient, rows of width w: g_i / total * (softmax - (1 - eps) onehot - eps / V),
        // formed as in kernels/cpu/softmax.cpp's cross_entropy_backward.
        for (std::int64_t i = 0; i < rows; ++i) {
          const std::int64_t row = r0 + i;
          T* out = tile + i * w;
          if (ignored(t[row], ignore_index)) {
            std::fill(out, out + w, T(0));
            continue;
          }
          const double scale = double(g[per_row ? row : 0]) / total;
          store_scaled_exp(lg + row * v + c0, out, w, lsep[row], static_cast<T>(scale),
                           static_cast<T>(scale * eps / double(v)));
          const std::int64_t c = static_cast<std::int64_t>(t[row]) - c0;
          if (c >= 0 && c < w) out[c] = static_cast<T>(double(out[c]) - scale * (1.0 - eps));
        }
        if (dbp) {
          T* db = dbp + c0;
          if (r == 0) std::fill(db, db + w, T(0));
          for (std::int64_t i = 0; i < rows; ++i) {
            const T* src = tile + i * w;
            for (std::int64_t j = 0; j < w; ++j) db[j] += src[j];
          }
        }
        if (dwp)  // dW[block] (+)= tile^T x[chunk]
          gemm_row_major<T>(for_dw, true, false, w, in, rows, T(1), tile, w, xp + r0 * in, in, r == 0 ? T(0) : T(1),
                            dwp + c0 * in, in);
        if (dx_mine)  // dx[chunk] (+)= tile W[block]
          gemm_row_major<T>(for_dx, false, false, rows, in, w, T(1), tile, w, wp + c0 * in, in,
                            b == first ? T(0) : T(1), dx_mine + r0 * in, in);
      }
    }
  }

  if (dxp && team > 1) {
    const T* parts = partials.data<T>();
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k < n * in; ++k) {
      T s = dxp[k];
      for (int p = 0; p < team - 1; ++p) s += parts[p * n * in + k];
      dxp[k] = s;
    }
  }
}

template <typename Fn>
void dispatch(const char* op, DType values, DType target, Fn&& fn) {
  DEFINE_DISPATCH_FLOAT(values, op, [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(target, op, [&] { fn.template operator()<T, scalar_t>(); });
  });
}

}  // namespace

LinearCrossEntropyTilesForTest::LinearCrossEntropyTilesForTest(std::int64_t rows, std::int64_t cols)
    : prev_rows_(forced_rows), prev_cols_(forced_cols) {
  forced_rows = rows;
  forced_cols = cols;
}

LinearCrossEntropyTilesForTest::~LinearCrossEntropyTilesForTest() {
  forced_rows = prev_rows_;
  forced_cols = prev_cols_;
}

void linear_cross_entropy_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target,
                               const Tensor& logits, const Tensor& loss, const Tensor& lse, const Tensor& nll,
                               std::int64_t ignore_index, double label_smoothing) {
  dispatch("linear_cross_entropy", x.dtype(), target.dtype(), [&]<typename T, typename I>() {
    rows_typed<T, I>(x, weight, bias, target, logits, loss, lse, nll, ignore_index, label_smoothing);
  });
}

void linear_cross_entropy_backward(const Tensor& x, const Tensor& weight, const Tensor& logits, const Tensor& lse,
                                   const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                                   const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                                   std::int64_t ignore_index, double label_smoothing) {
  dispatch("linear_cross_entropy_backward", x.dtype(), target.dtype(), [&]<typename T, typename I>() {
    backward_typed<T, I>(x, weight, logits, lse, target, grad_loss, total_weight, grad_x, grad_weight, grad_bias,
                         ignore_index, label_smoothing);
  });
}

}  // namespace define::kernels::cpu
