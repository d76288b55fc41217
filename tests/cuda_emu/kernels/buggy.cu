// Deliberately buggy kernels: each plants one bug that an emulator debug aid must catch (see
// tests/cuda_emu/debug_aids_test.cpp). Compiled by nvcc too, where they are simply wrong.
#include <cstddef>
#include <stdexcept>

#include "kernels/cuda/cuda_compat.cuh"

#include "buggy.cuh"

namespace {

constexpr int kBlock = emu_test::kBuggyBlock;

// Each thread reads its left neighbour's element from shared memory. The barrier between the write
// and the read is missing in the buggy variant: in forward order every left neighbour has already
// run to completion, so it passes; in reverse or random order it reads stale data.
template <bool kWithBarrier>
__global__ void neighbour_kernel(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float s[kBlock];
  const int t = threadIdx.x;
  const std::size_t i = std::size_t(blockIdx.x) * kBlock + t;
  s[t] = in[i];
  if (kWithBarrier) __syncthreads();
  out[i] = t > 0 ? s[t - 1] : s[t];
}

// Half the block waits at one __syncthreads, the other half at another.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads(); static_assert(__LINE__ == emu_test::kDivergentLineA, "update kDivergentLineA");
    out[threadIdx.x] = 1;
  } else {
    __syncthreads(); static_assert(__LINE__ == emu_test::kDivergentLineB, "update kDivergentLineB");
    out[threadIdx.x] = 2;
  }
}

// A full-mask shuffle inside a branch only half the warp takes; the other half sits at the barrier.
__global__ void warp_deadlock_kernel(float* out) {
  float v = float(threadIdx.x);
  if (threadIdx.x < 16) v = __shfl_down_sync(0xffffffffu, v, 1);
  __syncthreads();
  out[threadIdx.x] = v;
}

// Every lane passes the lower half-warp's mask, so the upper lanes are not in their own mask.
__global__ void wrong_mask_kernel(float* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, float(threadIdx.x), 0);
}

// Threads past n return before the barrier: legal on hardware (they count as arrived), an error
// under CUDA_EMU_STRICT.
__global__ void early_return_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float s[64];
  const int t = threadIdx.x;
  if (t >= n) return;
  s[t] = in[t];
  __syncthreads();
  out[t] = s[n - 1 - t];
}

// Thread 0 writes s[index] of `count` floats of dynamic shared memory: a bug when index >= count.
__global__ void smem_write_kernel(float* out, int count, int index) {
  EMU_DYNAMIC_SHARED(float, s);
  for (int i = threadIdx.x; i < count; i += blockDim.x) s[i] = 1.f;
  __syncthreads();
  if (threadIdx.x == 0) s[index] = 2.f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x % count];
}

// Reads dynamic shared memory nobody wrote.
__global__ void uninitialised_smem_kernel(float* out) {
  EMU_DYNAMIC_SHARED(float, s);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

// One thread of one block fails while the others wait at a barrier.
__global__ void throwing_kernel(int* out, int bad_block, int bad_thread) {
  const int t = threadIdx.x;
  if (int(blockIdx.x) == bad_block && t == bad_thread) {
#if defined(__CUDACC__)
    __trap();
#else
    throw std::runtime_error("boom from a kernel");
#endif
  }
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = t;
}

__global__ void trap_kernel(int* out) {
  if (threadIdx.x == 7) __trap();
  out[threadIdx.x] = 1;
}

}  // namespace

namespace emu_test {

void neighbour_copy(const float* in, float* out, int blocks, bool with_barrier, cudaStream_t stream) {
  if (with_barrier) {
    launch(neighbour_kernel<true>, blocks, kBlock, 0, stream, in, out);
  } else {
    launch(neighbour_kernel<false>, blocks, kBlock, 0, stream, in, out);
  }
}

void divergent_barrier(int* out, cudaStream_t stream) { launch(divergent_barrier_kernel, 1, 32, 0, stream, out); }

void warp_deadlock(float* out, cudaStream_t stream) { launch(warp_deadlock_kernel, 1, 32, 0, stream, out); }

void wrong_mask(float* out, cudaStream_t stream) { launch(wrong_mask_kernel, 1, 32, 0, stream, out); }

void early_return(const float* in, float* out, int n, cudaStream_t stream) {
  launch(early_return_kernel, 1, 64, 0, stream, in, out, n);
}

void smem_write(float* out, int count, int index, cudaStream_t stream) {
  launch(smem_write_kernel, 1, 64, count * sizeof(float), stream, out, count, index);
}

void uninitialised_smem(float* out, int blocks, cudaStream_t stream) {
  launch(uninitialised_smem_kernel, blocks, 64, 64 * sizeof(float), stream, out);
}

void throwing(int* out, int blocks, int bad_block, int bad_thread, cudaStream_t stream) {
  launch(throwing_kernel, blocks, 64, 0, stream, out, bad_block, bad_thread);
}

void trap(int* out, cudaStream_t stream) { launch(trap_kernel, 1, 32, 0, stream, out); }

}  // namespace emu_test
