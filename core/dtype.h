// Element types. float32 is the working type; float64 exists for reference computations
// and gradient checks; int32/int64 carry indices; float16 and bfloat16 (core/float16.h) hold the
// activations and weight copies of mixed-precision training (train/precision.h), computed in float
// by every kernel that reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/float16.h"

namespace define {

enum class DType : std::uint8_t { Float32, Float64, Int32, Int64, Float16, BFloat16 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
constexpr bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64; }
constexpr bool is_float16(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace define

// Type dispatch: run BODY with `scalar_t` bound to the C++ type of DTYPE.
// OP names the caller so an unsupported dtype produces "op: dtype float16 is not supported".
#define DEFINE_DISPATCH_CASE(ENUM, TYPE, ...) \
  case ::define::DType::ENUM: {               \
    using scalar_t = TYPE;                    \
    __VA_ARGS__();                            \
    break;                                    \
  }

#define DEFINE_DISPATCH_FLOAT(DTYPE, OP, ...)                                                   \
  do {                                                                                          \
    switch (DTYPE) {                                                                            \
      DEFINE_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                         \
      DEFINE_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                        \
      default:                                                                                  \
        ::define::fail(OP, "dtype {} is not supported (expected float32 or float64)",          \
                       ::define::dtype_name(DTYPE));                                            \
    }                                                                                           \
  } while (0)

// The float types including the 16-bit ones (scalar_t = Half / BFloat16: storage types; the
// kernel computes in compute_t<scalar_t>).
#define DEFINE_DISPATCH_FLOATING(DTYPE, OP, ...)                                                \
  do {                                                                                          \
    switch (DTYPE) {                                                                            \
      DEFINE_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                         \
      DEFINE_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                        \
      DEFINE_DISPATCH_CASE(Float16, ::define::Half, __VA_ARGS__)                                \
      DEFINE_DISPATCH_CASE(BFloat16, ::define::BFloat16, __VA_ARGS__)                           \
      default:                                                                                  \
        ::define::fail(OP, "dtype {} is not supported (expected a floating-point type)",       \
                       ::define::dtype_name(DTYPE));                                            \
    }                                                                                           \
  } while (0)

#define DEFINE_DISPATCH_INDEX(DTYPE, OP, ...)                                                   \
  do {                                                                                          \
    switch (DTYPE) {                                                                            \
      DEFINE_DISPATCH_CASE(Int32, std::int32_t, __VA_ARGS__)                                    \
      DEFINE_DISPATCH_CASE(Int64, std::int64_t, __VA_ARGS__)                                    \
      default:                                                                                  \
        ::define::fail(OP, "index dtype {} is not supported (expected int32 or int64)",        \
                       ::define::dtype_name(DTYPE));                                            \
    }                                                                                           \
  } while (0)

#define DEFINE_DISPATCH_ALL(DTYPE, OP, ...)                                                     \
  do {                                                                                          \
    switch (DTYPE) {                                                                            \
      DEFINE_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                         \
      DEFINE_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                        \
      DEFINE_DISPATCH_CASE(Int32, std::int32_t, __VA_ARGS__)                                    \
      DEFINE_DISPATCH_CASE(Int64, std::int64_t, __VA_ARGS__)                                    \
      DEFINE_DISPATCH_CASE(Float16, ::define::Half, __VA_ARGS__)                                \
      DEFINE_DISPATCH_CASE(BFloat16, ::define::BFloat16, __VA_ARGS__)                           \
      default:                                                                                  \
        ::define::fail(OP, "dtype {} is not supported", ::define::dtype_name(DTYPE));           \
    }                                                                                           \
  } while (0)
