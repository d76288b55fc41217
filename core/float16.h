// The two 16-bit float formats as host storage types: IEEE binary16 (`Half`: 1 sign, 5 exponent,
// 10 mantissa bits) and bfloat16 (`BFloat16`: the top 16 bits of a float32: 1, 8, 7). Both are
// plain 2-byte words with CUDA's layout, so a tensor's bytes mean the same on the host, in a
// safetensors file and in a kernel's __half / __nv_bfloat16.
//
// Conversions round to nearest, ties to even, in one step from float or double (a double is not
// rounded to float first: that double rounding would be wrong in rare ties, and the reference
// backend relies on "compute in float64, round once"). Overflow goes to infinity as the format
// requires; NaN becomes the canonical quiet NaN 0x7FFF, as CUDA's __float2half_rn and
// __float2bfloat16 give. Widening to float is exact.
//
// Arithmetic is deliberately absent: a Half converts implicitly to float, but a float never
// silently becomes a Half. Code that stores a result in 16 bits says so (Half(x)), which is where
// the rounding happens.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace define {

namespace float16_bits {

// Rounds the magnitude `mag` (an unsigned fixed-point value with `drop` bits below the kept ones)
// to nearest, ties to even, returning the kept bits (a carry may ripple into the exponent field,
// which is what makes the largest finite value round up to infinity).
constexpr std::uint64_t round_shift(std::uint64_t mag, int drop) {
  if (drop <= 0) return mag << -drop;
  if (drop >= 64) return 0;
  const std::uint64_t kept = mag >> drop;
  const std::uint64_t rest = mag & ((std::uint64_t{1} << drop) - 1);
  const std::uint64_t half = std::uint64_t{1} << (drop - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

// Encodes a double in a binary format with `exp_bits` exponent and `man_bits` mantissa bits,
// rounding once. Works from the double's own bits, so no intermediate rounding can occur.
constexpr std::uint16_t encode(double x, int exp_bits, int man_bits) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 63) << 15);
  const int dexp = static_cast<int>((b >> 52) & 0x7FF);
  const std::uint64_t dman = b & ((std::uint64_t{1} << 52) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  const std::uint16_t inf = static_cast<std::uint16_t>(((1u << exp_bits) - 1) << man_bits);
  if (dexp == 0x7FF) return dman != 0 ? std::uint16_t{0x7FFF} : static_cast<std::uint16_t>(sign | inf);
  if (dexp == 0 && dman == 0) return sign;
  // value = sig * 2^(e - 52) with sig holding the implicit bit (subnormal doubles: no implicit bit).
  const std::uint64_t sig = dexp == 0 ? dman : (dman | (std::uint64_t{1} << 52));
  const int e = dexp == 0 ? -1022 : dexp - 1023;
  int target_exp = e + bias;  // biased exponent of the result if it is normal
  std::uint64_t out;
  if (target_exp >= 1) {
    // Normal: keep man_bits below the implicit bit; the rounded value's implicit bit lands on
    // bit man_bits, and adding (target_exp - 1) << man_bits places the exponent (carry included).
    out = round_shift(sig, 52 - man_bits) + (static_cast<std::uint64_t>(target_exp - 1) << man_bits);
  } else {
    // Subnormal result: the kept bits are the value in units of 2^(1 - bias - man_bits).
    out = round_shift(sig, 52 - man_bits + (1 - target_exp));
  }
  if (out >= inf) return static_cast<std::uint16_t>(sign | inf);
  return static_cast<std::uint16_t>(sign | out);
}

constexpr float decode_half(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1F;
  const std::uint32_t man = h & 0x3FF;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    // Subnormal (or zero): man * 2^-24, exact in float.
    const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

}  // namespace float16_bits

struct Half {
  std::uint16_t bits = 0;
  constexpr Half() = default;
  constexpr explicit Half(double x) : bits(float16_bits::encode(x, 5, 10)) {}
  constexpr explicit Half(float x) : Half(static_cast<double>(x)) {}  // float -> double is exact
  constexpr explicit Half(int x) : Half(static_cast<double>(x)) {}
  constexpr explicit Half(std::int64_t x) : Half(static_cast<double>(x)) {}
  static constexpr Half from_bits(std::uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const { return float16_bits::decode_half(bits); }
  // 2^-10: the spacing of the values in [1, 2).
  static constexpr double epsilon = 0.0009765625;
};

struct BFloat16 {
  std::uint16_t bits = 0;
  constexpr BFloat16() = default;
  constexpr explicit BFloat16(double x) : bits(float16_bits::encode(x, 8, 7)) {}
  constexpr explicit BFloat16(float x) : BFloat16(static_cast<double>(x)) {}
  constexpr explicit BFloat16(int x) : BFloat16(static_cast<double>(x)) {}
  constexpr explicit BFloat16(std::int64_t x) : BFloat16(static_cast<double>(x)) {}
  static constexpr BFloat16 from_bits(std::uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
  // 2^-7.
  static constexpr double epsilon = 0.0078125;
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

template <typename T> inline constexpr bool is_float16_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type a kernel computes in for storage type T: float for the 16-bit formats, T otherwise.
template <typename T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <typename T> using compute_t = typename compute_type<T>::type;

// a + b stored as T; for the 16-bit formats the exact sum (in double, which holds it) rounded once.
// For kernels that move data and add as they go (scatter_add, index_add) on any dtype.
template <typename T>
constexpr T add_stored(T a, T b) {
  if constexpr (is_float16_v<T>) return T(static_cast<double>(a) + static_cast<double>(b));
  else return static_cast<T>(a + b);
}

}  // namespace define
