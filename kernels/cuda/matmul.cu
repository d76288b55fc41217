// CUDA GEMM family: out = alpha * op(a) @ op(b) + beta * out, batch dims broadcast (entry point and
// argument checks: kernels/matmul.cpp; semantics: kernels/ref/matmul.cpp; tests: the [matmul] op
// cases in mode emu, tests/cuda/matmul_kernels_test.cpp).
//
// Two implementations:
//   * tiled: our own shared-memory kernel (gemm_tiled_kernel, float and double). A block of 256
//     threads computes a 64x64 tile of out, stepping through k in slices of 16: each slice of op(a)
//     and op(b) is staged in shared memory, and each thread accumulates a 4x4 micro-tile in
//     registers. Operands are read through their row/column strides, so transposed and otherwise
//     strided views (any strides, broadcast stride 0 included) need no copy, and partial tiles at
//     the m, n and k edges are zero-padded on load and masked on store. blockIdx.z walks the batch.
//     Every output is one thread's sum in a fixed k order: results are deterministic, the same for
//     any block order or thread schedule.
//   * cublas: cublasSgemm/cublasDgemm, or their StridedBatched forms when every operand's batch
//     offsets are a multiple of the batch index, else one StridedBatched call per run of the
//     longest batch dim (attention's [B, H] batch of a [B, T, H, d] tensor: one per head). cuBLAS is
//     column-major; a row-major out is computed as out^T = op(b)^T op(a)^T, which only flips the
//     operations. An operand with neither a unit row nor a unit column stride (or a leading
//     dimension cuBLAS refuses) is first made contiguous; such an out is computed into a contiguous
//     scratch and copied back. Under nvcc this is libcublas; in the emulator build the same code
//     calls the emulated cuBLAS (cuda_emu/emu_cublas.hpp: the same entry points over a host
//     reference GEMM, refusing what cuBLAS refuses), so the mapping is tested without a GPU.
//
// Selection (kernels/cuda/matmul_config.h): by default tensors on a GPU use cuBLAS and tensors on
// the emulated device the tiled kernels; DEFINE_CUDA_GEMM=cublas|tiled or set_cuda_gemm() selects
// one for both. The tiled kernels also serve the cases cuBLAS's int arguments cannot describe (a
// dim, leading dimension or batch count above INT_MAX) and k == 0.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#include <cublas_v2.h>
#else
#include "cuda_emu/emu_cublas.hpp"
#endif

#include "core/dtype.h"
#include "core/error.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/matmul.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/current_device_guard.h"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/tile_gemm.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// ---------------------------------------------------------------------------------------------
// Tiled kernel (tile geometry, slice loading and k loop: kernels/cuda/tile_gemm.cuh).

// Where matrix `batch` of each operand starts: batch * stride when every operand's offsets are
// uniform, else row `batch` of a device table of {a, b, out} offsets.
struct BatchOffsets {
  const std::int64_t* table = nullptr;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

template <typename T>
struct TiledGemmArgs {
  const T* a = nullptr;
  const T* b = nullptr;
  T* c = nullptr;
  std::int64_t m = 0, n = 0, k = 0, batch_count = 0;
  // op(a) is m x k, op(b) k x n, out m x n: element (i, j) at i * row + j * col.
  std::int64_t a_row = 0, a_col = 0, b_row = 0, b_col = 0, c_row = 0, c_col = 0;
  BatchOffsets batch;
  compute_t<T> alpha = 0, beta = 0;
  // Load order of each slice: k fastest when consecutive k are adjacent in memory, so a warp's
  // loads coalesce for row-major op(a) and column-major op(b); the tile dim fastest otherwise.
  bool a_k_fastest = false, b_k_fastest = false;
};

// Slices of strided operands: consecutive lanes of a warp take consecutive k when k_fastest
// (coalesced when stride_k is 1), otherwise consecutive t; which one is known only at run time.
struct RunTimeSteps {
  int t_step = 0, kk_step = 0;
};
using StridedSliceLoader = SliceLoader<RunTimeSteps>;

// The loader of an operand whose element (t, kk) of the slice starting at k0 lies at
// (t0 + t) * stride_t + (k0 + kk) * stride_k, for t < extent_t - t0 (any strides, 0 included).
__device__ __forceinline__ StridedSliceLoader make_slice_loader(std::int64_t extent_t, std::int64_t t0,
                                                                std::int64_t stride_t, std::int64_t stride_k,
                                                                bool k_fastest) {
  const int tid = static_cast<int>(threadIdx.x);
  StridedSliceLoader l;
  l.t = k_fastest ? tid / kTileK : tid % kTile;
  l.kk = k_fastest ? tid % kTileK : tid / kTile;
  l.t_step = k_fastest ? kGemmThreads / kTileK : 0;
  l.kk_step = k_fastest ? 0 : kGemmThreads / kTile;
  l.offset = (t0 + l.t) * stride_t + l.kk * stride_k;
  l.r_stride = l.t_step * stride_t + l.kk_step * stride_k;
  l.slice_step = kTileK * stride_k;
  l.t_inside = tile_extent(extent_t, t0);
  return l;
}

// One 64x64 tile of out at (row0, col0) for matrices a, b, c of one batch entry (thread layout:
// tile_gemm.cuh), scaled by alpha and added to beta * out. Called by every thread of the block
// (it contains barriers).
template <typename T, typename C = compute_t<T>>
__device__ __forceinline__ void gemm_tile(const TiledGemmArgs<T>& p, const T* __restrict__ a,
                                          const T* __restrict__ b, T* c, std::int64_t row0, std::int64_t col0,
                                          SliceTile<C>& a_tile, SliceTile<C>& b_tile) {
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerDim;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerDim;
  const MicroTile<C> acc =
      multiply_tile(p.k, a, make_slice_loader(p.m, row0, p.a_row, p.a_col, p.a_k_fastest), b,
                    make_slice_loader(p.n, col0, p.b_col, p.b_row, p.b_k_fastest), a_tile, b_tile, tx, ty);

#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const std::int64_t row = row0 + ty + i * kThreadsPerDim;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const std::int64_t col = col0 + tx + j * kThreadsPerDim;
      if (row < p.m && col < p.n) {
        T& dst = c[row * p.c_row + col * p.c_col];
        // beta == 0 must not read out: it may hold garbage or NaN.
        dst = store_value<T>(p.beta == C(0) ? p.alpha * acc.sum[i][j]
                                            : p.alpha * acc.sum[i][j] + p.beta * load_value(dst));
      }
    }
  }
}

// Grid: x = row tiles, y = column tiles, z = batch entries; y and z loop when their counts exceed
// the grid limit. The loops are block-uniform, so the barriers inside gemm_tile are too.
// At least 2 blocks per SM caps registers at 128: left free, ptxas spends more on hoisting the
// unrolled k loop's shared loads (and spilled on sm_80/90 with 256 threads alone as the bound).
template <typename T>
__global__ void __launch_bounds__(kGemmThreads, 2) gemm_tiled_kernel(TiledGemmArgs<T> p) {
  EMU_CHECK_LAUNCH_BOUNDS(kGemmThreads, 2);
  EMU_STATIC_SHARED(a_tile, SliceTile<compute_t<T>>);
  EMU_STATIC_SHARED(b_tile, SliceTile<compute_t<T>>);
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t batch = blockIdx.z; batch < p.batch_count; batch += gridDim.z) {
    std::int64_t off_a = batch * p.batch.stride_a, off_b = batch * p.batch.stride_b, off_c = batch * p.batch.stride_c;
    if (p.batch.table != nullptr) {
      off_a = p.batch.table[3 * batch];
      off_b = p.batch.table[3 * batch + 1];
      off_c = p.batch.table[3 * batch + 2];
    }
    for (std::int64_t col0 = static_cast<std::int64_t>(blockIdx.y) * kTile; col0 < p.n;
         col0 += static_cast<std::int64_t>(gridDim.y) * kTile)
      gemm_tile(p, p.a + off_a, p.b + off_b, p.c + off_c, row0, col0, a_tile, b_tile);
  }
}

// True (and the stride) when offsets[i] == i * stride for every batch entry i.
bool uniform_batch_stride(const std::vector<std::int64_t>& offsets, std::int64_t& stride) {
  stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (std::size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] != static_cast<std::int64_t>(i) * stride) return false;
  return true;
}

// A batch that is strided along one of its dims: for the batch shape `batch`, dim `dim` steps every
// operand's offset by a fixed stride (strides[k] for operand k), so each run of that dim is one
// StridedBatched call. Attention's [B, H, T, d] views of a [B, T, H, d] tensor are such a batch
// (uniform along B and along H, not over the flattened B*H index): one call per head instead of
// one GEMM per (sentence, head), which had made a Transformer training step launch-bound on a GPU.
struct StridedBatchDim {
  std::int64_t size = 0;   // the dim's extent: the batch count of each call
  std::int64_t step = 0;   // flattened batch positions between neighbours along the dim
  std::int64_t strides[3] = {0, 0, 0};
};

// The longest dim of `batch` (of size >= 2) along which all of `offsets` are strided; size 0 when none is.
StridedBatchDim strided_batch_dim(const Shape& batch, const std::vector<std::int64_t>* const (&offsets)[3]) {
  StridedBatchDim best;
  std::int64_t step = 1;
  for (std::size_t d = batch.size(); d-- > 0; step *= batch[d]) {
    const std::int64_t size = batch[d];
    if (size <= best.size || size < 2) continue;
    StridedBatchDim candidate{size, step, {0, 0, 0}};
    bool strided = true;
    for (int k = 0; k < 3 && strided; ++k) {
      const std::vector<std::int64_t>& o = *offsets[k];
      candidate.strides[k] = o[static_cast<std::size_t>(step)] - o[0];
      for (std::size_t i = 0; i < o.size() && strided; ++i)
        if ((static_cast<std::int64_t>(i) / step) % size != 0)
          strided = o[i] - o[i - static_cast<std::size_t>(step)] == candidate.strides[k];
    }
    if (strided) best = candidate;
  }
  return best;
}

// The tiled GEMM on a, b, out with the batch layout ma, mb, mc (from batched_matrix).
template <typename T>
void gemm_tiled(const Tensor& a, const Tensor& b, const Tensor& out, const BatchedMatrix& ma,
                const BatchedMatrix& mb, const BatchedMatrix& mc, double alpha, double beta) {
  TiledGemmArgs<T> p;
  p.a = a.data<T>();
  p.b = b.data<T>();
  p.c = out.data<T>();
  p.m = mc.rows;
  p.n = mc.cols;
  p.k = ma.cols;
  p.batch_count = static_cast<std::int64_t>(mc.batch_offsets.size());
  p.a_row = ma.row_stride;
  p.a_col = ma.col_stride;
  p.b_row = mb.row_stride;
  p.b_col = mb.col_stride;
  p.c_row = mc.row_stride;
  p.c_col = mc.col_stride;
  p.alpha = static_cast<compute_t<T>>(alpha);
  p.beta = static_cast<compute_t<T>>(beta);
  p.a_k_fastest = ma.col_stride == 1;
  p.b_k_fastest = mb.row_stride == 1 && mb.col_stride != 1;

  // Broadcast batch dims can give offsets that no single stride describes (a [2,1,..] against
  // b [3,..]): those go to the kernel as a small table in device memory. Freeing it right after the
  // launch is safe: the allocator reuses memory in stream order, and all work is on one stream.
  Tensor table;
  const bool uniform = uniform_batch_stride(ma.batch_offsets, p.batch.stride_a) &&
                       uniform_batch_stride(mb.batch_offsets, p.batch.stride_b) &&
                       uniform_batch_stride(mc.batch_offsets, p.batch.stride_c);
  if (!uniform) {
    std::vector<std::int64_t> host(static_cast<std::size_t>(3 * p.batch_count));
    for (std::size_t i = 0; i < mc.batch_offsets.size(); ++i) {
      host[3 * i] = ma.batch_offsets[i];
      host[3 * i + 1] = mb.batch_offsets[i];
      host[3 * i + 2] = mc.batch_offsets[i];
    }
    table = from_vector<std::int64_t>(host, {p.batch_count, 3}, out.device());
    p.batch = BatchOffsets{table.data<std::int64_t>(), 0, 0, 0};
  }

  launch_checked("gemm", gemm_tiled_kernel<T>, tile_grid(p.m, p.n, p.batch_count), dim3(kGemmThreads), 0, p);
}

// ---------------------------------------------------------------------------------------------
// cuBLAS: libcublas under nvcc, the emulated one (cuda_emu/emu_cublas.hpp) in the emulator build.

void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
#if defined(__CUDACC__)
  fail("gemm", "{} failed: {} ({})", call, cublasGetStatusName(status), cublasGetStatusString(status));
#else
  // The emulator also knows which argument was wrong, which cuBLAS's status cannot say.
  fail("gemm", "{} failed: {} ({}): {}", call, cublasGetStatusName(status), cublasGetStatusString(status),
       ::cuda_emu::cublas_last_problem());
#endif
}

// One handle per device, created on first use (bound to the device current then) and never
// destroyed: destroying handles from static destructors races the driver's own shutdown.
cublasHandle_t cublas_handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::vector<cublasHandle_t>();
  const std::lock_guard<std::mutex> lock(mutex);
  if (handles->size() <= static_cast<std::size_t>(device)) handles->resize(static_cast<std::size_t>(device) + 1, nullptr);
  cublasHandle_t& handle = (*handles)[static_cast<std::size_t>(device)];
  if (handle == nullptr) {
    check_cublas(cublasCreate(&handle), "cublasCreate");
    // Plain FP32/FP64 arithmetic: no TF32 tensor-core shortcut, whose 10-bit mantissa products
    // would be far outside the tolerance the reference comparisons (and users) expect.
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  return handle;
}

using ::define::DEFINE_CUDA_NS::CurrentDeviceGuard;  // kernels/cuda/current_device_guard.h

// How cuBLAS (column-major) can read a strided matrix M (rows x cols): as itself (OP_N) when its
// rows are unit-stride, as the transpose of what it stores (OP_T) when its columns are, each with a
// leading dimension covering the stored column. Size-1 dims may carry any stride.
struct CublasView {
  bool usable = false;
  cublasOperation_t op = CUBLAS_OP_N;
  std::int64_t ld = 1;
};

CublasView cublas_view(const BatchedMatrix& m) {
  if (m.row_stride == 1 || m.rows == 1) {
    const std::int64_t ld = m.cols == 1 ? m.rows : m.col_stride;
    if (ld >= std::max<std::int64_t>(1, m.rows)) return {true, CUBLAS_OP_N, ld};
  }
  if (m.col_stride == 1 || m.cols == 1) {
    const std::int64_t ld = m.rows == 1 ? m.cols : m.row_stride;
    if (ld >= std::max<std::int64_t>(1, m.cols)) return {true, CUBLAS_OP_T, ld};
  }
  return {};
}

cublasOperation_t flipped(cublasOperation_t op) { return op == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N; }

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

// Typed entry points, so the plan below is written once for float and double.
cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                           float* c, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double* alpha, const double* a, int lda, const double* b, int ldb,
                           const double* beta, double* c, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t cublas_gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                   int k, const float* alpha, const float* a, int lda, long long stride_a,
                                   const float* b, int ldb, long long stride_b, const float* beta, float* c, int ldc,
                                   long long stride_c, int count) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                   stride_c, count);
}
cublasStatus_t cublas_gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                   int k, const double* alpha, const double* a, int lda, long long stride_a,
                                   const double* b, int ldb, long long stride_b, const double* beta, double* c,
                                   int ldc, long long stride_c, int count) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                   stride_c, count);
}

// 16-bit operands: cublasGemmEx with float accumulation (CUBLAS_COMPUTE_32F; alpha and beta are
// floats), so tensor cores run where the GPU has them, and the result is rounded once.
template <typename T>
constexpr cudaDataType_t cuda_data_type() {
  if constexpr (std::is_same_v<T, Half>) return CUDA_R_16F;
  else return CUDA_R_16BF;
}
template <typename T, std::enable_if_t<is_float16_v<T>, int> = 0>
cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float* alpha, const T* a, int lda, const T* b, int ldb, const float* beta, T* c,
                           int ldc) {
  return cublasGemmEx(h, ta, tb, m, n, k, alpha, a, cuda_data_type<T>(), lda, b, cuda_data_type<T>(), ldb, beta, c,
                      cuda_data_type<T>(), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
template <typename T, std::enable_if_t<is_float16_v<T>, int> = 0>
cublasStatus_t cublas_gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                   int k, const float* alpha, const T* a, int lda, long long stride_a, const T* b,
                                   int ldb, long long stride_b, const float* beta, T* c, int ldc, long long stride_c,
                                   int count) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, a, cuda_data_type<T>(), lda, stride_a, b,
                                    cuda_data_type<T>(), ldb, stride_b, beta, c, cuda_data_type<T>(), ldc, stride_c,
                                    count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// One cuBLAS operand: pointer to batch entry 0, operation, leading dimension, batch offsets.
template <typename T>
struct CublasOperand {
  const T* data;
  cublasOperation_t op;
  std::int64_t ld;
  const std::vector<std::int64_t>* offsets;
};

// a, b, c are cuBLAS-readable (cublas_view usable for each). Computes c = alpha op(a) op(b) + beta c.
template <typename T>
void run_cublas(const Tensor& a, const Tensor& b, const Tensor& c, bool trans_a, bool trans_b, double alpha,
                double beta, const Shape& batch) {
  const BatchedMatrix ma = batched_matrix(a, trans_a, batch);
  const BatchedMatrix mb = batched_matrix(b, trans_b, batch);
  const BatchedMatrix mc = batched_matrix(c, false, batch);
  const CublasView va = cublas_view(ma), vb = cublas_view(mb), vc = cublas_view(mc);
  const auto count = static_cast<std::int64_t>(mc.batch_offsets.size());
  if (!(fits_int(mc.rows) && fits_int(mc.cols) && fits_int(ma.cols) && fits_int(va.ld) && fits_int(vb.ld) &&
        fits_int(vc.ld) && fits_int(count))) {
    gemm_tiled<T>(a, b, c, ma, mb, mc, alpha, beta);  // beyond cuBLAS's int arguments
    return;
  }

  // cuBLAS writes a column-major result. For a row-major c its storage holds c^T, computed as
  // op(b)^T op(a)^T: the operands swap and each operation flips (M^T reads M's storage with the
  // opposite operation and the same leading dimension).
  const bool c_col_major = vc.op == CUBLAS_OP_N;
  const CublasOperand<T> opa{a.data<T>(), va.op, va.ld, &ma.batch_offsets};
  const CublasOperand<T> opb{b.data<T>(), vb.op, vb.ld, &mb.batch_offsets};
  CublasOperand<T> first = c_col_major ? opa : opb;
  CublasOperand<T> second = c_col_major ? opb : opa;
  if (!c_col_major) {
    first.op = flipped(first.op);
    second.op = flipped(second.op);
  }
  const int rows = static_cast<int>(c_col_major ? mc.rows : mc.cols);
  const int cols = static_cast<int>(c_col_major ? mc.cols : mc.rows);
  const int k = static_cast<int>(ma.cols);
  const int ld1 = static_cast<int>(first.ld), ld2 = static_cast<int>(second.ld), ldc = static_cast<int>(vc.ld);
  const compute_t<T> alpha_t = static_cast<compute_t<T>>(alpha), beta_t = static_cast<compute_t<T>>(beta);
  T* pc = c.data<T>();
  cublasHandle_t handle = cublas_handle(c.device().index);

  std::int64_t stride1 = 0, stride2 = 0, stride_c = 0;
  const bool uniform = uniform_batch_stride(*first.offsets, stride1) &&
                       uniform_batch_stride(*second.offsets, stride2) &&
                       uniform_batch_stride(mc.batch_offsets, stride_c);
  if (count == 1) {
    check_cublas(cublas_gemm(handle, first.op, second.op, rows, cols, k, &alpha_t, first.data, ld1, second.data, ld2,
                             &beta_t, pc, ldc),
                 "cublas<t>gemm");
    return;
  }
  if (uniform) {
    check_cublas(cublas_gemm_strided(handle, first.op, second.op, rows, cols, k, &alpha_t, first.data, ld1, stride1,
                                     second.data, ld2, stride2, &beta_t, pc, ldc, stride_c, static_cast<int>(count)),
                 "cublas<t>gemmStridedBatched");
    return;
  }
  // Offsets come from strides, so every batch dim is strided for every operand and some dim of
  // size >= 2 exists (count > 1): one StridedBatched call per run of the longest.
  const std::vector<std::int64_t>* const offsets[3] = {first.offsets, second.offsets, &mc.batch_offsets};
  const StridedBatchDim dim = strided_batch_dim(batch, offsets);
  if (dim.size == 0)
    fail("gemm", "internal: batch offsets of shape {} are not strided along any dim", shape_str(batch));
  for (std::int64_t i = 0; i < count; ++i) {
    if ((i / dim.step) % dim.size != 0) continue;
    const auto at = static_cast<std::size_t>(i);
    check_cublas(cublas_gemm_strided(handle, first.op, second.op, rows, cols, k, &alpha_t,
                                     first.data + (*first.offsets)[at], ld1, dim.strides[0],
                                     second.data + (*second.offsets)[at], ld2, dim.strides[1], &beta_t,
                                     pc + mc.batch_offsets[at], ldc, dim.strides[2], static_cast<int>(dim.size)),
                 "cublas<t>gemmStridedBatched");
  }
}

// t itself when cuBLAS can read op(t), else a contiguous copy (which it always can).
Tensor cublas_readable(const Tensor& t, bool trans, const Shape& batch) {
  return cublas_view(batched_matrix(t, trans, batch)).usable ? t : kernels::contiguous(t);
}

template <typename T>
void gemm_cublas(const Tensor& a_in, const Tensor& b_in, const Tensor& out, bool trans_a, bool trans_b, double alpha,
                 double beta, const Shape& batch) {
  const Tensor a = cublas_readable(a_in, trans_a, batch);
  const Tensor b = cublas_readable(b_in, trans_b, batch);
  if (cublas_view(batched_matrix(out, false, batch)).usable) {
    run_cublas<T>(a, b, out, trans_a, trans_b, alpha, beta, batch);
    return;
  }
  // A scratch result, holding out's values only when beta reads them.
  const Tensor c = beta == 0.0 ? empty_like(out) : kernels::cast(out, out.dtype());
  run_cublas<T>(a, b, c, trans_a, trans_b, alpha, beta, batch);
  kernels::copy_into(out, c);
}

template <typename T>
void gemm_typed(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha,
                double beta) {
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const CurrentDeviceGuard device(out.device().index);
  // k == 0 (out = beta * out) goes to the tiled kernel: nothing to multiply, and cuBLAS's
  // leading-dimension rules for empty operands are not worth the special cases.
  if (cuda_gemm_in_effect(out.device().is_emu()) == CudaGemm::Cublas && a.shape()[a.dim() - (trans_a ? 2 : 1)] > 0) {
    gemm_cublas<T>(a, b, out, trans_a, trans_b, alpha, beta, batch);
    return;
  }
  gemm_tiled<T>(a, b, out, batched_matrix(a, trans_a, batch), batched_matrix(b, trans_b, batch),
                batched_matrix(out, false, batch), alpha, beta);
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha, double beta) {
  DEFINE_DISPATCH_FLOATING(out.dtype(), "gemm",
                           [&] { gemm_typed<scalar_t>(a, b, out, trans_a, trans_b, alpha, beta); });
}

}  // namespace define::kernels::DEFINE_CUDA_NS

#if !defined(__CUDACC__)
// The selection switch (kernels/cuda/matmul_config.h) is host code shared by both backends, so it is
// defined once, in the emulator build that every configuration compiles.
namespace define::kernels {
namespace {

// -1 until the first read: then DEFINE_CUDA_GEMM's choice, or set_cuda_gemm's.
std::atomic<int> g_cuda_gemm{-1};

}  // namespace

CudaGemm parse_cuda_gemm(const std::string& name) {
  if (name == "cublas") return CudaGemm::Cublas;
  if (name == "tiled") return CudaGemm::Tiled;
  fail("DEFINE_CUDA_GEMM", "unknown GEMM implementation '{}' (expected cublas or tiled)", name);
}

const char* cuda_gemm_name(CudaGemm which) {
  switch (which) {
    case CudaGemm::Cublas: return "cublas";
    case CudaGemm::Tiled: return "tiled";
    case CudaGemm::Default: break;
  }
  return "default";
}

CudaGemm cuda_gemm() {
  int v = g_cuda_gemm.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("DEFINE_CUDA_GEMM");
    const CudaGemm from_env = (env == nullptr || *env == '\0') ? CudaGemm::Default : parse_cuda_gemm(env);
    int expected = -1;
    // A concurrent set_cuda_gemm wins over the environment.
    g_cuda_gemm.compare_exchange_strong(expected, static_cast<int>(from_env), std::memory_order_relaxed);
    v = g_cuda_gemm.load(std::memory_order_relaxed);
  }
  return static_cast<CudaGemm>(v);
}

void set_cuda_gemm(CudaGemm which) { g_cuda_gemm.store(static_cast<int>(which), std::memory_order_relaxed); }

CudaGemm cuda_gemm_in_effect(bool emulated) {
  const CudaGemm which = cuda_gemm();
  if (which != CudaGemm::Default) return which;
  return emulated ? CudaGemm::Tiled : CudaGemm::Cublas;
}

}  // namespace define::kernels
#endif
