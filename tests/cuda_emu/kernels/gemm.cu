// SGEMM test kernels: tiled shared-memory matrix products with every boundary path (partial tiles in
// m, n and k). Compiled by nvcc and by g++ against the emulator.
#include <cstddef>

#include "kernels/cuda/cuda_compat.cuh"

#include "gemm.cuh"

namespace {

constexpr int kTile = 32;
constexpr int kThreads = 16;  // per dimension; each thread owns a 2x2 block of outputs

__global__ void __launch_bounds__(kThreads * kThreads)
    sgemm_tiled_kernel(int m, int n, int k, const float* __restrict__ a, const float* __restrict__ b,
                       float* __restrict__ c) {
  EMU_CHECK_LAUNCH_BOUNDS(kThreads * kThreads);
  __shared__ float as[kTile][kTile + 1];  // +1: no bank conflicts on the GPU
  __shared__ float bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};

  for (int k0 = 0; k0 < k; k0 += kTile) {
    for (int i = ty; i < kTile; i += kThreads) {
      for (int j = tx; j < kTile; j += kThreads) {
        const int r = row0 + i, ka = k0 + j;
        as[i][j] = (r < m && ka < k) ? a[std::size_t(r) * k + ka] : 0.f;
        const int kb = k0 + i, col = col0 + j;
        bs[i][j] = (kb < k && col < n) ? b[std::size_t(kb) * n + col] : 0.f;
      }
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTile; ++kk) {
      const float a0 = as[ty][kk], a1 = as[ty + kThreads][kk];
      const float b0 = bs[kk][tx], b1 = bs[kk][tx + kThreads];
      acc[0][0] += a0 * b0;
      acc[0][1] += a0 * b1;
      acc[1][0] += a1 * b0;
      acc[1][1] += a1 * b1;
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      const int r = row0 + ty + i * kThreads, col = col0 + tx + j * kThreads;
      if (r < m && col < n) c[std::size_t(r) * n + col] = acc[i][j];
    }
  }
}

template <int TILE>
__global__ void sgemm_dynamic_kernel(int m, int n, int k, const float* __restrict__ a,
                                     const float* __restrict__ b, float* __restrict__ c) {
  EMU_DYNAMIC_SHARED(float, tiles);  // as = tiles[0 .. TILE*TILE), bs = the next TILE*TILE
  float* as = tiles;
  float* bs = tiles + TILE * TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int r = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    as[ty * TILE + tx] = (r < m && k0 + tx < k) ? __ldg(&a[std::size_t(r) * k + k0 + tx]) : 0.f;
    bs[ty * TILE + tx] = (k0 + ty < k && col < n) ? __ldg(&b[std::size_t(k0 + ty) * n + col]) : 0.f;
    __syncthreads();
    for (int kk = 0; kk < TILE; ++kk) acc = __fmaf_rn(as[ty * TILE + kk], bs[kk * TILE + tx], acc);
    __syncthreads();
  }
  if (r < m && col < n) c[std::size_t(r) * n + col] = acc;
}

}  // namespace

namespace emu_test {

void sgemm_tiled(int m, int n, int k, const float* a, const float* b, float* c, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  launch(sgemm_tiled_kernel, grid, dim3(kThreads, kThreads), 0, stream, m, n, k, a, b, c);
}

void sgemm_dynamic_smem(int m, int n, int k, const float* a, const float* b, float* c, cudaStream_t stream) {
  constexpr int tile = 32;
  if (m == 0 || n == 0) return;
  const dim3 grid((n + tile - 1) / tile, (m + tile - 1) / tile);
  launch(sgemm_dynamic_kernel<tile>, grid, dim3(tile, tile), 2 * tile * tile * sizeof(float), stream, m, n, k, a, b,
         c);
}

}  // namespace emu_test
