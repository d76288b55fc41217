// Fused output layer and cross entropy on the CPU: see linear_cross_entropy.h for what and why.
//
// Forward: one GEMM for all the logits, threaded by the library, then one pass over each row that
// adds the bias and takes the row's statistics while the row is in cache, leaving in place of the
// logits the exponentials exp(logit - row max) that the row's sum needed anyway: the backward's
// softmax is then one multiply per element, not one exponential. Tiling the forward too
// (each thread's tiles through a one-thread GEMM, reduced while in L2) was tried and measured
// slower on the 2-core build VM: there two one-thread GEMMs run at 0.7-0.8x the rate of one
// two-thread GEMM of the same total work (Eigen and OpenBLAS alike), which cost more than the
// memory passes saved.
//
// Backward, tiled: the rows are cut into chunks and the classes into blocks so that one chunk's
// share of dx (rows x in) and one tile of gradient (rows x cols) fit together in three quarters of
// L2. A thread owns whole blocks (so dW's and db's rows of a block have one writer) and walks the
// chunks outermost: the chunk's dx partial stays in cache across the thread's blocks, and each
// tile's gradient is built in a per-thread buffer from the saved exponentials, used three times (db,
// dW, dx) and dropped, so the [rows, classes] gradient never exists.
#include "kernels/cpu/linear_cross_entropy.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <type_traits>

#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/cpu/loss_dispatch.h"
#include "kernels/cpu/row_math.h"

namespace define::kernels::cpu {
namespace {

using row_math::row_max;
using row_math::row_sum;
using row_math::row_sum_exp;
using row_math::store_scaled;
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

template <typename T>
constexpr bool kIsDouble = std::is_same_v<T, double>;

// Forward: the logits, then per row the bias, the log-sum-exp, the losses and the exponentials.
template <typename T, typename I>
void rows_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target, const Tensor& saved,
                const Tensor& row_max_out, const Tensor& loss, const Tensor& lse, const Tensor& nll,
                std::int64_t ignore_index, double eps) {
  const std::int64_t n = x.size(0), in = x.size(1), v = weight.size(0);
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  const I* t = target.data<I>();
  T* lg = saved.data<T>();  // the logits first, each row's exponentials after its pass
  // One GEMM for all the logits, threaded by the library (outside any OpenMP team here).
  const GemmProvider for_logits = gemm_provider(n, v, in, kIsDouble<T>, GemmRun::Threaded, {false, true});
  gemm_row_major<T>(for_logits, false, true, n, v, in, T(1), x.data<T>(), in, weight.data<T>(), in, T(0), lg, v);
  T* lp = loss.data<T>();
  T* lsep = lse.data<T>();
  T* maxp = row_max_out.data<T>();
  T* nllp = nll.defined() ? nll.data<T>() : nullptr;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    // The bias, then the row's statistics while it is still in cache (the composed ops cross the
    // logits three times here: the bias broadcast, the maximum, the sum of exponentials).
    T* row = lg + i * v;
    if (bp)
      for (std::int64_t j = 0; j < v; ++j) row[j] += bp[j];
    if (ignored(t[i], ignore_index)) {
      lp[i] = 0;
      lsep[i] = 0;
      maxp[i] = 0;
      if (nllp) nllp[i] = 0;
      continue;
    }
    // What reads the logits goes first: the sum of exponentials overwrites them.
    const T m = row_max(row, v);
    const double mean_x = eps > 0 ? row_sum<SumOrder::kLanesThenTail>(row, v) / double(v) : 0.0;
    const double target_logit = double(row[t[i]]);
    // The same operations as row_math::row_stats, so the loss keeps its bits.
    const double row_lse = double(m) + std::log(row_sum_exp<SumOrder::kLanesThenTail, T>(row, row, v, m));
    const double target_nll = row_lse - target_logit;
    maxp[i] = m;
    lp[i] = static_cast<T>((1.0 - eps) * target_nll + eps * (row_lse - mean_x));
    lsep[i] = static_cast<T>(row_lse);
    if (nllp) nllp[i] = static_cast<T>(target_nll);
  }
}

template <typename T, typename I>
void backward_typed(const Tensor& x, const Tensor& weight, const Tensor& saved, const Tensor& row_maxima,
                    const Tensor& lse, const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                    const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, std::int64_t ignore_index,
                    double eps) {
  const std::int64_t n = x.size(0), in = x.size(1), v = weight.size(0);
  const T* xp = x.data<T>();
  const T* wp = weight.data<T>();
  const T* ex = saved.data<T>();  // exp(logit - row max)
  const T* maxp = row_maxima.data<T>();
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
  const GemmProvider for_dw = gemm_provider(tile_cols, in, tile_rows, kIsDouble<T>, GemmRun::Serial, {true, false});
  const GemmProvider for_dx = gemm_provider(tile_rows, in, tile_cols, kIsDouble<T>, GemmRun::Serial, {false, false});
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
        // with softmax = exp(logit - max) * exp(max - lse).
        for (std::int64_t i = 0; i < rows; ++i) {
          const std::int64_t row = r0 + i;
          T* out = tile + i * w;
          if (ignored(t[row], ignore_index)) {
            std::fill(out, out + w, T(0));
            continue;
          }
          const double scale = double(g[per_row ? row : 0]) / total;
          store_scaled(ex + row * v + c0, out, w,
                       static_cast<T>(scale * std::exp(double(maxp[row]) - double(lsep[row]))),
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
                               const Tensor& saved, const Tensor& row_max, const Tensor& loss, const Tensor& lse,
                               const Tensor& nll, std::int64_t ignore_index, double label_smoothing) {
  dispatch_loss("linear_cross_entropy", x.dtype(), target.dtype(), [&]<typename T, typename I>() {
    rows_typed<T, I>(x, weight, bias, target, saved, row_max, loss, lse, nll, ignore_index, label_smoothing);
  });
}

void linear_cross_entropy_backward(const Tensor& x, const Tensor& weight, const Tensor& saved, const Tensor& row_max,
                                   const Tensor& lse, const Tensor& target, const Tensor& grad_loss,
                                   const Tensor& total_weight, const Tensor& grad_x, const Tensor& grad_weight,
                                   const Tensor& grad_bias, std::int64_t ignore_index, double label_smoothing) {
  dispatch_loss("linear_cross_entropy_backward", x.dtype(), target.dtype(), [&]<typename T, typename I>() {
    backward_typed<T, I>(x, weight, saved, row_max, lse, target, grad_loss, total_weight, grad_x, grad_weight,
                         grad_bias, ignore_index, label_smoothing);
  });
}

}  // namespace define::kernels::cpu
