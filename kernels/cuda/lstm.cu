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
// float (expf-based sigmoid, tanhf), float64 in double.
//   forward:  pre-activations (+ b_ih + b_hh) -> activated gates written back in place, c_t, h_t;
//   backward: dy + dh, dc_t, the activated gates, c_{t-1} and c_t -> dgates (pre-activation
//             gradients), dc_{t-1} in place of dc. tanh(c_t) is recomputed, not stored.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/matmul.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

template <typename T>
__device__ __forceinline__ T dev_sigmoid(T v) {
  return T(1) / (T(1) + dev_exp(-v));
}

// b_ih[k] + b_hh[k], absent biases counting as 0.
template <typename T>
__device__ __forceinline__ T bias_at(const T* __restrict__ b_ih, const T* __restrict__ b_hh, std::int64_t k) {
  return (b_ih ? b_ih[k] : T(0)) + (b_hh ? b_hh[k] : T(0));
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    lstm_cell_forward_kernel(T* __restrict__ gates, const T* __restrict__ b_ih, const T* __restrict__ b_hh,
                             const T* __restrict__ c_prev, T* __restrict__ c, T* __restrict__ h, std::int64_t n,
                             std::int64_t hidden) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < n; u += step) {
    const std::int64_t b = u / hidden, j = u - b * hidden;
    T* row = gates + b * 4 * hidden;
    const T in = dev_sigmoid(row[j] + bias_at(b_ih, b_hh, j));
    const T forget = dev_sigmoid(row[hidden + j] + bias_at(b_ih, b_hh, hidden + j));
    const T cand = dev_tanh(row[2 * hidden + j] + bias_at(b_ih, b_hh, 2 * hidden + j));
    const T out = dev_sigmoid(row[3 * hidden + j] + bias_at(b_ih, b_hh, 3 * hidden + j));
    const T cell = forget * c_prev[u] + in * cand;
    row[j] = in;
    row[hidden + j] = forget;
    row[2 * hidden + j] = cand;
    row[3 * hidden + j] = out;
    c[u] = cell;
    h[u] = out * dev_tanh(cell);
  }
}

// The formulas of kernels/ref/lstm.cpp: dct = dc + (dy + dh) * o * (1 - tanh(c)^2), then the gate
// gradients through sigmoid' = a (1 - a) and tanh' = 1 - a^2, and dc_{t-1} = dct * f.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    lstm_cell_backward_kernel(const T* __restrict__ dy, const T* __restrict__ dh, T* __restrict__ dc,
                              const T* __restrict__ gates, const T* __restrict__ c_prev, const T* __restrict__ c,
                              T* __restrict__ dgates, std::int64_t n, std::int64_t hidden) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < n; u += step) {
    const std::int64_t b = u / hidden, j = u - b * hidden;
    const T* a = gates + b * 4 * hidden;
    const T in = a[j], forget = a[hidden + j], cand = a[2 * hidden + j], out = a[3 * hidden + j];
    const T tc = dev_tanh(c[u]);
    const T dht = dy[u] + dh[u];
    const T dct = dc[u] + dht * out * (T(1) - tc * tc);
    T* dg = dgates + b * 4 * hidden;
    dg[j] = dct * cand * in * (T(1) - in);
    dg[hidden + j] = dct * c_prev[u] * forget * (T(1) - forget);
    dg[2 * hidden + j] = dct * in * (T(1) - cand * cand);
    dg[3 * hidden + j] = dht * tc * out * (T(1) - out);
    dc[u] = dct * forget;
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
  const std::int64_t n = c.numel(), hidden = c.shape()[1];
  DEFINE_DISPATCH_FLOAT(gates.dtype(), "lstm_cell_forward", [&] {
    launch_checked("lstm_cell_forward", lstm_cell_forward_kernel<scalar_t>, grid_for(n), kBlockSize, 0,
                   gates.data<scalar_t>(), data_or_null<scalar_t>(b_ih), data_or_null<scalar_t>(b_hh),
                   c_prev.data<scalar_t>(), c.data<scalar_t>(), h.data<scalar_t>(), n, hidden);
  });
}

// One backward cell step: dy, dh, dc, c_prev, c [B, H]; gates, dgates [B, 4H].
void cell_backward(const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& gates, const Tensor& c_prev,
                   const Tensor& c, const Tensor& dgates) {
  const std::int64_t n = c.numel(), hidden = c.shape()[1];
  DEFINE_DISPATCH_FLOAT(gates.dtype(), "lstm_cell_backward", [&] {
    launch_checked("lstm_cell_backward", lstm_cell_backward_kernel<scalar_t>, grid_for(n), kBlockSize, 0,
                   dy.data<scalar_t>(), dh.data<scalar_t>(), dc.data<scalar_t>(), gates.data<scalar_t>(),
                   c_prev.data<scalar_t>(), c.data<scalar_t>(), dgates.data<scalar_t>(), n, hidden);
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
