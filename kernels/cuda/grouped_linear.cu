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
//     any block order or thread schedule.
//     dweight's outputs are few (g * k_in * k_out: 16 tiles for 8 groups of 64 x 128) and its depth
//     is every row of the batch, so one block per tile would leave most of a GPU idle while a few
//     blocks walk thousands of rows. When the tiles alone make fewer than kSplitTargetBlocks blocks,
//     the rows are cut into `splits` chunks of a multiple of the slice depth (blockIdx.z runs over
//     groups x chunks); each chunk's block writes its tile of partial sums to a workspace
//     [splits, g, k_in, k_out], and sum_chunks_kernel adds each output's partials in chunk order.
//     The split depends on the shapes alone and no atomics are used: still deterministic.
//   * dbias is the column sum of dy ([T, g*k_out] in [g, k_out] order): the reduce family's
//     column_sum (kernels/cuda/reduce.cu), which also splits the rows when the columns are few.
// Whether an operand's slices load "depth fastest" or "tile index fastest" is a template
// parameter chosen so that a warp's loads are contiguous in memory for every operand.
//
// When cuBLAS serves GEMMs (kernels/cuda/matmul_config.h: by default on a GPU; on the emulated
// device when DEFINE_CUDA_GEMM=cublas / set_cuda_gemm(CudaGemm::Cublas) selects it, which runs the
// emulated cuBLAS) the three GEMMs go to cublas<t>gemmStridedBatched through kernels::gemm, on the
// same strided group views; otherwise to the tiled kernel.
#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/matmul.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/tile_gemm.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Tile geometry, slice loading and k loop of grouped_gemm_kernel: kernels/cuda/tile_gemm.cuh.

// The split of a deep GEMM's depth over blocks (dweight): split while the output tiles make fewer
// than kSplitTargetBlocks blocks (about two waves of blocks on an 80-SM GPU at 2 blocks per SM),
// but keep at least kMinSplitDepth rows (16 slices) per chunk, so that the chunk's own loop, not
// loading its tile and storing its partials, is what a block spends its time on.
constexpr std::int64_t kSplitTargetBlocks = 320;
constexpr std::int64_t kMinSplitDepth = 256;

// out_i = op(a_i) @ op(b_i) (+ bias_i) for i < groups. Both operands are described as "tile index
// t x depth k" (t: a row of op(a), a column of op(b)); the matrix of group i starts at
// i * group_stride, and element (t, k) lies at t * ld + k when the operand is depth-contiguous
// (template flag), at k * ld + t otherwise. out_i is row-major: (r, j) at i * c_group + r * c_ld + j.
// T is the operands' type, O the output's: T itself, or the compute type for a split GEMM's
// partials (float for 16-bit operands, so the chunks add up before the one rounding).
template <typename T, typename O = T>
struct GroupedGemmArgs {
  const T* a = nullptr;
  const T* b = nullptr;
  O* c = nullptr;
  const T* bias = nullptr;  // bias_i[j] at i * bias_group + j; null: none
  std::int64_t m = 0, n = 0, k = 0, groups = 0;
  std::int64_t a_group = 0, a_ld = 0;
  std::int64_t b_group = 0, b_ld = 0;
  std::int64_t c_group = 0, c_ld = 0;
  std::int64_t bias_group = 0;
  // The depth cut into `splits` chunks of k_chunk (the last may be shorter): chunk s of group i
  // reads a and b from s * a_split and s * b_split on and writes its partial out_i at s * c_split.
  std::int64_t splits = 1, k_chunk = 0;
  std::int64_t a_split = 0, b_split = 0, c_split = 0;
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

// One 64x64 tile of out_group (or, split, of chunk `chunk`'s partial out_group) at (row0, col0)
// (thread layout: tile_gemm.cuh), plus the bias. Called by every thread of the block (it contains
// barriers).
template <typename T, typename O, bool kADepthContiguous, bool kBDepthContiguous, typename C = compute_t<T>>
__device__ __forceinline__ void grouped_gemm_tile(const GroupedGemmArgs<T, O>& p, std::int64_t group,
                                                  std::int64_t chunk, std::int64_t row0, std::int64_t col0,
                                                  SliceTile<C>& a_tile, SliceTile<C>& b_tile) {
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerDim;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerDim;
  const std::int64_t depth = p.splits == 1 ? p.k : std::min(p.k_chunk, p.k - chunk * p.k_chunk);
  const T* a = p.a + group * p.a_group + chunk * p.a_split;
  const T* b = p.b + group * p.b_group + chunk * p.b_split;
  const MicroTile<C> acc =
      multiply_tile(depth, a, make_slice_loader<kADepthContiguous>(p.m, row0, p.a_ld), b,
                    make_slice_loader<kBDepthContiguous>(p.n, col0, p.b_ld), a_tile, b_tile, tx, ty);

  O* c = p.c + group * p.c_group + chunk * p.c_split;
  const T* bias = p.bias ? p.bias + group * p.bias_group : nullptr;
#pragma unroll
  for (int j = 0; j < kMicro; ++j) {
    const std::int64_t col = col0 + tx + j * kThreadsPerDim;
    const C bias_j = bias && col < p.n ? load_value(bias[col]) : C(0);
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const std::int64_t row = row0 + ty + i * kThreadsPerDim;
      if (row < p.m && col < p.n) c[row * p.c_ld + col] = store_value<O>(acc.sum[i][j] + bias_j);
    }
  }
}

// Grid: x = row tiles, y = column tiles, z = groups x chunks (chunk fastest); y and z loop past
// the grid limit. The loops are block-uniform, so the barriers inside the tile are too. At least 2
// blocks per SM caps the registers at 128 (the same bound as kernels/cuda/matmul.cu's tiled kernel).
template <typename T, typename O, bool kADepthContiguous, bool kBDepthContiguous>
__global__ void __launch_bounds__(kGemmThreads, 2) grouped_gemm_kernel(GroupedGemmArgs<T, O> p) {
  EMU_CHECK_LAUNCH_BOUNDS(kGemmThreads, 2);
  EMU_STATIC_SHARED(a_tile, SliceTile<compute_t<T>>);
  EMU_STATIC_SHARED(b_tile, SliceTile<compute_t<T>>);
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t z = blockIdx.z; z < p.groups * p.splits; z += gridDim.z)
    for (std::int64_t col0 = static_cast<std::int64_t>(blockIdx.y) * kTile; col0 < p.n;
         col0 += static_cast<std::int64_t>(gridDim.y) * kTile)
      grouped_gemm_tile<T, O, kADepthContiguous, kBDepthContiguous>(p, z / p.splits, z % p.splits, row0, col0,
                                                                    a_tile, b_tile);
}

// out[e] = partial[0][e] + partial[1][e] + ... + partial[splits - 1][e], in chunk order: the split
// GEMM's partial outputs (in the compute type), `n` elements each, combined the same way whatever
// the schedule, rounded once to T.
template <typename T>
__global__ void sum_chunks_kernel(const compute_t<T>* __restrict__ partial, T* __restrict__ out, std::int64_t n,
                                  std::int64_t splits) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    compute_t<T> sum = partial[e];
    for (std::int64_t s = 1; s < splits; ++s) sum += partial[s * n + e];
    out[e] = store_value<T>(sum);
  }
}

template <typename T, typename O, bool kADepthContiguous, bool kBDepthContiguous>
void launch_grouped_gemm(const char* op, const GroupedGemmArgs<T, O>& p) {
  launch_checked(op, grouped_gemm_kernel<T, O, kADepthContiguous, kBDepthContiguous>,
                 tile_grid(p.m, p.n, p.groups * p.splits), dim3(kGemmThreads), 0, p);
}

// How many chunks the depth of an m x n (x groups) GEMM is cut into: see kSplitTargetBlocks. A
// function of the shapes alone, so a result's bits do not depend on the GPU.
std::int64_t depth_splits(std::int64_t m, std::int64_t n, std::int64_t groups, std::int64_t k) {
  const std::int64_t tiles = ceil_div(m, kTile) * ceil_div(n, kTile) * groups;
  if (tiles >= kSplitTargetBlocks) return 1;
  return std::max<std::int64_t>(1, std::min(ceil_div(kSplitTargetBlocks, tiles), k / kMinSplitDepth));
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
  launch_grouped_gemm<T, T, true, false>("grouped_linear", p);
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
  launch_grouped_gemm<T, T, true, true>("grouped_linear_backward", p);
}

// dw_i = x_i^T @ dy_i, the depth being the T rows. x_i^T as op(a): (c, depth row) at
// row * g*k_in + c; dy_i as op(b): (col j, depth row) at row * g*k_out + j; both tile-contiguous.
// Split over the rows (depth_splits), the chunks' partials go to a workspace and are then summed.
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
  const std::int64_t splits = depth_splits(p.m, p.n, p.groups, p.k);
  if (splits == 1) {
    launch_grouped_gemm<T, T, false, false>("grouped_linear_backward", p);
    return;
  }
  // Chunks of whole slices; rounding the chunk up can leave fewer chunks than asked, never an empty one.
  using C = compute_t<T>;
  GroupedGemmArgs<T, C> q;
  q.a = p.a;
  q.b = p.b;
  q.m = p.m;
  q.n = p.n;
  q.k = p.k;
  q.groups = p.groups;
  q.a_group = p.a_group;
  q.a_ld = p.a_ld;
  q.b_group = p.b_group;
  q.b_ld = p.b_ld;
  q.c_group = p.c_group;
  q.c_ld = p.c_ld;
  q.k_chunk = ceil_div(ceil_div(q.k, splits), kTileK) * kTileK;
  q.splits = ceil_div(q.k, q.k_chunk);
  q.a_split = q.k_chunk * q.a_ld;
  q.b_split = q.k_chunk * q.b_ld;
  q.c_split = dweight.numel();
  const Tensor partial = empty({q.splits * q.c_split}, {dtype_of_v<C>, dweight.device()});
  q.c = partial.data<C>();
  launch_grouped_gemm<T, C, false, false>("grouped_linear_backward", q);
  launch_checked("grouped_linear_backward", sum_chunks_kernel<T>, grid_for(q.c_split), kBlockSize, 0,
                 static_cast<const C*>(partial.data<C>()), dweight.data<T>(), q.c_split, q.splits);
}

// dbias[i, j] = column i*k_out + j of dy summed over rows ([g, k_out] is dy's column order; a
// 16-bit dy is summed in float and rounded once).
void dbias_columns(const Sizes& s, const Tensor& dy, const Tensor& dbias) {
  column_sum(dy, dbias.as_strided({s.groups * s.k_out}, {1}, dbias.offset()));
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
  if (dbias.defined()) dbias_columns(s, dy, dbias);
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
  DEFINE_DISPATCH_FLOATING(x.dtype(), "grouped_linear", [&] { forward_typed<scalar_t>(x, weight, bias, y); });
}

void grouped_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx,
                             const Tensor& dweight, const Tensor& dbias) {
  DEFINE_DISPATCH_FLOATING(dy.dtype(), "grouped_linear_backward",
                           [&] { backward_typed<scalar_t>(dy, x, weight, dx, dweight, dbias); });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
