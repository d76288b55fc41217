// The 16-bit float types of cuda_fp16.h and cuda_bf16.h: __half, __half2, __nv_bfloat16,
// __nv_bfloat162 (with their _raw forms), the conversions and the intrinsics define's kernels use.
// Layout as in CUDA: a 2-byte word, pairs of 4 bytes aligned to 4, so a kernel's vectorised loads
// and reinterpret_casts mean what they mean on the GPU. Warp shuffles of these types need nothing
// here: __shfl_*_sync move any value of up to 8 bytes (emu_device.hpp).
//
// Conversions are bit-exact with CUDA's: round to nearest, ties to even, from float or double in
// one step; NaN becomes 0x7FFF; widening is exact (the encoding is core/float16.h's, shared with
// the host storage types so a tensor's bytes and a kernel's values agree). The arithmetic
// intrinsics (__hadd, __hmul, ... and their pair forms) compute in double, which holds the exact
// sum or product of two 16-bit values, and round once, as the hardware instructions do.
//
// The types live in namespace cuda_emu and are named globally by using-declarations: their member
// functions then mangle differently from nvcc's own __half in the same binary.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "cuda_emu/emu_types.hpp"

namespace cuda_emu {

struct half_raw {
  unsigned short x;
};
struct bfloat16_raw {
  unsigned short x;
};

struct alignas(2) half {
  unsigned short __x;  // uninitialised by default, as CUDA's (the types stay trivial)
  half() = default;
  constexpr half(half_raw r) : __x(r.x) {}
  half(float f) : __x(define::Half(f).bits) {}
  half(double d) : __x(define::Half(d).bits) {}
  half(int i) : __x(define::Half(i).bits) {}
  constexpr operator half_raw() const { return half_raw{__x}; }
  operator float() const { return define::Half::from_bits(__x); }
};

struct alignas(2) bfloat16 {
  unsigned short __x;  // uninitialised by default, as CUDA's (the types stay trivial)
  bfloat16() = default;
  constexpr bfloat16(bfloat16_raw r) : __x(r.x) {}
  bfloat16(float f) : __x(define::BFloat16(f).bits) {}
  bfloat16(double d) : __x(define::BFloat16(d).bits) {}
  bfloat16(int i) : __x(define::BFloat16(i).bits) {}
  constexpr operator bfloat16_raw() const { return bfloat16_raw{__x}; }
  operator float() const { return define::BFloat16::from_bits(__x); }
};

struct alignas(4) half2 {
  half x, y;
};
struct alignas(4) bfloat162 {
  bfloat16 x, y;
};

static_assert(sizeof(half) == 2 && sizeof(half2) == 4 && alignof(half2) == 4);
static_assert(std::is_trivial_v<half> && std::is_trivial_v<half2> && std::is_trivial_v<bfloat16>,
              "trivial, as CUDA's: shared memory and warp shuffles hold them");
static_assert(sizeof(bfloat16) == 2 && sizeof(bfloat162) == 4 && alignof(bfloat162) == 4);

}  // namespace cuda_emu

using __half_raw = cuda_emu::half_raw;
using __nv_bfloat16_raw = cuda_emu::bfloat16_raw;
using __half = cuda_emu::half;
using __half2 = cuda_emu::half2;
using __nv_bfloat16 = cuda_emu::bfloat16;
using __nv_bfloat162 = cuda_emu::bfloat162;

// ---- Conversions ----
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __float2half(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 h) { return static_cast<float>(h); }

inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }

inline __half2 __halves2half2(__half lo, __half hi) { return __half2{lo, hi}; }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2{__half(lo), __half(hi)}; }
inline __half2 __float2half2_rn(float f) { return __half2{__half(f), __half(f)}; }
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
inline float __low2float(__half2 h) { return __half2float(h.x); }
inline float __high2float(__half2 h) { return __half2float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }

inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162{lo, hi}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __nv_bfloat162{__nv_bfloat16(lo), __nv_bfloat16(hi)};
}
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162{__nv_bfloat16(f), __nv_bfloat16(f)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }

// ---- Arithmetic: exact in double, one rounding ----
namespace cuda_emu::detail {
template <typename H>
inline H round16(double v) {
  return H(v);
}
}  // namespace cuda_emu::detail

#define CUDA_EMU_HALF_BINARY(name, pair_name, H, H2, expr)                                          \
  inline H name(H a, H b) {                                                                         \
    const double x = static_cast<float>(a), y = static_cast<float>(b);                              \
    return cuda_emu::detail::round16<H>(expr);                                                      \
  }                                                                                                 \
  inline H2 pair_name(H2 a, H2 b) { return H2{name(a.x, b.x), name(a.y, b.y)}; }
CUDA_EMU_HALF_BINARY(__hadd, __hadd2, __half, __half2, x + y)
CUDA_EMU_HALF_BINARY(__hsub, __hsub2, __half, __half2, x - y)
CUDA_EMU_HALF_BINARY(__hmul, __hmul2, __half, __half2, x * y)
CUDA_EMU_HALF_BINARY(__hadd, __hadd2, __nv_bfloat16, __nv_bfloat162, x + y)
CUDA_EMU_HALF_BINARY(__hsub, __hsub2, __nv_bfloat16, __nv_bfloat162, x - y)
CUDA_EMU_HALF_BINARY(__hmul, __hmul2, __nv_bfloat16, __nv_bfloat162, x * y)
#undef CUDA_EMU_HALF_BINARY

inline bool __hisnan(__half h) { return (h.__x & 0x7FFF) > 0x7C00; }
inline bool __hisnan(__nv_bfloat16 h) { return (h.__x & 0x7FFF) > 0x7F80; }
inline int __hisinf(__half h) { return h.__x == 0x7C00 ? 1 : (h.__x == 0xFC00 ? -1 : 0); }
inline int __hisinf(__nv_bfloat16 h) { return h.__x == 0x7F80 ? 1 : (h.__x == 0xFF80 ? -1 : 0); }
