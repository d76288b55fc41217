// CUDA adaptive-softmax family: the fused loss (forward and backward) and the full
// log-probabilities (forward and backward) of an adaptive softmax from its head and tail logits.
// Semantics: kernels/adaptive_softmax.h; entry points and checks: kernels/adaptive_softmax.cpp
// (every operand contiguous, the partition validated); reference: kernels/ref/adaptive_softmax.cpp;
// tests: tests/ops/adaptive_softmax_test.cpp (mode emu) and tests/cuda/adaptive_softmax_kernels_test.cpp.
//
// Row reductions (log-sum-exp of a head or tail row, the row sum of an upstream gradient) run in
// one of two launch shapes (kernels/cuda/row_reduce.cuh, shared with softmax.cu):
//   * rows up to kWarpRowLimit (1024) wide: one warp per row, 8 rows per 256-thread block, the
//     reduction in registers with __shfl_xor_sync butterflies;
//   * wider rows (a large shortlist or tail): one 512-thread block per row, warp butterflies and
//     then one shared-memory slot per warp.
// The max / sum-of-exp reduction is online (running max, sum rescaled when the max grows), so a
// row is read once for its statistics and once more only where an output row is written.
//
// Launch sequence of the loss: the head launch writes every row's head term (0 for ignored rows);
// then one launch per non-empty tail adds the tail term to the loss of each of its rows. Each row
// is in at most one tail and launches on a stream are ordered, so no element is written by two
// threads at once: no atomics. The backward pass is elementwise (one thread per element, from the
// saved log-sum-exps): head, then each tail. Partial results are always combined in an order fixed
// by thread indices, so results are bit-identical run to run and under every emulator schedule.
//
// The loss kernels check the targets and the partition on the device (index_check.cuh): a target
// outside [0, V), a tail row outside [0, N) or a row listed for a tail its target is not in is
// reported to the host at its next synchronisation point, and the kernels skip it instead of
// reading out of bounds. (On the CPU the entry point checks the same on the host, plus that every
// row is listed exactly once, which the device does not check: a wrong count gives a wrong loss,
// never a bad access.)
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/index_check.cuh"
#include "kernels/cuda/row_reduce.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kMaxBounds = 33;  // c_0 .. c_T for up to 32 tails (the entry point's limit)

// The cluster bounds, by value in the kernel parameters (a few hundred bytes).
struct Bounds {
  std::int64_t c[kMaxBounds];
  int count;  // T + 1
};

Bounds bounds_of(const std::vector<std::int64_t>& v) {
  Bounds b{};
  b.count = static_cast<int>(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b.c[i] = v[i];
  return b;
}

// Head column that scores word t: t in the shortlist, else c_0 + (its tail).
__device__ __forceinline__ std::int64_t head_slot(const Bounds& b, std::int64_t t) {
  if (t < b.c[0]) return t;
  int tail = 0;
  while (tail + 2 < b.count && t >= b.c[tail + 1]) ++tail;
  return b.c[0] + tail;
}

// ---------------------------------------------------------------------------------------------
// Row reductions. The states (MaxSum, Sum) and the launch shapes are in row_reduce.cuh; the ops
// below are element ops (interface at ContiguousRows there) except TailLogProbBackwardOp, whose
// rows are not contiguous and which is a row op.

// Head term of the loss: loss[r] = lse(head_r) - head[r, slot(t_r)]; 0 for ignored rows and for
// targets outside [0, V) (reported through `check`).
template <typename T, typename I>
struct HeadLossOp {
  using State = MaxSum<T>;
  const T* head;
  const I* target;
  T* loss;
  T* head_lse;
  Bounds bounds;
  std::int64_t ignore_index;
  IndexCheck check;  // bound V

  __device__ bool reads_row(std::int64_t r) const { return static_cast<std::int64_t>(target[r]) != ignore_index; }
  __device__ T load(std::int64_t k) const { return head[k]; }
  __device__ static void add(State& st, T v) { st.add(v); }
  __device__ void finish(const State& st, std::int64_t r, std::int64_t base, std::int64_t, std::int64_t, int first,
                         int) const {
    if (first != 0) return;
    if (!reads_row(r) || !check.in_range(static_cast<std::int64_t>(target[r]))) {
      loss[r] = T(0);
      head_lse[r] = T(0);
      return;
    }
    const double lse = st.lse();
    loss[r] = static_cast<T>(lse - double(head[base + head_slot(bounds, static_cast<std::int64_t>(target[r]))]));
    head_lse[r] = static_cast<T>(lse);
  }
};

// Tail term: row k of tail i belongs to row r = rows[k]; loss[r] += lse(tail_k) - tail[k, t_r - c_i].
// A row outside [0, N), or whose target is not in [c_i, c_{i+1}), is reported through `check` and
// skipped.
template <typename T, typename I>
struct TailLossOp {
  using State = MaxSum<T>;
  const T* tail;
  const std::int64_t* rows;
  const I* target;
  T* loss;
  T* tail_lse;
  std::int64_t first_word;  // c_i
  std::int64_t end_word;    // c_{i+1}
  std::int64_t tail_index;  // i
  IndexCheck check;         // bound N: the rows of the head

  __device__ bool reads_row(std::int64_t) const { return true; }
  __device__ T load(std::int64_t k) const { return tail[k]; }
  __device__ static void add(State& st, T v) { st.add(v); }
  __device__ void finish(const State& st, std::int64_t k, std::int64_t base, std::int64_t, std::int64_t, int first,
                         int) const {
    if (first != 0) return;
    const std::int64_t r = rows[k];
    const double lse = st.lse();
    tail_lse[k] = static_cast<T>(lse);
    const auto detail = static_cast<std::int32_t>(tail_index);
    if (r < 0 || r >= check.bound) {
      check.report(r, check.bound, static_cast<std::int32_t>(IndexErrorKind::TailRow), detail);
      return;
    }
    const auto t = static_cast<std::int64_t>(target[r]);
    if (t < first_word || t >= end_word) {
      check.report(r, first_word, static_cast<std::int32_t>(IndexErrorKind::TailTarget), detail, end_word, t);
      return;
    }
    loss[r] = static_cast<T>(double(loss[r]) + (lse - double(tail[base + t - first_word])));
  }
};

// head_lp = log_softmax(head); out[:, :c_0] = its shortlist columns.
template <typename T>
struct HeadLogProbOp {
  using State = MaxSum<T>;
  const T* head;
  T* head_lp;
  T* out;
  std::int64_t shortlist;  // c_0
  std::int64_t vocab;      // V

  __device__ bool reads_row(std::int64_t) const { return true; }
  __device__ T load(std::int64_t k) const { return head[k]; }
  __device__ static void add(State& st, T v) { st.add(v); }
  __device__ void finish(const State& st, std::int64_t r, std::int64_t base, std::int64_t, std::int64_t n, int first,
                         int step) const {
    const T log_sum = st.log_sum();
    map_row(
        base, 1, n, first, step, [&](std::int64_t k) { return head[k]; },
        [&](std::int64_t k, T v) {
          const T lp = (v - st.max) - log_sum;
          head_lp[k] = lp;
          if (k - base < shortlist) out[r * vocab + (k - base)] = lp;
        });
  }
};

// out[r, c_i + j] = head_lp[r, c_0 + i] + log_softmax(tail_r)[j] (every row through tail i).
template <typename T>
struct TailLogProbOp {
  using State = MaxSum<T>;
  const T* tail;
  const T* head_lp;
  T* out;
  std::int64_t head_width;  // c_0 + T
  std::int64_t slot;        // c_0 + i
  std::int64_t first_word;  // c_i
  std::int64_t vocab;

  __device__ bool reads_row(std::int64_t) const { return true; }
  __device__ T load(std::int64_t k) const { return tail[k]; }
  __device__ static void add(State& st, T v) { st.add(v); }
  __device__ void finish(const State& st, std::int64_t r, std::int64_t base, std::int64_t, std::int64_t n, int first,
                         int step) const {
    const T log_sum = st.log_sum();
    const T cluster_lp = head_lp[r * head_width + slot];
    T* dst = out + r * vocab + first_word;
    map_row(
        base, 1, n, first, step, [&](std::int64_t k) { return tail[k]; },
        [&](std::int64_t k, T v) { dst[k - base] = cluster_lp + ((v - st.max) - log_sum); });
  }
};

// Backward of a tail block of the log-probabilities: s = sum_j dout[r, c_i + j];
// dtail[r, j] = dout[r, c_i + j] - exp(out[r, c_i + j] - head_lp[r, c_0 + i]) * s, and the head
// log-prob gradient's cluster column c_0 + i receives s.
template <typename T>
struct TailLogProbBackwardOp {
  using State = Sum<T>;
  const T* out;
  const T* head_lp;
  const T* grad_out;
  T* grad_tail;
  T* grad_head_lp;
  std::int64_t head_width;
  std::int64_t slot;
  std::int64_t first_word;
  std::int64_t vocab;
  std::int64_t width;  // c_{i+1} - c_i

  struct Pair {
    T out, grad_out;
  };

  __device__ void accumulate(State& st, std::int64_t r, int first, int step) const {
    map_row(
        r * vocab + first_word, 1, width, first, step, [&](std::int64_t k) { return grad_out[k]; },
        [&](std::int64_t, T v) { st.add(v); });
  }
  __device__ void finish(const State& st, std::int64_t r, int first, int step) const {
    const T cluster_lp = head_lp[r * head_width + slot];
    const T total = st.value();
    map_row(
        0, 1, width, first, step,
        [&](std::int64_t j) {
          const std::int64_t k = r * vocab + first_word + j;
          return Pair{out[k], grad_out[k]};
        },
        [&](std::int64_t j, const Pair& e) {
          grad_tail[r * width + j] = e.grad_out - dev_exp(e.out - cluster_lp) * total;
        });
    if (first == 0) grad_head_lp[r * head_width + slot] = total;
  }
};

// ---------------------------------------------------------------------------------------------
// Elementwise kernels (grid-stride, one element per thread and step).

// Upstream gradient of row r over the total weight.
template <typename T>
__device__ __forceinline__ T row_scale(const T* grad_loss, bool per_row, std::int64_t r, T weight) {
  return grad_loss[per_row ? r : 0] / weight;
}

// dhead[r, c] = s_r * (exp(head[r, c] - lse_r) - [c == slot(t_r)]); 0 on ignored rows.
template <typename T, typename I>
__global__ void head_backward_kernel(const T* __restrict__ head, const T* __restrict__ head_lse,
                                     const I* __restrict__ target, const T* __restrict__ grad_loss, bool per_row,
                                     const T* __restrict__ total_weight, T* __restrict__ grad, std::int64_t rows,
                                     Bounds bounds, std::int64_t ignore_index) {
  const std::int64_t width = bounds.c[0] + bounds.count - 1;
  const std::int64_t total = rows * width;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const T weight = total_weight[0];
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const std::int64_t r = e / width, c = e - r * width;
    const std::int64_t t = static_cast<std::int64_t>(target[r]);
    if (t == ignore_index) {
      grad[e] = T(0);
      continue;
    }
    const T s = row_scale(grad_loss, per_row, r, weight);
    const T p = dev_exp(head[e] - head_lse[r]);
    grad[e] = c == head_slot(bounds, t) ? s * (p - T(1)) : s * p;
  }
}

// dtail[k, j] = s_r * (exp(tail[k, j] - lse_k) - [j == t_r - c_i]) with r = rows[k].
template <typename T, typename I>
__global__ void tail_backward_kernel(const T* __restrict__ tail, const T* __restrict__ tail_lse,
                                     const std::int64_t* __restrict__ rows, const I* __restrict__ target,
                                     const T* __restrict__ grad_loss, bool per_row, const T* __restrict__ total_weight,
                                     T* __restrict__ grad, std::int64_t count, std::int64_t width,
                                     std::int64_t first_word, std::int64_t head_rows) {
  const std::int64_t total = count * width;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const T weight = total_weight[0];
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const std::int64_t k = e / width, j = e - k * width;
    const std::int64_t r = rows[k];
    if (r < 0 || r >= head_rows) {  // the forward pass reported it; only stay in bounds here
      grad[e] = T(0);
      continue;
    }
    const T s = row_scale(grad_loss, per_row, r, weight);
    const T p = dev_exp(tail[e] - tail_lse[k]);
    grad[e] = j == static_cast<std::int64_t>(target[r]) - first_word ? s * (p - T(1)) : s * p;
  }
}

// grad_head_lp[r, j] = grad_out[r, j] for the shortlist columns j < c_0.
template <typename T>
__global__ void copy_shortlist_kernel(const T* __restrict__ grad_out, T* __restrict__ grad_head_lp, std::int64_t rows,
                                      std::int64_t shortlist, std::int64_t head_width, std::int64_t vocab) {
  const std::int64_t total = rows * shortlist;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const std::int64_t r = e / shortlist, j = e - r * shortlist;
    grad_head_lp[r * head_width + j] = grad_out[r * vocab + j];
  }
}

}  // namespace

void adaptive_softmax_forward(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<Tensor>& tail_rows,
                              const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                              const Tensor& loss, const Tensor& head_lse, const std::vector<Tensor>& tail_lse) {
  const Bounds b = bounds_of(bounds);
  const char* op = "adaptive_softmax";
  const IndexCheck target_check = index_check(op, IndexErrorKind::Classes, bounds.back());
  const IndexCheck row_check = index_check(op, IndexErrorKind::TailRow, head.size(0));
  dispatch_loss(op, head.dtype(), target.dtype(), [&]<typename T, typename I>() {
    const HeadLossOp<T, I> head_op{head.data<T>(), target.data<I>(), loss.data<T>(), head_lse.data<T>(), b,
                                   ignore_index,   target_check};
    launch_contiguous_rows(op, head_op, head.size(0), head.size(1));
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const TailLossOp<T, I> tail_op{tails[i].data<T>(),   tail_rows[i].data<std::int64_t>(),
                                     target.data<I>(),     loss.data<T>(),
                                     tail_lse[i].data<T>(), bounds[i],
                                     bounds[i + 1],        static_cast<std::int64_t>(i),
                                     row_check};
      launch_contiguous_rows(op, tail_op, tails[i].size(0), tails[i].size(1));
    }
  });
  index_check_launched();
}

void adaptive_softmax_backward(const Tensor& head, const std::vector<Tensor>& tails, const Tensor& head_lse,
                               const std::vector<Tensor>& tail_lse, const std::vector<Tensor>& tail_rows,
                               const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                               const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_head,
                               const std::vector<Tensor>& grad_tails) {
  const Bounds b = bounds_of(bounds);
  const bool per_row = grad_loss.numel() != 1;
  const char* op = "adaptive_softmax_backward";
  dispatch_loss(op, head.dtype(), target.dtype(), [&]<typename T, typename I>() {
    const std::int64_t rows = head.size(0);
    launch_checked(op, head_backward_kernel<T, I>, grid_for(head.numel()), kBlockSize, 0, head.data<T>(),
                   head_lse.data<T>(), target.data<I>(), grad_loss.data<T>(), per_row, total_weight.data<T>(),
                   grad_head.data<T>(), rows, b, ignore_index);
    for (std::size_t i = 0; i < tails.size(); ++i) {
      if (tails[i].numel() == 0) continue;
      launch_checked(op, tail_backward_kernel<T, I>, grid_for(tails[i].numel()), kBlockSize, 0, tails[i].data<T>(),
                     tail_lse[i].data<T>(), tail_rows[i].data<std::int64_t>(), target.data<I>(), grad_loss.data<T>(),
                     per_row, total_weight.data<T>(), grad_tails[i].data<T>(), tails[i].size(0), tails[i].size(1),
                     bounds[i], rows);
    }
  });
}

void adaptive_log_prob(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<std::int64_t>& bounds,
                       const Tensor& out, const Tensor& head_lp) {
  const std::int64_t rows = head.size(0), width = head.size(1), vocab = bounds.back();
  DEFINE_DISPATCH_FLOAT(head.dtype(), "adaptive_log_prob", [&] {
    using T = scalar_t;
    const HeadLogProbOp<T> head_op{head.data<T>(), head_lp.data<T>(), out.data<T>(), bounds[0], vocab};
    launch_contiguous_rows("adaptive_log_prob", head_op, rows, width);
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const TailLogProbOp<T> tail_op{tails[i].data<T>(), head_lp.data<T>(), out.data<T>(),
                                     width,              bounds[0] + static_cast<std::int64_t>(i),
                                     bounds[i],          vocab};
      launch_contiguous_rows("adaptive_log_prob", tail_op, rows, tails[i].size(1));
    }
  });
}

void adaptive_log_prob_backward(const Tensor& out, const Tensor& head_lp, const Tensor& grad_out,
                                const std::vector<std::int64_t>& bounds, const std::vector<Tensor>& grad_tails,
                                const Tensor& grad_head_lp) {
  const std::int64_t rows = head_lp.size(0), width = head_lp.size(1), vocab = bounds.back();
  const char* op = "adaptive_log_prob_backward";
  DEFINE_DISPATCH_FLOAT(out.dtype(), op, [&] {
    using T = scalar_t;
    launch_checked(op, copy_shortlist_kernel<T>, grid_for(rows * bounds[0]), kBlockSize, 0, grad_out.data<T>(),
                   grad_head_lp.data<T>(), rows, bounds[0], width, vocab);
    for (std::size_t i = 0; i < grad_tails.size(); ++i) {
      const TailLogProbBackwardOp<T> tail_op{out.data<T>(),        head_lp.data<T>(), grad_out.data<T>(),
                                             grad_tails[i].data<T>(), grad_head_lp.data<T>(), width,
                                             bounds[0] + static_cast<std::int64_t>(i), bounds[i], vocab,
                                             grad_tails[i].size(1)};
      launch_rows(op, tail_op, rows, grad_tails[i].size(1));
    }
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
