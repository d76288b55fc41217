// CUDA LSTM recurrence: all T steps of the fused LSTM layer (kernels/lstm.h) after the input
// projection, forward and backward. The host wrappers run the step loop: per step one GEMM through
// kernels::gemm (cuBLAS on a GPU, the tiled kernel on the emulated device) on views of the
// contiguous buffers the entry point kernels/lstm.cpp allocated (gates [T, B, 4H] in PyTorch's
// i, f, g, o order, states [T+1, B, H]), and one fused cell kernel. Semantics: kernels/ref/lstm.cpp;
// tests: the [lstm] op cases in mode emu, tests/cuda/lstm_kernels_test.cpp.
//
// The two cell kernels are one grid-stride launch of kBlockSize threads with one hidden unit (b, j) per
// thread and step: a thread reads the four gate values of its unit (columns j, H + j, 2H + j,
// 3H + j of row b), so consecutive threads read consecutive addresses in each of the four blocks
// and write consecutive c, h (coalesced). Everything the unit needs is in registers: no shared
// memory, no barriers, no atomics, so results do not depend on the schedule. float32 computes in
// float (expf-based sigmoid, tanhf), float64 in double. Mixed precision: 16-bit gates, biases and
// h (type T) are read and written in their format and computed in float, and the cell state c and
// its gradient (type S) are float32 when the layer's c0 is (autocast keeps it so), else T.
//   forward:  pre-activations (+ b_ih + b_hh) -> activated gates written back in place, c_t, h_t;
//   backward: dy + dh, dc_t, the activated gates, c_{t-1} and c_t -> dgates (pre-activation
//             gradients), dc_{t-1} in place of dc. tanh(c_t) is recomputed, not stored.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/matmul.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

template <typename T>
__device__ __forceinline__ T dev_sigmoid(T v) {
  return T(1) / (T(1) + dev_exp(-v));
}

// b_ih[k] + b_hh[k] in the compute type, absent biases counting as 0.
template <typename T>
__device__ __forceinline__ compute_t<T> bias_at(const T* __restrict__ b_ih, const T* __restrict__ b_hh,
                                                std::int64_t k) {
  using C = compute_t<T>;
  return (b_ih ? load_value(b_ih[k]) : C(0)) + (b_hh ? load_value(b_hh[k]) : C(0));
}

template <typename T, typename S>
__global__ void __launch_bounds__(kBlockSize)
    lstm_cell_forward_kernel(T* __restrict__ gates, const T* __restrict__ b_ih, const T* __restrict__ b_hh,
                             const S* __restrict__ c_prev, S* __restrict__ c, T* __restrict__ h, std::int64_t n,
                             std::int64_t hidden) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  using C = compute_t<T>;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < n; u += step) {
    const std::int64_t b = u / hidden, j = u - b * hidden;
    T* row = gates + b * 4 * hidden;
    auto pre = [&](std::int64_t k) -> C { return load_value(row[k]) + bias_at(b_ih, b_hh, k); };
    const C in = dev_sigmoid(pre(j));
    const C forget = dev_sigmoid(pre(hidden + j));
    const C cand = dev_tanh(pre(2 * hidden + j));
    const C out = dev_sigmoid(pre(3 * hidden + j));
    const C cell = forget * static_cast<C>(load_value(c_prev[u])) + in * cand;
    row[j] = store_value<T>(in);
    row[hidden + j] = store_value<T>(forget);
    row[2 * hidden + j] = store_value<T>(cand);
    row[3 * hidden + j] = store_value<T>(out);
    c[u] = store_value<S>(cell);
    h[u] = store_value<T>(out * dev_tanh(cell));
  }
}

// The formulas of kernels/ref/lstm.cpp: dct = dc + (dy + dh) * o * (1 - tanh(c)^2), then the gate
// gradients through sigmoid' = a (1 - a) and tanh' = 1 - a^2, and dc_{t-1} = dct * f.
template <typename T, typename S>
__global__ void __launch_bounds__(kBlockSize)
    lstm_cell_backward_kernel(const T* __restrict__ dy, const T* __restrict__ dh, S* __restrict__ dc,
                              const T* __restrict__ gates, const S* __restrict__ c_prev, const S* __restrict__ c,
                              T* __restrict__ dgates, std::int64_t n, std::int64_t hidden) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  using C = compute_t<T>;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < n; u += step) {
    const std::int64_t b = u / hidden, j = u - b * hidden;
    const T* a = gates + b * 4 * hidden;
    const C in = load_value(a[j]), forget = load_value(a[hidden + j]), cand = load_value(a[2 * hidden + j]),
            out = load_value(a[3 * hidden + j]);
    const C tc = dev_tanh(static_cast<C>(load_value(c[u])));
    const C dht = load_value(dy[u]) + load_value(dh[u]);
    const C dct = static_cast<C>(load_value(dc[u])) + dht * out * (C(1) - tc * tc);
    T* dg = dgates + b * 4 * hidden;
    dg[j] = store_value<T>(dct * cand * in * (C(1) - in));
    dg[hidden + j] = store_value<T>(dct * static_cast<C>(load_value(c_prev[u])) * forget * (C(1) - forget));
    dg[2 * hidden + j] = store_value<T>(dct * in * (C(1) - cand * cand));
    dg[3 * hidden + j] = store_value<T>(dht * tc * out * (C(1) - out));
    dc[u] = store_value<S>(dct * forget);
  }
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Step t of a contiguous [steps, rows, width] buffer as a contiguous [rows, width] view.
Tensor step_of(const Tensor& buffer, std::int64_t t) {
  const std::int64_t rows = buffer.shape()[1], width = buffer.shape()[2];
  return buffer.as_strided({rows, width}, {width, 1}, buffer.offset() + t * rows * width);
}

// One forward cell step on [B, 4H] gates and [B, H] states.
void cell_forward(const Tensor& gates, const Tensor& b_ih, const Tensor& b_hh, const Tensor& c_prev, const Tensor& c,
                  const Tensor& h) {
  const char* op = "lstm_cell_forward";
  const std::int64_t n = c.numel(), hidden = c.shape()[1];
  DEFINE_DISPATCH_FLOATING(gates.dtype(), op, [&] {
    using T = scalar_t;
    with_same_or_float32<T>(op, "cell states", c.dtype(), [&](auto s_tag) {
      using S = decltype(s_tag);
      launch_checked(op, lstm_cell_forward_kernel<T, S>, grid_for(n), kBlockSize, 0, gates.data<T>(),
                     data_or_null<T>(b_ih), data_or_null<T>(b_hh), c_prev.data<S>(), c.data<S>(), h.data<T>(), n,
                     hidden);
    });
  });
}

// One backward cell step: dy, dh, dc, c_prev, c [B, H]; gates, dgates [B, 4H].
void cell_backward(const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& gates, const Tensor& c_prev,
                   const Tensor& c, const Tensor& dgates) {
  const char* op = "lstm_cell_backward";
  const std::int64_t n = c.numel(), hidden = c.shape()[1];
  DEFINE_DISPATCH_FLOATING(gates.dtype(), op, [&] {
    using T = scalar_t;
    with_same_or_float32<T>(op, "cell states", c.dtype(), [&](auto s_tag) {
      using S = decltype(s_tag);
      launch_checked(op, lstm_cell_backward_kernel<T, S>, grid_for(n), kBlockSize, 0, dy.data<T>(), dh.data<T>(),
                     dc.data<S>(), gates.data<T>(), c_prev.data<S>(), c.data<S>(), dgates.data<T>(), n, hidden);
    });
  });
}

}  // namespace

// Per step: gates_t += h_{t-1} w_hh^T (GEMM with beta = 1 onto the input projection), then the cell.
void lstm_forward_steps(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs,
                        const Tensor& cs, const Tensor& gates) {
  const std::int64_t steps = gates.shape()[0];
  for (std::int64_t t = 0; t < steps; ++t) {
    const Tensor gates_t = step_of(gates, t);
    ::define::kernels::gemm(step_of(hs, t), w_hh, gates_t, false, true, 1.0, 1.0);
    cell_forward(gates_t, b_ih, b_hh, step_of(cs, t), step_of(cs, t + 1), step_of(hs, t + 1));
  }
}

// Per step in reverse: the cell backward (reading dy_t + dh), then dh = dgates_t w_hh for the step
// before (and for dh0 after step 0 when asked).
void lstm_backward_steps(const Tensor& dy, const Tensor& w_hh, const Tensor& /*hs*/, const Tensor& cs,
                         const Tensor& gates, const Tensor& dh, const Tensor& dc, const Tensor& dgates, bool need_dh0) {
  const std::int64_t steps = gates.shape()[0];
  for (std::int64_t t = steps - 1; t >= 0; --t) {
    const Tensor dgates_t = step_of(dgates, t);
    cell_backward(step_of(dy, t), dh, dc, step_of(gates, t), step_of(cs, t), step_of(cs, t + 1), dgates_t);
    if (t > 0 || need_dh0) ::define::kernels::gemm(dgates_t, w_hh, dh, false, false, 1.0, 0.0);
  }
}

}  // namespace define::kernels::DEFINE_CUDA_NS
