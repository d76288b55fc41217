// Reduction-style test kernels: warp-shuffle block reduction with a grid-stride loop, a row softmax
// (block-wide max and sum through shuffles + shared memory), and an atomic histogram with shared
// privatisation. Compiled by nvcc and by g++ against the emulator.
#include <cfloat>
#include <cmath>
#include <cstddef>

#include "kernels/cuda/cuda_compat.cuh"

#include "reduce.cuh"

namespace {

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFull, v, offset);
  return v;  // complete in lane 0
}

__device__ __forceinline__ float warp_max_all(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFull, v, offset));
  return v;  // complete in every lane
}

// Sum over a block of BLOCK threads (a multiple of 32); the result is valid in thread 0.
template <int BLOCK>
__device__ float block_sum(float v) {
  __shared__ float warp_sums[BLOCK / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {  // warp-uniform branch around the full-mask shuffles
    v = lane < BLOCK / 32 ? warp_sums[lane] : 0.f;
    v = warp_sum(v);
  }
  __syncthreads();  // warp_sums may be reused by the next call
  return v;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) reduce_kernel(const float* __restrict__ x, std::size_t n,
                                                       float* __restrict__ out, bool accumulate_atomically) {
  EMU_CHECK_LAUNCH_BOUNDS(BLOCK);
  float v = 0.f;
  for (std::size_t i = std::size_t(blockIdx.x) * BLOCK + threadIdx.x; i < n; i += std::size_t(gridDim.x) * BLOCK)
    v += x[i];
  v = block_sum<BLOCK>(v);
  if (threadIdx.x == 0) {
    if (accumulate_atomically) {
      atomicAdd(out, v);
    } else {
      out[blockIdx.x] = v;
    }
  }
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                        int cols) {
  EMU_CHECK_LAUNCH_BOUNDS(BLOCK);
  EMU_DYNAMIC_SHARED(float, scratch);  // BLOCK / 32 floats: one per warp
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* row = x + std::size_t(blockIdx.x) * cols;
  float* out = y + std::size_t(blockIdx.x) * cols;

  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, row[c]);
  m = warp_max_all(m);
  if (lane == 0) scratch[warp] = m;
  __syncthreads();
  m = warp_max_all(lane < BLOCK / 32 ? scratch[lane] : -FLT_MAX);  // every warp reduces the partials
  __syncthreads();

  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) s += __expf(row[c] - m);
  s = warp_sum(s);
  if (lane == 0) scratch[warp] = s;
  __syncthreads();
  s = warp_sum(lane < BLOCK / 32 ? scratch[lane] : 0.f);
  s = __shfl_sync(kFull, s, 0);
  const float inv = __fdividef(1.f, s);
  for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = __expf(row[c] - m) * inv;
}

__global__ void histogram_kernel(const int* __restrict__ bins_of, const float* __restrict__ weights, int n,
                                 int bins, unsigned* __restrict__ counts, float* __restrict__ weight_sums) {
  EMU_DYNAMIC_SHARED(unsigned, local_counts);  // bins unsigned, then bins floats
  float* local_weights = reinterpret_cast<float*>(local_counts + bins);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    local_counts[b] = 0u;
    local_weights[b] = 0.f;
  }
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int b = bins_of[i];
    atomicAdd(&local_counts[b], 1);
    atomicAdd(&local_weights[b], weights[i]);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local_counts[b]) {
      atomicAdd(&counts[b], local_counts[b]);
      atomicAdd(&weight_sums[b], local_weights[b]);
    }
  }
}

int reduce_blocks(std::size_t n) {
  const std::size_t blocks = (n + emu_test::kReduceBlock - 1) / emu_test::kReduceBlock;
  return blocks < std::size_t(emu_test::kReduceMaxBlocks) ? int(blocks > 0 ? blocks : 1)
                                                          : emu_test::kReduceMaxBlocks;
}

}  // namespace

namespace emu_test {

void reduce_sum(const float* x, std::size_t n, float* partial, float* out, cudaStream_t stream) {
  const int blocks = reduce_blocks(n);
  launch(reduce_kernel<kReduceBlock>, blocks, kReduceBlock, 0, stream, x, n, partial, false);
  launch(reduce_kernel<kReduceBlock>, 1, kReduceBlock, 0, stream, static_cast<const float*>(partial),
         std::size_t(blocks), out, false);
}

void reduce_sum_atomic(const float* x, std::size_t n, float* out, cudaStream_t stream) {
  launch(reduce_kernel<kReduceBlock>, reduce_blocks(n), kReduceBlock, 0, stream, x, n, out, true);
}

void softmax_rows(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr int block = 256;
  if (rows == 0) return;
  launch(softmax_kernel<block>, rows, block, (block / 32) * sizeof(float), stream, x, y, cols);
}

void histogram(const int* bins_of, const float* weights, int n, int bins, unsigned* counts, float* weight_sums,
               cudaStream_t stream) {
  constexpr int block = 256;
  int blocks = (n + block - 1) / block;
  blocks = blocks < 1 ? 1 : (blocks > 32 ? 32 : blocks);
  launch(histogram_kernel, blocks, block, bins * (sizeof(unsigned) + sizeof(float)), stream, bins_of, weights, n,
         bins, counts, weight_sums);
}

}  // namespace emu_test
