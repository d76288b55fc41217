// cuda_emu: runs CUDA kernels on the CPU, so the same .cu file that nvcc compiles for the GPU can be
// compiled by g++ (as C++20) and unit-tested here. Header-only; link boost_context and pthread.
// What it emulates, how to use it and its limits: cuda_emu/README.md. In short:
//   * every CUDA thread is a fiber; blocks run in parallel on a small pool of OS threads;
//   * __syncthreads() is a barrier; warp intrinsics are barriers among the lanes of one warp;
//   * static shared memory goes through EMU_STATIC_SHARED(name, T[N]) (a counted, checked per-block
//     arena; a plain __shared__ still compiles, as thread_local, unchecked); dynamic shared memory
//     through EMU_DYNAMIC_SHARED(T, name);
//   * kernels are launched with launch(kernel, grid, block, smem_bytes, stream, args...);
//   * debug aids: CUDA_EMU_SCHEDULE=forward|reverse|random[:seed]|race[:seed] (thread and block
//     order; race also switches threads at memory accesses, emu_race.hpp), CUDA_EMU_DEBUG=1
//     (NaN-filled shared memory), CUDA_EMU_STRICT=1, CUDA_EMU_ARCH (per-block limits of sm_61 by
//     default), divergent-barrier, divergent-warp-collective and warp-deadlock detection, guard
//     pages and canaries, blocks larger than a kernel's __launch_bounds__ (EMU_CHECK_LAUNCH_BOUNDS);
//     kernel failures come back from launch() as cuda_emu::kernel_error;
//   * the warp-level matrix instructions (mma.sync, ldmatrix) behind kernels/cuda/mma.cuh are warp
//     collectives with the PTX ISA's fragment layouts (emu_mma.hpp); sm_80's asynchronous copies
//     behind kernels/cuda/async_copy.cuh land at their wait (emu_async_copy.hpp).
//
// Kernel files include their standard headers first and then kernels/cuda/cuda_compat.cuh, which
// includes this header in the emulator build.
#pragma once

// Every standard and library header the emulator needs comes before the keyword macros below:
// several (glibc's sys/cdefs.h, libstdc++'s shared_ptr_base.h, boost/config) spell
// __attribute__((__noinline__)) and break once __noinline__ is a macro.
// In dependency order (each part uses the ones above it), which include sorting must not change.
// clang-format off
#include "cuda_emu/emu_types.hpp"
#include "cuda_emu/emu_fp16.hpp"
#include "cuda_emu/emu_fiber.hpp"
#include "cuda_emu/emu_runner.hpp"
#include "cuda_emu/emu_memory.hpp"
#include "cuda_emu/emu_stream.hpp"
#include "cuda_emu/emu_launch.hpp"
#include "cuda_emu/emu_device.hpp"
#include "cuda_emu/emu_mma.hpp"
#include "cuda_emu/emu_async_copy.hpp"
#include "cuda_emu/emu_runtime.hpp"
#include "cuda_emu/emu_race.hpp"
// clang-format on

// Tells kernel code (rarely needed) that it runs in the emulator. __CUDACC__ and __CUDA_ARCH__
// stay undefined.
#define CUDA_EMU 1

#ifndef CUDA_EMU_NO_KEYWORDS
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __shared__ thread_local
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __noinline__ __attribute__((noinline))  // last, see above
#endif
