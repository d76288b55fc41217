// Asynchronous-copy test kernels: cp.async (kernels/cuda/async_copy.cuh) into shared memory, its
// groups and waits, and planted mistakes. Compiled by nvcc too (the instruction needs sm_80; older
// targets copy at once).
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"

#include "async_copy.cuh"

namespace {

namespace dk = define::kernels::DEFINE_CUDA_NS;

constexpr int kMaxThreads = 128;

__global__ void async_tile_kernel(const float* src, int valid, float* out) {
  EMU_STATIC_SHARED(tile, float4[kMaxThreads]);
  const int t = threadIdx.x, n = blockDim.x;
  dk::copy_async_16(&tile[t], src + 4 * t, t < valid ? 16 : 0);
  dk::copy_async_commit();
  dk::copy_async_wait<0>();
  __syncthreads();
  const float4 v = tile[(t + 1) % n];
  out[4 * t] = v.x;
  out[4 * t + 1] = v.y;
  out[4 * t + 2] = v.z;
  out[4 * t + 3] = v.w;
}

__global__ void async_groups_kernel(const float* src, float* out) {
  EMU_STATIC_SHARED(first, float4);
  EMU_STATIC_SHARED(second, float4);
  dk::copy_async_16(&first, src, 16);
  dk::copy_async_commit();
  dk::copy_async_16(&second, src + 4, 16);
  dk::copy_async_commit();
  dk::copy_async_wait<1>();
  const float early[8] = {first.x, first.y, first.z, first.w, second.x, second.y, second.z, second.w};
  dk::copy_async_wait<0>();
  const float late[8] = {first.x, first.y, first.z, first.w, second.x, second.y, second.z, second.w};
  for (int i = 0; i < 8; ++i) {
    out[i] = early[i];
    out[8 + i] = late[i];
  }
}

constexpr int kMaxRows = 8;

__global__ void async_rows_kernel(const float* src, int rows, bool wait_each, float* out) {
  EMU_STATIC_SHARED(tile, float4[kMaxRows][32]);
  const int t = threadIdx.x;
  for (int r = 0; r < rows; ++r) {
    dk::copy_async_16(&tile[r][t], src + 128 * r + 4 * t, 16);
    if (wait_each) {
      dk::copy_async_commit();
      dk::copy_async_wait<0>();
    }
  }
  dk::copy_async_commit();
  dk::copy_async_wait<0>();
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += tile[r][t].x;
  out[t] = sum;
}

__global__ void async_bug_kernel(emu_test::AsyncBug bug, const float* src, float* out) {
  EMU_STATIC_SHARED(tile, float4[32]);
  const int t = threadIdx.x;
  tile[t] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncthreads();
  switch (bug) {
    case emu_test::AsyncBug::global_destination:
      dk::copy_async_16(out + 4 * t, src + 4 * t, 16);
      break;
    case emu_test::AsyncBug::misaligned_source:
      dk::copy_async_16(&tile[t], src + 4 * t + 1, 16);
      break;
    case emu_test::AsyncBug::shared_source:
      dk::copy_async_16(&tile[t], &tile[(t + 1) % 32], 16);
      break;
  }
  dk::copy_async_commit();
  dk::copy_async_wait<0>();
  out[t] = tile[t].x;
}

}  // namespace

namespace emu_test {

void async_tile(const float* src, int valid, float* out, int threads, cudaStream_t stream) {
  launch(async_tile_kernel, 1, threads, 0, stream, src, valid, out);
}

void async_groups(const float* src, float* out, cudaStream_t stream) {
  launch(async_groups_kernel, 1, 1, 0, stream, src, out);
}

void async_rows(const float* src, int rows, bool wait_each, float* out, cudaStream_t stream) {
  launch(async_rows_kernel, 1, 32, 0, stream, src, rows < kMaxRows ? rows : kMaxRows, wait_each, out);
}

void async_bug(AsyncBug bug, const float* src, float* out, cudaStream_t stream) {
  launch(async_bug_kernel, 1, 32, 0, stream, bug, src, out);
}

}  // namespace emu_test
