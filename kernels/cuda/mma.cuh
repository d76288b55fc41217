// The warp-level matrix instructions of the tensor-core kernels, one signature for both builds:
// inline PTX under nvcc, the emulator's warp collectives (cuda_emu/emu_mma.hpp) in the emulator
// build, with the PTX ISA's fragment layouts in both.
//
//   mma_m16n8k8_f16_f32    D(16x8) = A(16x8) * B(8x8) + C     sm_75+  mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32
//   mma_m16n8k8_bf16_f32   the same with bfloat16 inputs      sm_80+
//   mma_m16n8k16_f16_f32   D(16x8) = A(16x16) * B(16x8) + C   sm_80+  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
//   mma_m16n8k16_bf16_f32  the same with bfloat16 inputs      sm_80+
//   ldmatrix_x1 / _x2 / _x4 and ldmatrix_x1_trans / ...       sm_75+
//   ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
//
// Every lane of the warp must execute the same call (the instructions are .sync.aligned: no
// divergence, no lane returned before). A 32-bit register holds two 16-bit elements, the lower
// index in the low half (mma_pack). With groupID = lane >> 2 and threadID_in_group = lane % 4
// (PTX ISA, "Matrix Fragments for mma.m16n8k8" / "... m16n8k16 with floating point type"):
//   A (row-major 16 x K): register r holds (row, col), (row, col + 1) with
//        row = groupID + 8 * (r & 1), col = 2 * threadID_in_group + 8 * (r >> 1)     (r < K / 4)
//   B (K x 8, "col"):     register r holds (row, col), (row + 1, col) with
//        row = 2 * threadID_in_group + 8 * r, col = groupID                         (r < K / 8)
//   C, D (16 x 8, float): element i is (groupID + 8 * (i >> 1), 2 * threadID_in_group + (i & 1)).
// d may be the same array as c (accumulation in place).
//
// ldmatrix_xN(r, row): lane 8 * i + j gives the shared-memory address of row j of matrix i (eight
// 16-bit elements, 16 bytes, 16-byte aligned), for lanes 0-7 (x1), 0-15 (x2) or all 32 (x4); on
// sm_75 every lane's address must be a valid one, so lanes past those usually repeat a lower
// lane's. Register i of lane l receives elements (l / 4, 2 * (l % 4)) and (l / 4, 2 * (l % 4) + 1)
// of matrix i; the _trans forms receive (2 * (l % 4), l / 4) and (2 * (l % 4) + 1, l / 4), i.e. the
// fragment of the transposed matrix. So ldmatrix_x4 of a row-major 16x16 tile (lane l: row l % 16,
// column 8 * (l / 16)) is the A fragment of m16n8k16; ldmatrix_x2_trans of a row-major 16x8 B
// (lane l: row l % 16) is its B fragment; ldmatrix_x2 of B stored transposed (8 rows n of 16 k:
// lane l: row l % 8, column 8 * ((l / 8) % 2)) is too.
//
// Architectures. Under nvcc each wrapper is compiled for every target of the build, so a kernel
// written for sm_80 is compiled for sm_75 too; there a wrapper whose instruction the target lacks
// compiles to a printf naming the instruction and the two architectures, then __trap() (the
// launch fails with cudaErrorLaunchFailure). Host code must choose the kernel by the device's
// compute capability so that this never runs. The emulator fails such a call the same way when
// CUDA_EMU_ARCH is older than the instruction (its default, sm_61, has none of them). Defining
// DEFINE_MMA_TARGET_ARCH (as __CUDA_ARCH__: 610) compiles every wrapper for that architecture
// instead, for PTX generated for a newer one but assembled for it (see below).
//
// Ordering: the ldmatrix asm does not clobber "memory" (as CUTLASS's does not): shared-memory
// stores by other lanes must be ordered before it by __syncwarp() / __syncthreads(), which any
// exchange between lanes needs anyway (the emulator's lanes read their rows when they arrive).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/cuda_compat.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

#if defined(__CUDACC__)

// The architecture the wrappers compile for: __CUDA_ARCH__, unless DEFINE_MMA_TARGET_ARCH (e.g.
// 610) says the PTX will be assembled for an older one than it was generated for (the sm_61 rows
// of scripts/checks/check-ptxas.sh: PTX for compute_75, assembled by CUDA 12's ptxas for sm_61).
#if defined(__CUDA_ARCH__) && defined(DEFINE_MMA_TARGET_ARCH)
#define DEFINE_MMA_ARCH DEFINE_MMA_TARGET_ARCH
#elif defined(__CUDA_ARCH__)
#define DEFINE_MMA_ARCH __CUDA_ARCH__
#endif

namespace mma_detail {
// The target lacks the instruction: say so and trap (see the header comment).
inline __device__ __noinline__ void unsupported(const char* instruction, int needed) {
#if defined(DEFINE_MMA_ARCH)
  printf("define: %s needs sm_%d or newer; this kernel was compiled for sm_%d\n", instruction, needed,
         DEFINE_MMA_ARCH / 10);
#endif
  __trap();
}
}  // namespace mma_detail

#if defined(DEFINE_MMA_ARCH) && DEFINE_MMA_ARCH >= 750
#define DEFINE_MMA_SM75 1
#endif
#if defined(DEFINE_MMA_ARCH) && DEFINE_MMA_ARCH >= 800
#define DEFINE_MMA_SM80 1
#endif

__device__ __forceinline__ void mma_m16n8k8_f16_f32(float (&d)[4], const std::uint32_t (&a)[2],
                                                    const std::uint32_t (&b)[1], const float (&c)[4]) {
#if defined(DEFINE_MMA_SM75)
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  (void)d, (void)a, (void)b, (void)c;
  mma_detail::unsupported("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 75);
#endif
}

__device__ __forceinline__ void mma_m16n8k8_bf16_f32(float (&d)[4], const std::uint32_t (&a)[2],
                                                     const std::uint32_t (&b)[1], const float (&c)[4]) {
#if defined(DEFINE_MMA_SM80)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  (void)d, (void)a, (void)b, (void)c;
  mma_detail::unsupported("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", 80);
#endif
}

__device__ __forceinline__ void mma_m16n8k16_f16_f32(float (&d)[4], const std::uint32_t (&a)[4],
                                                     const std::uint32_t (&b)[2], const float (&c)[4]) {
#if defined(DEFINE_MMA_SM80)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  (void)d, (void)a, (void)b, (void)c;
  mma_detail::unsupported("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 80);
#endif
}

__device__ __forceinline__ void mma_m16n8k16_bf16_f32(float (&d)[4], const std::uint32_t (&a)[4],
                                                      const std::uint32_t (&b)[2], const float (&c)[4]) {
#if defined(DEFINE_MMA_SM80)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  (void)d, (void)a, (void)b, (void)c;
  mma_detail::unsupported("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 80);
#endif
}

// ldmatrix: `row` is this lane's row address, a generic pointer into shared memory.
#if defined(DEFINE_MMA_SM75)
#define DEFINE_LDMATRIX(name, instruction, n, regs, outs)                          \
  __device__ __forceinline__ void name(std::uint32_t(&r)[n], const void* row) {    \
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row)); \
    asm volatile(instruction " " regs ", [%" #n "];\n" : outs : "r"(address));     \
  }
#else
#define DEFINE_LDMATRIX(name, instruction, n, regs, outs)                       \
  __device__ __forceinline__ void name(std::uint32_t(&r)[n], const void* row) { \
    (void)r, (void)row;                                                         \
    mma_detail::unsupported(instruction, 75);                                   \
  }
#endif
#define DEFINE_LDMATRIX_OUT1 "=r"(r[0])
#define DEFINE_LDMATRIX_OUT2 "=r"(r[0]), "=r"(r[1])
#define DEFINE_LDMATRIX_OUT4 "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
DEFINE_LDMATRIX(ldmatrix_x1, "ldmatrix.sync.aligned.m8n8.x1.shared.b16", 1, "{%0}", DEFINE_LDMATRIX_OUT1)
DEFINE_LDMATRIX(ldmatrix_x2, "ldmatrix.sync.aligned.m8n8.x2.shared.b16", 2, "{%0, %1}", DEFINE_LDMATRIX_OUT2)
DEFINE_LDMATRIX(ldmatrix_x4, "ldmatrix.sync.aligned.m8n8.x4.shared.b16", 4, "{%0, %1, %2, %3}", DEFINE_LDMATRIX_OUT4)
DEFINE_LDMATRIX(ldmatrix_x1_trans, "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", 1, "{%0}", DEFINE_LDMATRIX_OUT1)
DEFINE_LDMATRIX(ldmatrix_x2_trans, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", 2, "{%0, %1}",
                DEFINE_LDMATRIX_OUT2)
DEFINE_LDMATRIX(ldmatrix_x4_trans, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", 4, "{%0, %1, %2, %3}",
                DEFINE_LDMATRIX_OUT4)
#undef DEFINE_LDMATRIX_OUT1
#undef DEFINE_LDMATRIX_OUT2
#undef DEFINE_LDMATRIX_OUT4
#undef DEFINE_LDMATRIX
#undef DEFINE_MMA_SM75
#undef DEFINE_MMA_SM80
#undef DEFINE_MMA_ARCH

// Two 16-bit values as one fragment register: v.x in the low half.
__device__ __forceinline__ std::uint32_t mma_pack(__half2 v) { return *reinterpret_cast<const std::uint32_t*>(&v); }
__device__ __forceinline__ std::uint32_t mma_pack(__nv_bfloat162 v) {
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

#else  // the emulator build: the call site (file, line) goes to the emulator's diagnostics

__device__ __forceinline__ void mma_m16n8k8_f16_f32(float (&d)[4], const std::uint32_t (&a)[2],
                                                    const std::uint32_t (&b)[1], const float (&c)[4],
                                                    const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::cuda_emu::mma_m16n8k8_f16_f32(d, a, b, c, file, line);
}
__device__ __forceinline__ void mma_m16n8k8_bf16_f32(float (&d)[4], const std::uint32_t (&a)[2],
                                                     const std::uint32_t (&b)[1], const float (&c)[4],
                                                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::cuda_emu::mma_m16n8k8_bf16_f32(d, a, b, c, file, line);
}
__device__ __forceinline__ void mma_m16n8k16_f16_f32(float (&d)[4], const std::uint32_t (&a)[4],
                                                     const std::uint32_t (&b)[2], const float (&c)[4],
                                                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::cuda_emu::mma_m16n8k16_f16_f32(d, a, b, c, file, line);
}
__device__ __forceinline__ void mma_m16n8k16_bf16_f32(float (&d)[4], const std::uint32_t (&a)[4],
                                                      const std::uint32_t (&b)[2], const float (&c)[4],
                                                      const char* file = __builtin_FILE(),
                                                      int line = __builtin_LINE()) {
  ::cuda_emu::mma_m16n8k16_bf16_f32(d, a, b, c, file, line);
}

#define DEFINE_LDMATRIX(name, n, trans)                                                                            \
  __device__ __forceinline__ void name(std::uint32_t(&r)[n], const void* row, const char* file = __builtin_FILE(), \
                                       int line = __builtin_LINE()) {                                              \
    ::cuda_emu::ldmatrix_m8n8_b16<n, trans>(r, row, file, line);                                                   \
  }
DEFINE_LDMATRIX(ldmatrix_x1, 1, false)
DEFINE_LDMATRIX(ldmatrix_x2, 2, false)
DEFINE_LDMATRIX(ldmatrix_x4, 4, false)
DEFINE_LDMATRIX(ldmatrix_x1_trans, 1, true)
DEFINE_LDMATRIX(ldmatrix_x2_trans, 2, true)
DEFINE_LDMATRIX(ldmatrix_x4_trans, 4, true)
#undef DEFINE_LDMATRIX

__device__ __forceinline__ std::uint32_t mma_pack(__half2 v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}
__device__ __forceinline__ std::uint32_t mma_pack(__nv_bfloat162 v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

#endif

// Two raw 16-bit patterns as one fragment register: lo in the low half.
__device__ __forceinline__ std::uint32_t mma_pack(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

}  // namespace define::kernels::DEFINE_CUDA_NS
