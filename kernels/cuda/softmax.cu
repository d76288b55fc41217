// CUDA softmax family: softmax / log_softmax along any dim and their backward kernels, and the
// classification losses (cross entropy with a fused log-sum-exp, NLL, the loss reduction and both
// backward kernels). Entry points and checks: kernels/softmax.cpp, which hands every wrapper
// contiguous inputs and freshly allocated contiguous outputs; reference (the semantics, inf and NaN
// included): kernels/ref/softmax.cpp; tests: tests/ops/softmax_test.cpp (mode emu) and
// tests/cuda/softmax_kernels_test.cpp.
//
// Every softmax-style op is "reduce a row, then use the result": the row reduction goes through one
// of three launch shapes, chosen by the layout [outer, n, inner] around the softmax dim:
//   * inner == 1, n <= kWarpRowLimit: one warp per row (8 rows per 256-thread block), the reduction
//     entirely in registers with __shfl_xor_sync (kernels/cuda/row_reduce.cuh);
//   * inner == 1, longer rows (vocabulary logits): one 512-thread block per row, warp shuffles and
//     then one shared-memory slot per warp (row_reduce.cuh);
//   * inner > 1 (softmax over a dim that is not the last): a 32 x 8 block per tile of 32 adjacent
//     columns, so that neighbouring threads read neighbouring addresses; the 8 threads of a column
//     split the row and combine their partial results through shared memory.
// The forward reduction is online (running max and sum of exp(x - max), rescaled whenever the max
// grows), so a row is read once for its statistics and once to write the output. Every reduction
// combines partial results in an order fixed by thread indices: results are bit-identical run to
// run and under every emulator schedule. Every sum is a SumAcc (float_sum.cuh: compensated float
// for float32). Loss reduction is one block (no atomics).
#include <cstdint>

#include "core/dtype.h"
#include "kernels/softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/float_sum.cuh"
#include "kernels/cuda/index_check.cuh"
#include "kernels/cuda/row_reduce.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kColumnTile = 32;    // adjacent columns per block when the softmax dim is not the last
constexpr int kColumnSlices = 8;   // threads that share one such column
constexpr int kLossBlock = 256;    // the single block of reduce_loss_rows (a power of two)

// ---------------------------------------------------------------------------------------------
// Reduction states (MaxSum, Sum: row_reduce.cuh) and the one this file adds.

// Cross entropy needs the log-sum-exp and, for label smoothing, the plain sum of the logits.
template <typename T>
struct LogitStats {
  MaxSum<T> exp_sum;
  SumAcc<T> total;

  __device__ static LogitStats empty() { return {MaxSum<T>::empty(), SumAcc<T>::zero()}; }
  __device__ LogitStats merged(const LogitStats& o) const {
    return {exp_sum.merged(o.exp_sum), total.merged(o.total)};
  }
  __device__ LogitStats shfl_xor(int lane_mask) const { return {exp_sum.shfl_xor(lane_mask), total.shfl_xor(lane_mask)}; }
};

// ---------------------------------------------------------------------------------------------
// Element ops (the interface is described at ContiguousRows in row_reduce.cuh): what a launch
// shape calls for each row, a row being n elements at base + j * stride.

template <typename T, bool kLog>
struct SoftmaxForward {
  using State = MaxSum<T>;
  const T* x;
  T* y;

  __device__ bool reads_row(std::int64_t) const { return true; }
  __device__ T load(std::int64_t k) const { return x[k]; }
  __device__ static void add(State& st, T v) { st.add(v); }
  __device__ void finish(const State& st, std::int64_t, std::int64_t base, std::int64_t stride, std::int64_t n,
                         int first, int step) const {
    const T sum = st.final_sum();
    const auto read = [&](std::int64_t k) { return x[k]; };
    if constexpr (kLog) {
      // (x - max) - log(sum) rather than x - lse: lse is rounded at the magnitude of x, which
      // would cost the log-probabilities of large logits their low bits.
      const T log_sum = dev_log(sum);
      map_row(base, stride, n, first, step, read, [&](std::int64_t k, T v) { y[k] = (v - st.max) - log_sum; });
    } else {
      const T inv = T(1) / sum;
      map_row(base, stride, n, first, step, read, [&](std::int64_t k, T v) { y[k] = dev_exp(v - st.max) * inv; });
    }
  }
};

// softmax:     dx = y * (dy - sum(dy * y));
// log_softmax: dx = dy - exp(y) * sum(dy).
template <typename T, bool kLog>
struct SoftmaxBackward {
  using State = Sum<T>;
  const T* y;
  const T* dy;
  T* dx;

  struct Pair {
    T y, dy;
  };

  __device__ bool reads_row(std::int64_t) const { return true; }
  // log_softmax's sum needs dy alone.
  __device__ T load(std::int64_t k) const { return kLog ? dy[k] : dy[k] * y[k]; }
  __device__ static void add(State& st, T v) { st.add(v); }
  __device__ void finish(const State& st, std::int64_t, std::int64_t base, std::int64_t stride, std::int64_t n,
                         int first, int step) const {
    const T total = st.value();
    map_row(
        base, stride, n, first, step,
        [&](std::int64_t k) {
          return Pair{y[k], dy[k]};
        },
        [&](std::int64_t k, const Pair& e) { dx[k] = kLog ? e.dy - dev_exp(e.y) * total : e.y * (e.dy - total); });
  }
};

// loss_i = (1 - eps) * (lse_i - x[i, t_i]) + eps * (lse_i - mean_c x[i, c]); 0 (and lse 0) for
// an ignored target. The per-row formula runs once per row, in double like the CPU path. A target
// outside [0, classes) is reported through `check` and gets the ignored row's zeros.
template <typename T, typename I>
struct CrossEntropyRowOp {
  using State = LogitStats<T>;
  const T* logits;
  const I* target;
  T* loss;
  T* lse;
  std::int64_t classes;
  std::int64_t ignore_index;
  double label_smoothing;
  IndexCheck check;

  __device__ bool ignored(std::int64_t row) const { return static_cast<std::int64_t>(target[row]) == ignore_index; }
  __device__ bool reads_row(std::int64_t row) const { return !ignored(row); }
  __device__ T load(std::int64_t k) const { return logits[k]; }
  __device__ static void add(State& st, T v) {
    st.exp_sum.add(v);
    st.total.add(v);
  }
  __device__ void finish(const State& st, std::int64_t row, std::int64_t base, std::int64_t, std::int64_t,
                         int first, int) const {
    if (first != 0) return;
    if (ignored(row) || !check.in_range(static_cast<std::int64_t>(target[row]))) {
      loss[row] = T(0);
      lse[row] = T(0);
      return;
    }
    const double row_lse = double(st.exp_sum.max) + ::log(double(st.exp_sum.final_sum()));
    // Without smoothing the sum of the logits is not used at all (as in the CPU path), so masked
    // -inf logits cannot turn the loss into 0 * inf.
    const double mean = label_smoothing > 0 ? st.total.wide() / double(classes) : 0.0;
    const double x_target = logits[base + static_cast<std::int64_t>(target[row])];
    loss[row] = static_cast<T>((1.0 - label_smoothing) * (row_lse - x_target) + label_smoothing * (row_lse - mean));
    lse[row] = static_cast<T>(row_lse);
  }
};

// ---------------------------------------------------------------------------------------------
// Launch shapes: the contiguous-row ones are in row_reduce.cuh.

// Softmax over a dim with inner > 1: block (kColumnTile, kColumnSlices) takes 32 adjacent columns
// of one outer index; thread (x, y) reads elements y, y + 8, ... of column x. Each of a column's 8
// threads then merges the 8 partial states in the same order, so they agree bit for bit.
template <typename Op>
__global__ void __launch_bounds__(kColumnTile * kColumnSlices)
    column_kernel(Op op, std::int64_t outer, std::int64_t n, std::int64_t inner) {
  EMU_CHECK_LAUNCH_BOUNDS(kColumnTile * kColumnSlices);
  using State = typename Op::State;
  EMU_STATIC_SHARED(partial, State[kColumnSlices][kColumnTile]);
  const std::int64_t column_tiles = (inner + kColumnTile - 1) / kColumnTile;
  for (std::int64_t tile = blockIdx.x; tile < outer * column_tiles; tile += gridDim.x) {  // block-uniform
    const std::int64_t o = tile / column_tiles;
    const std::int64_t column = (tile % column_tiles) * kColumnTile + threadIdx.x;
    const bool valid = column < inner;
    const std::int64_t base = o * n * inner + column;
    State st = State::empty();
    if (valid) {
      // map_row's plain path, written out for float64: through map_row's lambdas the float64 forward
      // spills registers on sm_90.
      if constexpr (alignof(decltype(op.load(0))) <= 4)
        map_row(
            base, inner, n, static_cast<int>(threadIdx.y), kColumnSlices, [&](std::int64_t k) { return op.load(k); },
            [&](std::int64_t, const auto& v) { op.add(st, v); });
      else
        for (std::int64_t j = threadIdx.y; j < n; j += kColumnSlices) op.add(st, op.load(base + j * inner));
    }
    partial[threadIdx.y][threadIdx.x] = st;
    __syncthreads();
    st = partial[0][threadIdx.x];
#pragma unroll
    for (int s = 1; s < kColumnSlices; ++s) st = st.merged(partial[s][threadIdx.x]);
    if (valid) op.finish(st, o * inner + column, base, inner, n, threadIdx.y, kColumnSlices);
    __syncthreads();  // the next tile overwrites `partial`
  }
}

// Runs an element op over every softmax row of a contiguous tensor laid out as [outer, n, inner].
template <typename Op>
void launch_softmax_rows(const char* name, const Op& op, const SoftmaxLayout& l) {
  if (l.inner == 1) {
    launch_contiguous_rows(name, op, l.outer, l.n);
  } else {
    const std::int64_t tiles = l.outer * ((l.inner + kColumnTile - 1) / kColumnTile);
    launch_checked(name, column_kernel<Op>, grid_for(tiles, 1), dim3(kColumnTile, kColumnSlices), 0, op, l.outer, l.n,
                   l.inner);
  }
}

// ---------------------------------------------------------------------------------------------
// Loss kernels without a row reduction.

template <typename I>
__device__ __forceinline__ bool is_ignored(I t, std::int64_t ignore_index) {
  return static_cast<std::int64_t>(t) == ignore_index;
}

template <typename T, typename I>
__global__ void nll_rows_kernel(const T* __restrict__ log_probs, const I* __restrict__ target, T* __restrict__ loss,
                                std::int64_t rows, std::int64_t classes, std::int64_t ignore_index,
                                IndexCheck check) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += step) {
    const I t = target[i];
    const bool skip = is_ignored(t, ignore_index) || !check.in_range(static_cast<std::int64_t>(t));
    loss[i] = skip ? T(0) : -log_probs[i * classes + static_cast<std::int64_t>(t)];
  }
}

// One block: each thread sums a strided share of the rows, then a fixed-shape tree in shared
// memory. No atomics, so the loss is the same bits on every run.
template <typename T, typename I>
__global__ void __launch_bounds__(kLossBlock)
    reduce_loss_kernel(const T* __restrict__ rows, const I* __restrict__ target, std::int64_t n,
                       std::int64_t ignore_index, bool mean, T* __restrict__ loss, T* __restrict__ total_weight) {
  EMU_CHECK_LAUNCH_BOUNDS(kLossBlock);
  EMU_STATIC_SHARED(sums, SumAcc<T>[kLossBlock]);
  EMU_STATIC_SHARED(counts, std::int64_t[kLossBlock]);
  SumAcc<T> sum = SumAcc<T>::zero();
  std::int64_t count = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (is_ignored(target[i], ignore_index)) continue;
    sum.add(rows[i]);
    ++count;
  }
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int half = kLossBlock / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      sums[threadIdx.x] = sums[threadIdx.x].merged(sums[threadIdx.x + half]);
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    // The weight the backward pass divides by: the non-ignored row count for a mean, 1 for a sum;
    // an empty mean is 0 (not 0 / 0).
    const double w = mean ? double(counts[0]) : 1.0;
    loss[0] = static_cast<T>(w > 0 ? sums[0].wide() / w : 0.0);
    total_weight[0] = static_cast<T>(w);
  }
}

// dx[i, c] = g_i / w * (exp(x[i, c] - lse_i) - (c == t_i ? 1 - eps : 0) - eps / C); 0 on ignored
// rows (whose lse is 0 and never used). One thread per element.
template <typename T, typename I>
__global__ void cross_entropy_backward_kernel(const T* __restrict__ logits, const T* __restrict__ lse,
                                              const I* __restrict__ target, const T* __restrict__ grad_loss,
                                              bool per_row, const T* __restrict__ total_weight,
                                              T* __restrict__ grad, std::int64_t rows, std::int64_t classes,
                                              std::int64_t ignore_index, T target_share, T smooth_share) {
  const std::int64_t total = rows * classes;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const T w = total_weight[0];
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += step) {
    const std::int64_t i = k / classes, c = k - i * classes;
    const I t = target[i];
    if (is_ignored(t, ignore_index)) {
      grad[k] = T(0);
      continue;
    }
    const T scale = grad_loss[per_row ? i : 0] / w;
    const T target_weight = (c == static_cast<std::int64_t>(t) ? target_share : T(0)) + smooth_share;
    grad[k] = scale * (dev_exp(logits[k] - lse[i]) - target_weight);
  }
}

// dx[i, c] = -g_i / w where c = t_i, 0 elsewhere and on ignored rows.
template <typename T, typename I>
__global__ void nll_backward_kernel(const I* __restrict__ target, const T* __restrict__ grad_loss, bool per_row,
                                    const T* __restrict__ total_weight, T* __restrict__ grad, std::int64_t rows,
                                    std::int64_t classes, std::int64_t ignore_index) {
  const std::int64_t total = rows * classes;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += step) {
    const std::int64_t i = k / classes, c = k - i * classes;
    const I t = target[i];
    const bool hit = !is_ignored(t, ignore_index) && c == static_cast<std::int64_t>(t);
    grad[k] = hit ? static_cast<T>(-double(grad_loss[per_row ? i : 0]) / double(total_weight[0])) : T(0);
  }
}

}  // namespace

void softmax(const Tensor& x, const Tensor& y, int dim) {
  const SoftmaxLayout layout = softmax_layout(x.shape(), dim);
  DEFINE_DISPATCH_FLOAT(x.dtype(), "softmax", [&] {
    launch_softmax_rows("softmax", SoftmaxForward<scalar_t, false>{x.data<scalar_t>(), y.data<scalar_t>()}, layout);
  });
}

void log_softmax(const Tensor& x, const Tensor& y, int dim) {
  const SoftmaxLayout layout = softmax_layout(x.shape(), dim);
  DEFINE_DISPATCH_FLOAT(x.dtype(), "log_softmax", [&] {
    launch_softmax_rows("log_softmax", SoftmaxForward<scalar_t, true>{x.data<scalar_t>(), y.data<scalar_t>()}, layout);
  });
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  const SoftmaxLayout layout = softmax_layout(y.shape(), dim);
  DEFINE_DISPATCH_FLOAT(y.dtype(), "softmax_backward", [&] {
    const SoftmaxBackward<scalar_t, false> op{y.data<scalar_t>(), dy.data<scalar_t>(), dx.data<scalar_t>()};
    launch_softmax_rows("softmax_backward", op, layout);
  });
}

void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  const SoftmaxLayout layout = softmax_layout(y.shape(), dim);
  DEFINE_DISPATCH_FLOAT(y.dtype(), "log_softmax_backward", [&] {
    const SoftmaxBackward<scalar_t, true> op{y.data<scalar_t>(), dy.data<scalar_t>(), dx.data<scalar_t>()};
    launch_softmax_rows("log_softmax_backward", op, layout);
  });
}

void cross_entropy_rows(const Tensor& logits, const Tensor& target, const Tensor& loss, const Tensor& lse,
                        std::int64_t ignore_index, double label_smoothing) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  const IndexCheck check = index_check("cross_entropy", IndexErrorKind::Classes, classes);
  dispatch_loss("cross_entropy", logits.dtype(), target.dtype(), [&]<typename T, typename I>() {
    const CrossEntropyRowOp<T, I> op{logits.data<T>(), target.data<I>(), loss.data<T>(),  lse.data<T>(),
                                     classes,          ignore_index,     label_smoothing, check};
    launch_contiguous_rows("cross_entropy", op, rows, classes);
  });
  index_check_launched();
}

void nll_rows(const Tensor& log_probs, const Tensor& target, const Tensor& loss, std::int64_t ignore_index) {
  const std::int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  const IndexCheck check = index_check("nll_loss", IndexErrorKind::Classes, classes);
  dispatch_loss("nll_loss", log_probs.dtype(), target.dtype(), [&]<typename T, typename I>() {
    launch_checked("nll_loss", nll_rows_kernel<T, I>, grid_for(rows), kBlockSize, 0, log_probs.data<T>(),
                   target.data<I>(), loss.data<T>(), rows, classes, ignore_index, check);
  });
  index_check_launched();
}

void reduce_loss_rows(const Tensor& rows, const Tensor& target, const Tensor& loss, const Tensor& total_weight,
                      std::int64_t ignore_index, bool mean) {
  dispatch_loss("reduce_loss_rows", rows.dtype(), target.dtype(), [&]<typename T, typename I>() {
    launch_checked("reduce_loss_rows", reduce_loss_kernel<T, I>, 1, kLossBlock, 0, rows.data<T>(), target.data<I>(),
                   rows.numel(), ignore_index, mean, loss.data<T>(), total_weight.data<T>());
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& target, const Tensor& grad_loss,
                            const Tensor& total_weight, const Tensor& grad_logits, std::int64_t ignore_index,
                            double label_smoothing) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  const bool per_row = grad_loss.numel() != 1;
  dispatch_loss("cross_entropy_backward", logits.dtype(), target.dtype(), [&]<typename T, typename I>() {
    launch_checked("cross_entropy_backward", cross_entropy_backward_kernel<T, I>, grid_for(rows * classes), kBlockSize,
                   0, logits.data<T>(), lse.data<T>(), target.data<I>(), grad_loss.data<T>(), per_row,
                   total_weight.data<T>(), grad_logits.data<T>(), rows, classes, ignore_index,
                   static_cast<T>(1.0 - label_smoothing), static_cast<T>(label_smoothing / double(classes)));
  });
}

void nll_backward(const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                  const Tensor& grad_log_probs, std::int64_t ignore_index) {
  const std::int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  const bool per_row = grad_loss.numel() != 1;
  dispatch_loss("nll_loss_backward", grad_log_probs.dtype(), target.dtype(), [&]<typename T, typename I>() {
    launch_checked("nll_loss_backward", nll_backward_kernel<T, I>, grid_for(rows * classes), kBlockSize, 0,
                   target.data<I>(), grad_loss.data<T>(), per_row, total_weight.data<T>(), grad_log_probs.data<T>(),
                   rows, classes, ignore_index);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
