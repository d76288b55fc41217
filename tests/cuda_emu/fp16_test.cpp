// The emulator's cuda_fp16.h / cuda_bf16.h types (cuda_emu/emu_fp16.hpp): CUDA's layout, the
// conversions bit-exact with the host storage types (which tests/core/float16_test.cpp checks
// against F16C), the pair types, the arithmetic intrinsics' single rounding, and 16-bit values
// through warp shuffles lane by lane.
#include <cstdint>
#include <vector>

#include "core/float16.h"
#include "emu_test_support.hpp"

using emu_test::DeviceBuffer;

namespace {

// Lane i receives lane (i ^ 1)'s pair, then lane (i + 3) % 32's half, as a warp does on a GPU.
void shuffle_kernel(const __half2* in, __half2* xored, __half* rotated, const __nv_bfloat16* bin,
                    __nv_bfloat16* bdown) {
  const unsigned lane = threadIdx.x;
  xored[lane] = __shfl_xor_sync(0xffffffffu, in[lane], 1);
  rotated[lane] = __shfl_sync(0xffffffffu, in[lane].x, static_cast<int>((lane + 3) % 32));
  bdown[lane] = __shfl_down_sync(0xffffffffu, bin[lane], 2);
}

}  // namespace

TEST_CASE("emulator fp16: layout and conversions as CUDA's", "[emu][float16]") {
  static_assert(sizeof(__half) == 2 && alignof(__half) == 2 && sizeof(__half2) == 4 && alignof(__half2) == 4);
  static_assert(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4);
  std::int64_t mismatches = 0;
  for (std::uint32_t b = 0; b <= 0xFFFF; b += 1) {
    const auto u = static_cast<std::uint16_t>(b);
    const float h = __half2float(__ushort_as_half(u)), bf = __bfloat162float(__ushort_as_bfloat16(u));
    const float host_h = define::Half::from_bits(u), host_bf = define::BFloat16::from_bits(u);
    if (!(h == host_h || (h != h && host_h != host_h))) ++mismatches;
    if (!(bf == host_bf || (bf != bf && host_bf != host_bf))) ++mismatches;
    // Narrowing what was widened gives the value back (NaN: the canonical one).
    if (h == h && __half_as_ushort(__float2half_rn(h)) != u) ++mismatches;
    if (bf == bf && __bfloat16_as_ushort(__float2bfloat16_rn(bf)) != u) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(__half_as_ushort(__float2half_rn(1.0f + 0x1p-11f)) == 0x3C00);  // tie to even
  CHECK(__half_as_ushort(__double2half(1.0 + 0x1p-11 + 0x1p-40)) == 0x3C01);  // one rounding from double
  CHECK(__half_as_ushort(__float2half_rn(0.0f / 0.0f)) == 0x7FFF);
  CHECK(__bfloat16_as_ushort(__float2bfloat16(1.0f + 0x1p-8f + 0x1p-20f)) == 0x3F81);
  const __half2 p = __floats2half2_rn(1.5f, -2.0f);
  CHECK(__low2float(p) == 1.5f);
  CHECK(__high2float(p) == -2.0f);
  const float2 f = __half22float2(__float22half2_rn(make_float2(0.1f, 3.0f)));
  CHECK(f.x == static_cast<float>(define::Half(0.1f)));
  CHECK(f.y == 3.0f);
  const __nv_bfloat162 q = __floats2bfloat162_rn(0.1f, -0.5f);
  CHECK(__low2float(q) == static_cast<float>(define::BFloat16(0.1f)));
  CHECK(__bfloat1622float2(q).y == -0.5f);
  CHECK(__hisnan(__ushort_as_half(0x7E00)));
  CHECK(__hisinf(__ushort_as_half(0xFC00)) == -1);
}

TEST_CASE("emulator fp16: __hadd and __hmul round the exact result once", "[emu][float16]") {
  // 2048 + 1 is a tie between 2048 and 2050 in float16: even gives 2048; 2048 + 1.5 rounds up.
  CHECK(__half2float(__hadd(__half(2048.0f), __half(1.0f))) == 2048.0f);
  CHECK(__half2float(__hadd(__half(2048.0f), __half(1.5f))) == 2050.0f);
  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20: above 1 + 2^-9 by less than half an ulp.
  const __half x = __ushort_as_half(0x3C01);
  CHECK(__half_as_ushort(__hmul(x, x)) == 0x3C02);
  const __half2 s = __hadd2(__floats2half2_rn(1, 2), __floats2half2_rn(0.5f, 0.25f));
  CHECK(__low2float(s) == 1.5f);
  CHECK(__high2float(s) == 2.25f);
  CHECK(__bfloat162float(__hsub(__nv_bfloat16(1.0f), __nv_bfloat16(0x1p-9f))) == 1.0f);  // a tie, to even
}

TEST_CASE("emulator fp16: 16-bit values and pairs through warp shuffles", "[emu][float16]") {
  std::vector<__half2> in(32);
  std::vector<__nv_bfloat16> bin(32);
  for (int i = 0; i < 32; ++i) {
    in[i] = __floats2half2_rn(static_cast<float>(i), static_cast<float>(-i) * 0.5f);
    bin[i] = __nv_bfloat16(static_cast<float>(i) + 0.5f);
  }
  DeviceBuffer<__half2> din(in), dxor(32);
  DeviceBuffer<__half> drot(32);
  DeviceBuffer<__nv_bfloat16> dbin(bin), ddown(32);
  launch(shuffle_kernel, 1, 32, 0, nullptr, din.get(), dxor.get(), drot.get(), dbin.get(), ddown.get());
  const std::vector<__half2> x = dxor.download();
  const std::vector<__half> r = drot.download();
  const std::vector<__nv_bfloat16> d = ddown.download();
  for (int i = 0; i < 32; ++i) {
    INFO("lane " << i);
    CHECK(__low2float(x[i]) == static_cast<float>(i ^ 1));
    CHECK(__high2float(x[i]) == static_cast<float>(-(i ^ 1)) * 0.5f);
    CHECK(__half2float(r[i]) == static_cast<float>((i + 3) % 32));
    CHECK(__bfloat162float(d[i]) ==
          static_cast<float>(i + 2 < 32 ? i + 2 : i) + 0.5f);  // down: the top lanes keep theirs
  }
}
