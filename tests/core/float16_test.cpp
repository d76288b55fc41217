// The 16-bit storage types (core/float16.h) against independent conversions: the CPU's F16C
// instructions for float16 (every one of the 65,536 values widened, and float32 values across the
// whole range narrowed), the well-known add-and-truncate formula for bfloat16, and hand-picked
// cases for what neither covers: rounding a double once (not through float), overflow, NaN.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cpuid.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/factory.h"
#include "core/float16.h"
#include "kernels/copy.h"
#include "support/common.h"

namespace define {
namespace {

// CPUID leaf 1, ECX bit 29 (GCC and clang alike; clang 14's __builtin_cpu_supports has no "f16c").
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

__attribute__((target("f16c"))) float f16c_widen(std::uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) std::uint16_t f16c_narrow(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

// bfloat16 by the usual integer formula: add 0x7FFF plus the kept part's lowest bit, truncate.
std::uint16_t bf16_by_formula(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return 0x7FFF;
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

bool same_bits_or_both_nan(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

TEST_CASE("float16: every value widens as F16C widens it", "[float16]") {
  if (!has_f16c()) DEFINE_SKIP_TEST("this CPU has no F16C");
  std::int64_t mismatches = 0;
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float mine = Half::from_bits(static_cast<std::uint16_t>(b));
    if (!same_bits_or_both_nan(mine, f16c_widen(static_cast<std::uint16_t>(b)))) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("float16: float32 values across the range round as F16C rounds them", "[float16]") {
  if (!has_f16c()) DEFINE_SKIP_TEST("this CPU has no F16C");
  // Every 97th bit pattern (44 M values: normals, subnormals, ties, overflow, both signs), NaNs
  // excepted (F16C keeps their payload; CUDA and define give the canonical 0x7FFF).
  std::int64_t mismatches = 0, checked = 0;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 97) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (std::isnan(f)) continue;
    ++checked;
    if (Half(f).bits != f16c_narrow(f)) ++mismatches;
  }
  CHECK(checked > 40'000'000);
  CHECK(mismatches == 0);
  // Exact ties around 1: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 and goes to the even one.
  CHECK(Half(1.0f + 0x1p-11f).bits == 0x3C00);
  CHECK(Half(1.0f + 3 * 0x1p-11f).bits == 0x3C02);
}

TEST_CASE("bfloat16: float32 values round as the add-and-truncate formula gives", "[float16]") {
  std::int64_t mismatches = 0;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 89) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (BFloat16(f).bits != bf16_by_formula(f)) ++mismatches;
    if (!std::isnan(f) &&
        static_cast<float>(BFloat16(f)) != std::bit_cast<float>(std::uint32_t{BFloat16(f).bits} << 16))
      ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("float16 and bfloat16: doubles round once, not through float", "[float16]") {
  // 1 + 2^-11 + 2^-40 is above the tie: one rounding gives 1 + 2^-10 (0x3C01). Through float it
  // first becomes the tie 1 + 2^-11 (float keeps 23 bits), which then rounds to even: 1 (0x3C00).
  const double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(Half(above_tie).bits == 0x3C01);
  CHECK(Half(static_cast<float>(above_tie)).bits == 0x3C00);
  const double bf_above_tie = 1.0 + 0x1p-8 + 0x1p-40;
  CHECK(BFloat16(bf_above_tie).bits == 0x3F81);
  CHECK(BFloat16(static_cast<float>(bf_above_tie)).bits == 0x3F80);
}

TEST_CASE("float16 and bfloat16: overflow, subnormals, signed zero and NaN", "[float16]") {
  CHECK(Half(65504.0).bits == 0x7BFF);         // the largest finite value
  CHECK(Half(65519.99).bits == 0x7BFF);        // below the rounding boundary 65520
  CHECK(Half(65520.0).bits == 0x7C00);         // the tie rounds to even: infinity
  CHECK(Half(-1e10).bits == 0xFC00);
  CHECK(Half(0x1p-24).bits == 0x0001);         // the smallest subnormal
  CHECK(Half(0x1p-25).bits == 0x0000);         // half of it: the tie goes to even (zero)
  CHECK(Half(0x1.8p-25).bits == 0x0001);       // above the tie
  CHECK(Half(0x1p-14 - 0x1p-25).bits == 0x0400);  // rounds up into the smallest normal
  CHECK(Half(-0.0).bits == 0x8000);
  CHECK(Half(std::numeric_limits<double>::quiet_NaN()).bits == 0x7FFF);
  CHECK(BFloat16(std::numeric_limits<float>::quiet_NaN()).bits == 0x7FFF);
  CHECK(BFloat16(3.39e38).bits == 0x7F7F);       // bfloat16's largest finite value is 3.3895e38
  CHECK(BFloat16(3.4e38).bits == 0x7F80);        // past its rounding boundary 3.3962e38
  CHECK(BFloat16(3.4028235e38).bits == 0x7F80);  // float's max rounds up past bfloat16's
  CHECK(static_cast<float>(Half::from_bits(0x7BFF)) == 65504.0f);
  CHECK(static_cast<float>(Half::from_bits(0x0001)) == 0x1p-24f);
  CHECK(std::isinf(static_cast<float>(Half::from_bits(0x7C00))));
  CHECK(add_stored(Half(1.0), Half(0x1p-11)).bits == 0x3C00);  // the exact sum's tie, to even
  CHECK(add_stored(Half(1.0), Half(0x1.8p-11)).bits == 0x3C01);
}

TEST_CASE("float16 tensors: factories, item, printing and casts", "[float16][tensor]") {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    const Tensor t = full({3}, 1.5, {.dtype = dt});
    CHECK(t.dtype() == dt);
    CHECK(dtype_size(t.dtype()) == 2);
    CHECK(full({}, 1.5, {.dtype = dt}).item_double() == 1.5);
    CHECK(t.str() == fmt::format("Tensor([3] {} cpu [1.5, 1.5, 1.5])", dtype_name(dt)));
    // float32 -> 16 bits rounds once; back to float64 is exact.
    const Tensor x = from_vector<float>({1.0f + 0x1p-12f, -2.75f, 1e-9f, 70000.0f}, {4});
    const Tensor h = kernels::cast(x, dt);
    const std::vector<double> back = kernels::cast(h, DType::Float64).to_vector<double>();
    const double eps = dt == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
    CHECK(back[0] == 1.0);  // 2^-12 is below half an ulp of 1 in both formats
    CHECK(back[1] == -2.75);
    CHECK(std::abs(back[2] - 1e-9) <= (dt == DType::Float16 ? 1e-9 : 1e-9 * eps));  // float16: flushes to 0
    if (dt == DType::Float16) CHECK(std::isinf(back[3]));
    else CHECK(std::abs(back[3] - 70000.0) <= 70000.0 * eps);
  }
}

}  // namespace
}  // namespace define
