// 16-bit tensors in ops that have no 16-bit kernel on a backend. Such an op reads its 16-bit
// inputs exactly widened, computes in the backend's compute type and rounds its 16-bit outputs
// once: float64 on the reference backend (the oracle of every 16-bit kernel: exact upcast, float64
// compute, one rounding), float32 on the fast CPU path and the GPUs. Outputs that are statistics
// (layer norm's mean and rstd, a loss, log-sum-exp rows) stay float32, as the mixed-precision
// policy keeps them (train/precision.h).
//
// Where a backend has its own 16-bit kernel the entry point calls it directly: on the GPUs and the
// emulator the elementwise family, copies and casts, GEMMs (cublasGemmEx with float accumulation,
// or the tiled kernel widening as it loads), dropout, the index family (gather, index_select,
// scatter_add, index_add, concat), split-mix / channel shuffle, grouped linear, and scaled
// dot-product attention's GEMMs (its row kernel widened alone); on the CPU paths copies, the index
// family and split-mix, and on the reference the elementwise family too. Every other op (layer
// norm, softmax and the losses, relative attention, the LSTM layer, the adaptive softmax,
// embedding, reductions) goes through the widening here: correct
// to the format, at the cost of a cast kernel on each side. The op harness checks both kinds
// against the reference in modes emu-f16 and emu-bf16 (tests/harness/op_harness.h).
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace define::kernels {

// Whether any defined tensor of ts is float16 or bfloat16.
bool any_float16(std::initializer_list<Tensor> ts);
// Whether t's backend has the GPUs' 16-bit kernels (CUDA and the emulator); the CPU paths widen.
bool has_float16_kernels(const Tensor& t);
// Whether an op whose 16-bit kernels take x as it is may run them: x is 16-bit on such a backend,
// the defined tensors of `same` share x's dtype, and those of `same_or_float32` (master weights,
// a float cell state) are all x's dtype or all float32.
bool takes_float16(const Tensor& x, std::initializer_list<Tensor> same, std::initializer_list<Tensor> same_or_float32);
// The dtype an op without a 16-bit kernel computes in on like's backend.
DType float16_compute_dtype(const Tensor& like);
// t in that compute dtype when it is a floating tensor (undefined and integer tensors pass).
Tensor widen(const Tensor& t, const Tensor& like);
// t rounded once to dtype (t itself when it has that dtype already; undefined passes).
Tensor narrow(const Tensor& t, DType dtype);
// The float type a 16-bit op keeps its statistics in: float32, or float64 when the op's inputs
// were float64 to begin with.
DType statistics_dtype(DType input);

}  // namespace define::kernels
