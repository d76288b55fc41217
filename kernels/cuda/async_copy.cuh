// Asynchronous global-to-shared copies (sm_80's cp.async), one signature for both builds: inline PTX
// under nvcc, the emulator's model (cuda_emu/emu_async_copy.hpp) in the emulator build.
//
//   copy_async_16(dst, src, src_bytes)  16 bytes to shared dst from global src: the first src_bytes
//                                       (0 or 16) of src, zeros past them; both 16-byte aligned
//                                       cp.async.cg.shared.global [dst], [src], 16, src_bytes
//   copy_async_commit()                 the copies issued since the last commit become a group
//                                       cp.async.commit_group
//   copy_async_wait<N>()                every group but the N most recent has landed in shared memory
//                                       cp.async.wait_group N
//
// A copy lands only for the thread that waits; other threads see it after that wait and a
// __syncthreads(). The copy goes around the registers and (.cg) the L1, so a thread issues a
// tile's loads and goes on computing while they are in flight.
//
// Architectures: on sm_80 and newer these are the instructions; older targets (sm_61, sm_75) have
// none, and there copy_async_16 is a plain 16-byte load and store and the others do nothing, so one
// kernel source serves both (its waits and barriers then order nothing that needs it). The
// emulator does the same by the architecture it emulates. DEFINE_MMA_TARGET_ARCH (kernels/cuda/
// mma.cuh) takes the place of __CUDA_ARCH__ here too.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_compat.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

#if defined(__CUDACC__)

#if defined(__CUDA_ARCH__) && defined(DEFINE_MMA_TARGET_ARCH)
#define DEFINE_COPY_ASYNC_ARCH DEFINE_MMA_TARGET_ARCH
#elif defined(__CUDA_ARCH__)
#define DEFINE_COPY_ASYNC_ARCH __CUDA_ARCH__
#endif
#if defined(DEFINE_COPY_ASYNC_ARCH) && DEFINE_COPY_ASYNC_ARCH >= 800
#define DEFINE_COPY_ASYNC_SM80 1
#endif

__device__ __forceinline__ void copy_async_16(void* dst, const void* src, int src_bytes) {
#if defined(DEFINE_COPY_ASYNC_SM80)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src), "r"(src_bytes) : "memory");
#else
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (src_bytes == 16) v = *static_cast<const uint4*>(src);
  *static_cast<uint4*>(dst) = v;
#endif
}

__device__ __forceinline__ void copy_async_commit() {
#if defined(DEFINE_COPY_ASYNC_SM80)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void copy_async_wait() {
#if defined(DEFINE_COPY_ASYNC_SM80)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

#undef DEFINE_COPY_ASYNC_SM80
#undef DEFINE_COPY_ASYNC_ARCH

#else  // the emulator build: the call site (file, line) goes to the emulator's diagnostics

__device__ __forceinline__ void copy_async_16(void* dst, const void* src, int src_bytes,
                                              const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::cuda_emu::cp_async(dst, src, 16, static_cast<unsigned>(src_bytes), file, line);
}
__device__ __forceinline__ void copy_async_commit() { ::cuda_emu::cp_async_commit(); }
template <int N>
__device__ __forceinline__ void copy_async_wait() {
  ::cuda_emu::cp_async_wait(N);
}

#endif

}  // namespace define::kernels::DEFINE_CUDA_NS
