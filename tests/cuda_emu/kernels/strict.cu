// Planted bugs for the stricter emulator (tests/cuda_emu/strict_test.cpp). Each kernel is wrong on a GPU
// in a way the plain forward schedule of the emulator would not show. Compiled by nvcc too.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_compat.cuh"

#include "strict.cuh"

namespace {

// Through a pointer, so the compiler's bounds checks (UBSan in the sanitizer build) do not see it.
__global__ void static_smem_write_kernel(float* out, int index) {
  EMU_STATIC_SHARED(first, float[32]);
  EMU_STATIC_SHARED(second, float[32]);
  const int t = threadIdx.x;
  first[t] = float(t);
  second[t] = -1.f;
  __syncthreads();
  if (t == 0) {
    float* p = &first[0];
    p[index] = 100.f;
  }
  __syncthreads();
  out[t] = first[t] + 0.f * second[t];
}

template <bool kSync>
__global__ void warp_exchange_kernel(const float* __restrict__ in, float* __restrict__ out) {
  EMU_STATIC_SHARED(s, float[32]);
  const int lane = threadIdx.x;
  s[lane] = in[lane];
  if (kSync) __syncwarp();
  out[lane] = s[(lane + 1) & 31];
}

__global__ void chain_blocks_kernel(int* flags) {
  const int b = blockIdx.x;
  if (threadIdx.x == 0) flags[b] = b == 0 ? 1 : flags[b - 1] + 1;
}

template <bool kAtomic>
__global__ void count_global_kernel(int* counter) {
  if (kAtomic) {
    atomicAdd(counter, 1);
  } else {
    *counter += 1;
  }
}

template <bool kAtomic>
__global__ void count_shared_kernel(int* out) {
  EMU_STATIC_SHARED(total, int);
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  if (kAtomic) {
    atomicAdd(&total, 1);
  } else {
    total += 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) *out = total;
}

__global__ void divergent_shuffle_kernel(float* out) {
  float v = float(threadIdx.x);
  if (threadIdx.x % 2 == 0) {
    v = __shfl_xor_sync(0xffffffffu, v, 1); static_assert(__LINE__ == emu_test::kShuffleLineA, "update kShuffleLineA");
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1); static_assert(__LINE__ == emu_test::kShuffleLineB, "update kShuffleLineB");
  }
  out[threadIdx.x] = v;
}

__global__ void shuffle_outside_mask_kernel(float* out) {
  float v = float(threadIdx.x);
  if (threadIdx.x < 16) v = __shfl_sync(0x0000ffffu, v, 20);
  out[threadIdx.x] = v;
}

template <int kStaticFloats>
__global__ void shared_budget_kernel(float* out) {
  EMU_STATIC_SHARED(s, float[kStaticFloats]);
  EMU_DYNAMIC_SHARED(float, d);
  const int t = threadIdx.x;
  s[t] = float(t);
  d[t] = 0.f;
  __syncthreads();
  out[t] = s[t] + d[t];
}

// Declared for at most 64 threads a block (the registers ptxas may then use would not fit more).
__global__ void __launch_bounds__(64) bounded_kernel(int* out) {
  EMU_CHECK_LAUNCH_BOUNDS(64);
  out[threadIdx.x] = int(threadIdx.x);
}

// out[i] = the address modulo 16 of static shared array i: bytes, 16-bit words, floats, doubles,
// float4s, and 16-bit words declared _ALIGN16.
__global__ void static_placement_kernel(unsigned* out) {
  EMU_STATIC_SHARED(bytes, unsigned char[3]);
  EMU_STATIC_SHARED(words, unsigned short[5]);
  EMU_STATIC_SHARED(floats, float[3]);
  EMU_STATIC_SHARED(doubles, double[3]);
  EMU_STATIC_SHARED(vectors, float4[2]);
  EMU_STATIC_SHARED_ALIGN16(aligned_words, unsigned short[5]);
  const void* arrays[6] = {&bytes[0], &words[0], &floats[0], &doubles[0], &vectors[0], &aligned_words[0]};
  if (threadIdx.x < 6) out[threadIdx.x] = unsigned(reinterpret_cast<std::uintptr_t>(arrays[threadIdx.x]) % 16);
}

}  // namespace

namespace emu_test {

void static_placement(unsigned* out, cudaStream_t stream) { launch(static_placement_kernel, 1, 32, 0, stream, out); }

void static_smem_write(float* out, int index, cudaStream_t stream) {
  launch(static_smem_write_kernel, 1, 32, 0, stream, out, index);
}

void warp_exchange(const float* in, float* out, bool with_syncwarp, cudaStream_t stream) {
  if (with_syncwarp) {
    launch(warp_exchange_kernel<true>, 1, 32, 0, stream, in, out);
  } else {
    launch(warp_exchange_kernel<false>, 1, 32, 0, stream, in, out);
  }
}

void chain_blocks(int* flags, int blocks, cudaStream_t stream) { launch(chain_blocks_kernel, blocks, 32, 0, stream, flags); }

void count_global(int* counter, int threads, bool atomic, cudaStream_t stream) {
  if (atomic) {
    launch(count_global_kernel<true>, 1, threads, 0, stream, counter);
  } else {
    launch(count_global_kernel<false>, 1, threads, 0, stream, counter);
  }
}

void count_shared(int* out, int threads, bool atomic, cudaStream_t stream) {
  if (atomic) {
    launch(count_shared_kernel<true>, 1, threads, 0, stream, out);
  } else {
    launch(count_shared_kernel<false>, 1, threads, 0, stream, out);
  }
}

void shared_budget(float* out, bool large_static, unsigned dynamic_bytes, cudaStream_t stream) {
  if (large_static) {
    launch(shared_budget_kernel<8192>, 1, 32, dynamic_bytes, stream, out);
  } else {
    launch(shared_budget_kernel<64>, 1, 32, dynamic_bytes, stream, out);
  }
}

int shared_budget_optin(int bytes) {
  return int(cudaFuncSetAttribute(shared_budget_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

void bounded(int* out, int threads, cudaStream_t stream) { launch(bounded_kernel, 1, threads, 0, stream, out); }

void divergent_shuffle(float* out, cudaStream_t stream) { launch(divergent_shuffle_kernel, 1, 32, 0, stream, out); }

void shuffle_outside_mask(float* out, cudaStream_t stream) {
  launch(shuffle_outside_mask_kernel, 1, 32, 0, stream, out);
}

}  // namespace emu_test

#if !defined(__CUDACC__)
namespace emu_test {
bool race_instrumented() { return cuda_emu::detail::kRaceHooks; }
}  // namespace emu_test
#endif
