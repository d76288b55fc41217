// CUDA grouped-linear family: the group linear transform of DeFINE/DExTra, forward and backward,
// every group in one launch (entry point and checks: kernels/grouped_linear.cpp, which hands over
// x [T, g*k_in], dy and y [T, g*k_out], weight [g, k_in, k_out], bias [g, k_out], all contiguous;
// semantics: kernels/ref/grouped_linear.cpp; tests: the [grouped_linear] op cases in mode emu and
// tests/cuda/grouped_linear_kernels_test.cpp).
//
// Kernels:
//   * grouped_gemm_kernel: a tiled shared-memory GEMM batched over groups (blockIdx.z = group),
//     out_i = op(a_i) @ op(b_i) (+ bias_i), reading every group's matrices in place through
//     strides: group i of x is columns [i*k_in, (i+1)*k_in) of every row, so no split, concat or
//     transpose is ever materialised. A block of 256 threads computes a 64x64 tile of out_i,
//     stepping through the depth in slices of 16 staged in shared memory (the next slice is
//     prefetched into registers while the current one is used); each thread owns a 4x4 micro-tile.
//     Partial tiles are zero-padded on load and masked on store. One instantiation per use:
//       forward  y_i  = x_i @ w_i + b_i     (m = T,    n = k_out, depth k_in; bias in the epilogue)
//       dx       dx_i = dy_i @ w_i^T        (m = T,    n = k_in,  depth k_out)
//       dweight  dw_i = x_i^T @ dy_i        (m = k_in, n = k_out, depth T)
//     Each output is one thread's sum in a fixed depth order, so all three are deterministic for
//     any block order or thread schedule; dweight in particular reduces over all T rows inside
//     the kernel, without atomics or partial buffers.
//   * column_sum_kernel (dbias): 32 columns per block, 8 threads striding down the rows of each
//     column, their sums (SumAcc, float_sum.cuh) added in a fixed order through shared memory.
//     No atomics.
// Whether an operand's slices load "depth fastest" or "tile index fastest" is a template
// parameter chosen so that a warp's loads are contiguous in memory for every operand.
//
// When cuBLAS serves GEMMs (kernels/cuda/matmul_config.h: by default on a GPU; on the emulated
// device when DEFINE_CUDA_GEMM=cublas / set_cuda_gemm(CudaGemm::Cublas) selects it, which runs the
// emulated cuBLAS) the three GEMMs go to cublas<t>gemmStridedBatched through kernels::gemm, on the
// same strided group views; otherwise to the tiled kernel. dbias always uses column_sum_kernel.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/copy.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/matmul.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float_sum.cuh"
#include "kernels/cuda/tile_gemm.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Tile geometry, slice loading and k loop of grouped_gemm_kernel: kernels/cuda/tile_gemm.cuh.

// dbias: a block covers kColTile columns, with kColRowThreads threads down the rows of each.
constexpr int kColTile = 32;
constexpr int kColRowThreads = 8;

// out_i = op(a_i) @ op(b_i) (+ bias_i) for i < groups. Both operands are described as "tile index
// t x depth k" (t: a row of op(a), a column of op(b)); the matrix of group i starts at
// i * group_stride, and element (t, k) lies at t * ld + k when the operand is depth-contiguous
// (template flag), at k * ld + t otherwise. out_i is row-major: (r, j) at i * c_group + r * c_ld + j.
template <typename T>
struct GroupedGemmArgs {
  const T* a = nullptr;
  const T* b = nullptr;
  T* c = nullptr;
  const T* bias = nullptr;  // bias_i[j] at i * bias_group + j; null: none
  std::int64_t m = 0, n = 0, k = 0, groups = 0;
  std::int64_t a_group = 0, a_ld = 0;
  std::int64_t b_group = 0, b_ld = 0;
  std::int64_t c_group = 0, c_ld = 0;
  std::int64_t bias_group = 0;
};

// Slices of a depth-contiguous (kDepthContiguous) or tile-contiguous operand: consecutive lanes of
// a warp take consecutive depths, or consecutive tile indices, so that they read contiguous
// memory either way.
template <bool kDepthContiguous>
struct FixedSteps {
  static constexpr int t_step = kDepthContiguous ? kGemmThreads / kTileK : 0;
  static constexpr int kk_step = kDepthContiguous ? 0 : kGemmThreads / kTile;
};
template <bool kDepthContiguous>
using ContiguousSliceLoader = SliceLoader<FixedSteps<kDepthContiguous>>;

// The loader of an operand whose element (t, depth) lies at t * ld + depth when depth-contiguous,
// at depth * ld + t otherwise, for t0 + t < extent_t.
template <bool kDepthContiguous>
__device__ __forceinline__ ContiguousSliceLoader<kDepthContiguous> make_slice_loader(std::int64_t extent_t,
                                                                                     std::int64_t t0, std::int64_t ld) {
  const int tid = static_cast<int>(threadIdx.x);
  ContiguousSliceLoader<kDepthContiguous> l;
  l.t = kDepthContiguous ? tid / kTileK : tid % kTile;
  l.kk = kDepthContiguous ? tid % kTileK : tid / kTile;
  l.offset = kDepthContiguous ? (t0 + l.t) * ld + l.kk : (t0 + l.t) + l.kk * ld;
  l.r_stride = kDepthContiguous ? l.t_step * ld : l.kk_step * ld;
  l.slice_step = kDepthContiguous ? kTileK : kTileK * ld;
  l.t_inside = tile_extent(extent_t, t0);
  return l;
}

// One 64x64 tile of out_group at (row0, col0) (thread layout: tile_gemm.cuh), plus the bias.
// Called by every thread of the block (it contains barriers).
template <typename T, bool kADepthContiguous, bool kBDepthContiguous>
__device__ __forceinline__ void grouped_gemm_tile(const GroupedGemmArgs<T>& p, std::int64_t group,
                                                  std::int64_t row0, std::int64_t col0, SliceTile<T>& a_tile,
                                                  SliceTile<T>& b_tile) {
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerDim;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerDim;
  const MicroTile<T> acc =
      multiply_tile(p.k, p.a + group * p.a_group, make_slice_loader<kADepthContiguous>(p.m, row0, p.a_ld),
                    p.b + group * p.b_group, make_slice_loader<kBDepthContiguous>(p.n, col0, p.b_ld), a_tile,
                    b_tile, tx, ty);

  T* c = p.c + group * p.c_group;
  const T* bias = p.bias ? p.bias + group * p.bias_group : nullptr;
#pragma unroll
  for (int j = 0; j < kMicro; ++j) {
    const std::int64_t col = col0 + tx + j * kThreadsPerDim;
    const T bias_j = bias && col < p.n ? bias[col] : T(0);
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const std::int64_t row = row0 + ty + i * kThreadsPerDim;
      if (row < p.m && col < p.n) c[row * p.c_ld + col] = acc.sum[i][j] + bias_j;
    }
  }
}

// Grid: x = row tiles, y = column tiles, z = groups; y and z loop past the grid limit. The loops
// are block-uniform, so the barriers inside the tile are too. At least 2 blocks per SM caps the
// registers at 128 (the same bound as kernels/cuda/matmul.cu's tiled kernel).
template <typename T, bool kADepthContiguous, bool kBDepthContiguous>
__global__ void __launch_bounds__(kGemmThreads, 2) grouped_gemm_kernel(GroupedGemmArgs<T> p) {
  EMU_CHECK_LAUNCH_BOUNDS(kGemmThreads, 2);
  EMU_STATIC_SHARED(a_tile, SliceTile<T>);
  EMU_STATIC_SHARED(b_tile, SliceTile<T>);
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t group = blockIdx.z; group < p.groups; group += gridDim.z)
    for (std::int64_t col0 = static_cast<std::int64_t>(blockIdx.y) * kTile; col0 < p.n;
         col0 += static_cast<std::int64_t>(gridDim.y) * kTile)
      grouped_gemm_tile<T, kADepthContiguous, kBDepthContiguous>(p, group, row0, col0, a_tile, b_tile);
}

// out[col] = sum over rows of x[row * cols + col]. Block (kColTile, kColRowThreads): thread y of a
// column sums rows y, y + kColRowThreads, ... in order, then thread y = 0 adds the kColRowThreads
// sums in y order: a fixed order, the same for any schedule. The column loop is block-uniform.
template <typename T>
__global__ void column_sum_kernel(const T* __restrict__ x, T* __restrict__ out, std::int64_t rows,
                                  std::int64_t cols) {
  EMU_STATIC_SHARED(partial, SumAcc<T>[kColRowThreads][kColTile]);
  for (std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kColTile; col0 < cols;
       col0 += static_cast<std::int64_t>(gridDim.x) * kColTile) {
    const std::int64_t col = col0 + threadIdx.x;
    SumAcc<T> s = SumAcc<T>::zero();
    if (col < cols)
      for (std::int64_t r = threadIdx.y; r < rows; r += kColRowThreads) s.add(x[r * cols + col]);
    partial[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      SumAcc<T> total = SumAcc<T>::zero();
#pragma unroll
      for (int y = 0; y < kColRowThreads; ++y) total = total.merged(partial[y][threadIdx.x]);
      out[col] = total.value();
    }
    __syncthreads();  // the next column tile overwrites `partial`
  }
}

template <typename T, bool kADepthContiguous, bool kBDepthContiguous>
void launch_grouped_gemm(const char* op, const GroupedGemmArgs<T>& p) {
  launch_checked(op, grouped_gemm_kernel<T, kADepthContiguous, kBDepthContiguous>, tile_grid(p.m, p.n, p.groups),
                 dim3(kGemmThreads), 0, p);
}

// The problem's sizes: weight [g, k_in, k_out], x [T, g*k_in].
struct Sizes {
  std::int64_t groups, k_in, k_out, rows;
};

// rows_of: x, y or dy (any [T, ...] matrix of the problem).
Sizes sizes_of(const Tensor& rows_of, const Tensor& weight) {
  return {weight.shape()[0], weight.shape()[1], weight.shape()[2], rows_of.shape()[0]};
}

// y_i = x_i @ w_i + b_i. x_i: (row, c) at row * g*k_in + c (depth-contiguous); w_i as op(b):
// (col j, depth c) at c * k_out + j (tile-contiguous).
template <typename T>
void forward_tiled(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  const Sizes s = sizes_of(x, weight);
  GroupedGemmArgs<T> p;
  p.a = x.data<T>();
  p.b = weight.data<T>();
  p.c = y.data<T>();
  p.bias = bias.defined() ? bias.data<T>() : nullptr;
  p.m = s.rows;
  p.n = s.k_out;
  p.k = s.k_in;
  p.groups = s.groups;
  p.a_group = s.k_in;
  p.a_ld = s.groups * s.k_in;
  p.b_group = s.k_in * s.k_out;
  p.b_ld = s.k_out;
  p.c_group = s.k_out;
  p.c_ld = s.groups * s.k_out;
  p.bias_group = s.k_out;
  launch_grouped_gemm<T, true, false>("grouped_linear", p);
}

// dx_i = dy_i @ w_i^T. dy_i: (row, j) at row * g*k_out + j (depth-contiguous); w_i^T as op(b):
// (col c, depth j) at c * k_out + j (depth-contiguous).
template <typename T>
void dx_tiled(const Sizes& s, const Tensor& dy, const Tensor& weight, const Tensor& dx) {
  GroupedGemmArgs<T> p;
  p.a = dy.data<T>();
  p.b = weight.data<T>();
  p.c = dx.data<T>();
  p.m = s.rows;
  p.n = s.k_in;
  p.k = s.k_out;
  p.groups = s.groups;
  p.a_group = s.k_out;
  p.a_ld = s.groups * s.k_out;
  p.b_group = s.k_in * s.k_out;
  p.b_ld = s.k_out;
  p.c_group = s.k_in;
  p.c_ld = s.groups * s.k_in;
  launch_grouped_gemm<T, true, true>("grouped_linear_backward", p);
}

// dw_i = x_i^T @ dy_i, the depth being the T rows. x_i^T as op(a): (c, depth row) at
// row * g*k_in + c; dy_i as op(b): (col j, depth row) at row * g*k_out + j; both tile-contiguous.
template <typename T>
void dweight_tiled(const Sizes& s, const Tensor& x, const Tensor& dy, const Tensor& dweight) {
  GroupedGemmArgs<T> p;
  p.a = x.data<T>();
  p.b = dy.data<T>();
  p.c = dweight.data<T>();
  p.m = s.k_in;
  p.n = s.k_out;
  p.k = s.rows;
  p.groups = s.groups;
  p.a_group = s.k_in;
  p.a_ld = s.groups * s.k_in;
  p.b_group = s.k_out;
  p.b_ld = s.groups * s.k_out;
  p.c_group = s.k_in * s.k_out;
  p.c_ld = s.k_out;
  launch_grouped_gemm<T, false, false>("grouped_linear_backward", p);
}

// dbias[i, j] = column i*k_out + j of dy summed over rows ([g, k_out] is dy's column order).
template <typename T>
void dbias_columns(const Sizes& s, const Tensor& dy, const Tensor& dbias) {
  const std::int64_t cols = s.groups * s.k_out;
  launch_checked("grouped_linear_backward", column_sum_kernel<T>, grid_for(cols, kColTile),
                 dim3(kColTile, kColRowThreads), 0, dy.data<T>(), dbias.data<T>(), s.rows, cols);
}

// cuBLAS through kernels::gemm (kernels/cuda/matmul.cu), on group views that need no copy: a
// [T, g*width] matrix seen as [g, T, width] (group i's block starts at column i*width). Every
// operand then has a uniform batch stride, which matmul.cu maps onto cublas<t>gemmStridedBatched.
Tensor group_view(const Tensor& m, std::int64_t groups) {
  const std::int64_t rows = m.shape()[0], width = m.shape()[1] / groups;
  return m.as_strided({groups, rows, width}, {width, groups * width, 1}, m.offset());
}

bool use_cublas(const Tensor& on) { return cuda_gemm_in_effect(on.device().is_emu()) == CudaGemm::Cublas; }

template <typename T>
void forward_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  if (use_cublas(y)) {
    const std::int64_t groups = weight.shape()[0];
    // The bias rows first; the GEMM then adds onto them (beta = 1).
    if (bias.defined()) ::define::kernels::copy_into(y, bias.as_strided({bias.numel()}, {1}, bias.offset()));
    ::define::kernels::gemm(group_view(x, groups), weight, group_view(y, groups), false, false, 1.0,
                            bias.defined() ? 1.0 : 0.0);
    return;
  }
  forward_tiled<T>(x, weight, bias, y);
}

template <typename T>
void backward_typed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx, const Tensor& dweight,
                    const Tensor& dbias) {
  const Sizes s = sizes_of(dy, weight);
  if (dbias.defined()) dbias_columns<T>(s, dy, dbias);
  if (use_cublas(dy)) {
    const Tensor dyv = group_view(dy, s.groups);
    if (dx.defined()) ::define::kernels::gemm(dyv, weight, group_view(dx, s.groups), false, true, 1.0, 0.0);
    if (dweight.defined()) ::define::kernels::gemm(group_view(x, s.groups), dyv, dweight, true, false, 1.0, 0.0);
    return;
  }
  if (dx.defined()) dx_tiled<T>(s, dy, weight, dx);
  if (dweight.defined()) dweight_tiled<T>(s, x, dy, dweight);
}

}  // namespace

void grouped_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "grouped_linear", [&] { forward_typed<scalar_t>(x, weight, bias, y); });
}

void grouped_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx,
                             const Tensor& dweight, const Tensor& dbias) {
  DEFINE_DISPATCH_FLOAT(dy.dtype(), "grouped_linear_backward",
                        [&] { backward_typed<scalar_t>(dy, x, weight, dx, dweight, dbias); });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
