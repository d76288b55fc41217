// Device-side reading and writing of the 16-bit formats. Tensors hold define::Half / BFloat16
// (core/float16.h: 2-byte words with CUDA's layout); a kernel reads an element as its compute type
// (float for the 16-bit formats, T itself otherwise) and writes its result back with one rounding,
// through the hardware conversions (__half2float, __float2half_rn, ...; the emulator's are
// bit-exact copies, cuda_emu/emu_fp16.hpp). Arithmetic never happens on a 16-bit value itself:
// nvcc compiles with __CUDA_NO_HALF_OPERATORS__, and the emulator's types have no operators.
#pragma once

#include <cmath>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/float16.h"
#include "kernels/cuda/cuda_compat.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

template <typename T>
__device__ __forceinline__ compute_t<T> load_value(T v) {
  if constexpr (std::is_same_v<T, Half>) return __half2float(__ushort_as_half(v.bits));
  else if constexpr (std::is_same_v<T, BFloat16>) return __bfloat162float(__ushort_as_bfloat16(v.bits));
  else return v;
}

template <typename T>
__device__ __forceinline__ T store_value(compute_t<T> v) {
  if constexpr (std::is_same_v<T, Half>) return Half::from_bits(__half_as_ushort(__float2half_rn(v)));
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(v)));
  else return v;
}

// d as a float rounded "to odd": toward zero, with the last bit set when bits were lost. Rounding
// that float to float16 or bfloat16 (11 or 8 significant bits against float's 24) gives d rounded
// once to the format, through two conversions sm_61 has as instructions; the CUDA library's
// double -> half routines make ptxas spill registers in larger kernels (the column reduction).
__device__ __forceinline__ float float_round_to_odd(double d) {
  const float f = static_cast<float>(d);
  if (static_cast<double>(f) == d) return f;  // exact, or an infinity
  unsigned u = __float_as_uint(f);
  if (::fabs(static_cast<double>(f)) > ::fabs(d)) --u;  // rounded away from zero: one step back
  return __uint_as_float(u | 1u);                       // NaN stays NaN
}

// Any dtype to any dtype, as a cast: a 16-bit result is rounded once from the source value (a
// double directly, not through float).
template <typename D, typename S>
__device__ __forceinline__ D convert_value(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (is_float16_v<D>) {
    if constexpr (is_float16_v<S> || std::is_same_v<S, float>) {
      return store_value<D>(load_value(v));
    } else {
      return store_value<D>(float_round_to_odd(static_cast<double>(v)));
    }
  } else if constexpr (is_float16_v<S>) {
    return static_cast<D>(load_value(v));
  } else {
    return static_cast<D>(v);
  }
}

// Host side: calls f with a value of the storage type of a tensor that either shares the
// activations' type T or, under 16-bit activations, is float32 (master weights, a float cell
// state). `what` names the tensor in the error for any other dtype.
template <typename T, typename F>
void with_same_or_float32(const char* op, const char* what, DType dtype, F&& f) {
  if (dtype == dtype_of_v<T>) return f(T{});
  if constexpr (is_float16_v<T>) {
    if (dtype == DType::Float32) return f(float{});
  }
  fail(op, "{} of dtype {} do not fit {} activations (expected {}{})", what, dtype_name(dtype),
       dtype_name(dtype_of_v<T>), dtype_name(dtype_of_v<T>), is_float16_v<T> ? " or float32" : "");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
