// The tiled shared-memory GEMM scheme shared by gemm_tiled_kernel (kernels/cuda/matmul.cu) and
// grouped_gemm_kernel (kernels/cuda/grouped_linear.cu): the tile geometry, the shared slice type,
// the loading and staging of slices, and the k loop that turns one 64x64 output tile into
// per-thread 4x4 register sums. What differs between the two stays in their files: where a
// thread's elements of a slice lie and in which order a warp reads them (each file's
// make_slice_loader and its Steps: strides and order known at run time in matmul.cu, fixed at
// compile time in grouped_linear.cu), and what is done with the sums (the epilogues: alpha/beta,
// bias).
//
// A block of kGemmThreads threads computes a kTile x kTile tile of out, stepping through the depth
// k in slices of kTileK: each slice of op(a) and op(b) is staged in shared memory, and the next
// slice is fetched into registers while the current one is used. Thread (ty, tx) owns rows
// ty + kThreadsPerDim*i and columns tx + kThreadsPerDim*j of the tile (i, j < kMicro): in the
// inner loop a warp then reads 16 consecutive b values and 2 a values (no bank conflicts), and its
// stores to a row-major out cover runs of 16 consecutive columns. Every output is one thread's sum
// in increasing k, so results do not depend on block order or thread schedule.
//
// 16-bit operands (Half, BFloat16) are widened as they are loaded: the staged slices, the sums and
// the epilogue are in the compute type C = compute_t<T> (float), and the epilogue rounds once.
//
// Included by kernel files only, after common.cuh (it lives in the backend namespace).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kTile = 64;                                       // rows and columns of out per block
constexpr int kTileK = 16;                                      // depth of one k slice staged in shared memory
constexpr int kMicro = 4;                                       // each thread owns kMicro x kMicro outputs
constexpr int kThreadsPerDim = kTile / kMicro;                  // 16 x 16 threads
constexpr int kGemmThreads = kThreadsPerDim * kThreadsPerDim;   // 256
constexpr int kLoadsPerThread = kTile * kTileK / kGemmThreads;  // slice elements each thread loads
// Shared rows are padded by 2 elements: with a row length of 66, the k-fastest stores of one warp
// (16 k values x 2 tile indices) land on 32 different banks.
constexpr int kPad = 2;
// CUDA's limit for gridDim.y and gridDim.z; the kernels loop when column tiles or batches exceed it.
constexpr std::int64_t kMaxGridYZ = 65535;

static_assert(kTile * kTileK % kGemmThreads == 0, "a slice must split evenly over the threads");

// One staged k slice of an operand, laid out [k][tile index] for the inner product loop.
template <typename T>
using SliceTile = T[kTileK][kTile + kPad];

// How many of the kTileK k values of the slice starting at k0 are < k.
__device__ __forceinline__ int slice_depth(std::int64_t k, std::int64_t k0) {
  return static_cast<int>(k - k0 < kTileK ? k - k0 : kTileK);
}

// How many of the kTile tile indices starting at t0 are < extent.
__device__ __forceinline__ int tile_extent(std::int64_t extent, std::int64_t t0) {
  return static_cast<int>(extent - t0 < kTile ? extent - t0 : kTile);
}

// This thread's share of the k slices of one operand, seen as "tile index t x k" (t: a row of
// op(a), a column of op(b)). Per slice the thread loads kLoadsPerThread elements, at tile
// coordinates (t + r * t_step, kk + r * kk_step) and addresses offset + r * r_stride, r = 0, 1, ...
// (one of the two steps is 0); moving to the next slice only moves offset. Elements outside the
// matrix (partial tiles) load as 0. Steps provides t_step and kk_step, as members set at run time
// or as static constexpr members; the kernel files fill in where the thread's elements lie.
template <typename Steps>
struct SliceLoader : Steps {
  std::int64_t offset = 0;      // of the thread's first element in the current slice
  std::int64_t r_stride = 0;    // from one of its elements to the next
  std::int64_t slice_step = 0;  // from one slice to the next
  int t = 0, kk = 0;            // tile coordinates of the first element
  int t_inside = 0;             // tile indices t < t_inside lie inside the matrix

  // Reads the current slice into registers and advances to the next one. k_inside: how many of
  // the slice's kTileK k values lie inside the matrix.
  template <typename C, typename T>
  __device__ __forceinline__ void load(C (&regs)[kLoadsPerThread], const T* __restrict__ base, int k_inside) {
#pragma unroll
    for (int r = 0; r < kLoadsPerThread; ++r) {
      const bool inside = t + r * this->t_step < t_inside && kk + r * this->kk_step < k_inside;
      regs[r] = inside ? load_value(base[offset + r * r_stride]) : C(0);
    }
    offset += slice_step;
  }

  // Writes what load() read into the shared slice.
  template <typename T>
  __device__ __forceinline__ void store(SliceTile<T>& tile, const T (&regs)[kLoadsPerThread]) const {
#pragma unroll
    for (int r = 0; r < kLoadsPerThread; ++r) tile[kk + r * this->kk_step][t + r * this->t_step] = regs[r];
  }
};

// One thread's outputs of a tile: sum[i][j] is row ty + kThreadsPerDim*i, column
// tx + kThreadsPerDim*j. Returned by value rather than filled through an array reference: with
// the array, ptxas (CUDA 13.0) gave gemm_tiled_kernel<float> one register more on sm_90.
template <typename T>
struct MicroTile {
  T sum[kMicro][kMicro];
};

// Adds the products of one staged slice to this thread's micro-tile, in increasing k.
template <typename T>
__device__ __forceinline__ void accumulate_slice(MicroTile<T>& acc, const SliceTile<T>& a_tile,
                                                 const SliceTile<T>& b_tile, int tx, int ty) {
#pragma unroll
  for (int kk = 0; kk < kTileK; ++kk) {
    T af[kMicro], bf[kMicro];
#pragma unroll
    for (int i = 0; i < kMicro; ++i) af[i] = a_tile[kk][ty + i * kThreadsPerDim];
#pragma unroll
    for (int j = 0; j < kMicro; ++j) bf[j] = b_tile[kk][tx + j * kThreadsPerDim];
#pragma unroll
    for (int i = 0; i < kMicro; ++i)
#pragma unroll
      for (int j = 0; j < kMicro; ++j) acc.sum[i][j] += af[i] * bf[j];
  }
}

// This thread's micro-tile of op(a) @ op(b) over the whole depth k, for the tile whose slices la
// and lb (positioned at k = 0) load from a and b. Called by every thread of the block (it
// contains barriers); k is block-uniform.
template <typename T, typename ASteps, typename BSteps, typename C = compute_t<T>>
__device__ __forceinline__ MicroTile<C> multiply_tile(std::int64_t k, const T* __restrict__ a,
                                                      SliceLoader<ASteps> la, const T* __restrict__ b,
                                                      SliceLoader<BSteps> lb, SliceTile<C>& a_tile,
                                                      SliceTile<C>& b_tile, int tx, int ty) {
  MicroTile<C> acc;
#pragma unroll
  for (int i = 0; i < kMicro; ++i)
#pragma unroll
    for (int j = 0; j < kMicro; ++j) acc.sum[i][j] = C(0);

  C a_next[kLoadsPerThread], b_next[kLoadsPerThread];
  la.load(a_next, a, slice_depth(k, 0));
  lb.load(b_next, b, slice_depth(k, 0));
  for (std::int64_t k0 = 0; k0 < k; k0 += kTileK) {
    la.store(a_tile, a_next);
    lb.store(b_tile, b_next);
    __syncthreads();
    if (k0 + kTileK < k) {  // block-uniform: prefetch the next slice while this one is used
      la.load(a_next, a, slice_depth(k, k0 + kTileK));
      lb.load(b_next, b, slice_depth(k, k0 + kTileK));
    }
    accumulate_slice(acc, a_tile, b_tile, tx, ty);
    __syncthreads();  // the next iteration (or tile) overwrites the slice
  }
  return acc;
}

// Grid of the tiled kernels: x = row tiles, y = column tiles, z = batch entries (groups), y and z
// capped at the grid limit (the kernels loop over the rest).
inline dim3 tile_grid(std::int64_t m, std::int64_t n, std::int64_t batches) {
  const std::int64_t row_tiles = (m + kTile - 1) / kTile, col_tiles = (n + kTile - 1) / kTile;
  return dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(std::min(col_tiles, kMaxGridYZ)),
              static_cast<unsigned>(std::min(batches, kMaxGridYZ)));
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
