// The one project header a kernel .cu file includes (after its standard headers). It makes the same
// file compile twice:
//   * by nvcc (__CUDACC__): real CUDA; launch() is a thin wrapper over <<<>>>;
//   * by g++ as C++20: against the CPU emulator (cuda_emu/cuda_emu.hpp), for unit tests.
//
// What a kernel file may use in both builds:
//   launch(kernel, grid, block, smem_bytes, stream, args...)   instead of kernel<<<...>>>(args...)
//   EMU_DYNAMIC_SHARED(T, name);                                instead of extern __shared__ T name[];
//   EMU_STATIC_SHARED(name, T[N]);                              instead of __shared__ T name[N];
//   EMU_UNROLL for (...)                                        for #pragma unroll where the loads matter
// plus ordinary CUDA device code: __global__/__device__, threadIdx etc., __syncthreads*,
// *_sync warp intrinsics, atomics, __ldg, fences, the usual math intrinsics.
//
// Host-only C++ that just needs the runtime API (cudaMalloc, cudaError_t, ...) may include it too. In
// the emulator build the CUDA keywords become macros (__shared__ -> thread_local, __noinline__ ->
// __attribute__((noinline)), ...); a header included afterwards that spells
// __attribute__((__noinline__)) then fails to compile. Such files should include this header after
// their standard headers, or `#define CUDA_EMU_NO_KEYWORDS` before including it.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// The namespace the backend's host code is compiled into: define::cuda / define::kernels::cuda under
// nvcc, define::cuda_emu / define::kernels::cuda_emu in the emulator build (kernels/cuda/ops.h).
#define DEFINE_CUDA_NS cuda

// Not in the global namespace, where the emulator's launch() lives (cuda_emu/emu_launch.hpp): a
// kernel's pointer type does not name its namespace, so both builds would instantiate launch<>
// under one mangled name and the linker would keep one of the two (scripts/checks/check-symbols.sh).
namespace define::nvcc {

template <typename... P, typename... A>
inline void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem_bytes, cudaStream_t stream,
                   A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch(): wrong number of kernel arguments");
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<A>(args)...);
}

}  // namespace define::nvcc

using define::nvcc::launch;

// A raw byte array plus a cast: avoids nvcc's "declared with different types" error when several
// template instantiations declare their dynamic shared memory with different element types.
#define EMU_DYNAMIC_SHARED(T, name)                                 \
  extern __shared__ __align__(16) unsigned char name##_emu_raw_[]; \
  T* name = reinterpret_cast<T*>(name##_emu_raw_)

// A bounded kernel's first statement repeats its __launch_bounds__ for the emulator, which checks
// the block size against it (cuda_emu/emu_device.hpp); nvcc has the attribute itself.
#define EMU_CHECK_LAUNCH_BOUNDS(...) static_cast<void>(0)

// The type comes last (variadic) so template arguments with commas need no parentheses.
// (The emulator's version places the array in a per-block arena that it counts, poisons and checks.)
// nvcc aligns a __shared__ array to its element type only; the _ALIGN16 form is for arrays of
// smaller elements that 16-byte vector accesses or ldmatrix rows read from their first element.
#define EMU_STATIC_SHARED(name, ...) __shared__ ::std::type_identity_t<__VA_ARGS__> name
#define EMU_STATIC_SHARED_ALIGN16(name, ...) __shared__ __align__(16)::std::type_identity_t<__VA_ARGS__> name

// Before a loop whose iterations' loads are meant to be in flight together: nvcc's `#pragma unroll`,
// and in the emulator build GCC's (g++ ignores `#pragma unroll`), so that the emulated code issues
// the loop's loads in nvcc's order and the profile counts them in flight together
// (cuda_emu/emu_profile.hpp, KernelProfile::loads_in_flight).
#define EMU_UNROLL _Pragma("unroll")

#else

#include "cuda_emu/cuda_emu.hpp"

#define DEFINE_CUDA_NS cuda_emu

#define EMU_UNROLL _Pragma("GCC unroll 16")

#endif
