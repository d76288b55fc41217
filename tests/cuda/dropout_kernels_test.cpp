// CUDA dropout kernel (kernels/cuda/dropout.cu) on the emulated device: the output equals the CPU
// fast path and the reference bit for bit, for any (seed, offset, p, size), including sizes that
// are not multiples of 4 and offsets that split a Philox block.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/factory.h"
#include "core/philox.h"
#include "support/emulated_device.h"
#include "kernels/backend.h"
#include "kernels/devices.h"
#include "kernels/dropout.h"

using namespace define;
using test::kernel_test_device;
using test::to_test_device;

namespace {

// Bit patterns of a float tensor, so -0.0 vs 0.0 or any rounding difference shows.
std::vector<std::uint32_t> bits32(const Tensor& t) {
  std::vector<std::uint32_t> out;
  for (float v : t.to_vector<float>()) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    out.push_back(u);
  }
  return out;
}
std::vector<std::uint64_t> bits64(const Tensor& t) {
  std::vector<std::uint64_t> out;
  for (double v : t.to_vector<double>()) {
    std::uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    out.push_back(u);
  }
  return out;
}

struct DropoutCase {
  std::uint64_t seed, offset;
  double p;
  std::int64_t size;
};

}  // namespace

TEST_CASE("cuda dropout: equal bit for bit to the CPU paths", "[cuda][dropout][family:dropout]") {
  REQUIRE(kernels::register_devices().emu);
  const std::vector<DropoutCase> cases = {
      {0, 0, 0.5, 1},
      {7, 0, 0.3, 3},
      {99, 1, 0.25, 5},        // odd offset, size that is not a multiple of 4
      {99, 3, 0.25, 1},        // one element, last lane of its Philox block
      {1234, 6, 0.1, 31},
      {1234, 8, 0.9, 33},
      {0xDEADBEEFCAFEull, 1003, 0.5, 257},
      {42, 5, 0.0, 1023},      // p = 0: everything kept, scale 1
      {42, 4, 0.999, 1025},    // almost everything dropped
      {5, 0x1234567890ull, 0.6, 4097},  // counter above 2^32 words: the block's high half is used
      {3, 4 * 0xFFFFFFFFull - 2, 0.5, 11},  // the Philox block counter crosses 2^32
      {77, 17, 0.37, 100003},  // several grid-stride rounds' worth of blocks
  };
  for (const DropoutCase& c : cases) {
    INFO("seed " << c.seed << ", offset " << c.offset << ", p " << c.p << ", size " << c.size);
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO("dtype " << dtype_name(dtype));
      Generator gen(c.seed + 1);
      const Tensor x = rand_uniform({c.size}, -2, 2, {dtype}, gen);
      const Tensor fast = kernels::dropout_apply(x, c.p, c.seed, c.offset);
      Tensor ref;
      {
        kernels::CpuBackendGuard guard(kernels::Backend::Ref);
        ref = kernels::dropout_apply(x, c.p, c.seed, c.offset);
      }
      const Tensor emu = kernels::dropout_apply(copy_to_device(x, kernel_test_device()), c.p, c.seed, c.offset);
      REQUIRE(emu.device() == kernel_test_device());
      if (dtype == DType::Float32) {
        CHECK(bits32(emu) == bits32(fast));
        CHECK(bits32(emu) == bits32(ref));
      } else {
        CHECK(bits64(emu) == bits64(fast));
        CHECK(bits64(emu) == bits64(ref));
      }
    }
  }
}

TEST_CASE("cuda dropout: a tensor not aligned to four elements takes the element-by-element path, equally",
          "[cuda][dropout][family:dropout]") {
  REQUIRE(kernels::register_devices().emu);
  for (const std::int64_t shift : {1, 2, 3}) {
    INFO("data starts " << shift << " element(s) into its storage");
    Generator gen(11);
    const Tensor whole = rand_uniform({1030}, -2, 2, {DType::Float32}, gen);
    const Tensor x = whole.as_strided({1024}, {1}, shift);  // contiguous, not 16-byte aligned
    Tensor ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = kernels::dropout_apply(x, 0.4, 5, 8);
    }
    const Tensor xe = copy_to_device(whole, kernel_test_device()).as_strided({1024}, {1}, shift);
    const Tensor emu = kernels::dropout_apply(xe, 0.4, 5, 8);
    CHECK(bits32(emu) == bits32(ref));
  }
}

TEST_CASE("cuda dropout: element i keeps x_i exactly when its Philox word says so", "[cuda][dropout][family:dropout]") {
  REQUIRE(kernels::register_devices().emu);
  const std::uint64_t seed = 2024, offset = 13;
  const double p = 0.5;
  const std::int64_t n = 777;
  const Tensor x = ones({n}, {.device = kernel_test_device()});
  const std::vector<float> y = kernels::dropout_apply(x, p, seed, offset).to_vector<float>();
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool keep = philox::u32_to_unit_float(philox::random_u32(seed, offset, static_cast<std::uint64_t>(i))) >= p;
    INFO("element " << i);
    REQUIRE(y[i] == (keep ? 2.0f : 0.0f));
    kept += keep;
  }
  CHECK(kept > n / 3);  // a real mask, not all or nothing
  CHECK(kept < 2 * n / 3);
}

TEST_CASE("cuda dropout: non-contiguous input reads in logical order", "[cuda][dropout][family:dropout]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(9);
  const Tensor base = rand_uniform({37, 29}, -1, 1, {}, gen);
  const Tensor xt = base.as_strided({29, 37}, {1, 29}, 0);  // the transpose, a strided view
  const Tensor fast = kernels::dropout_apply(xt, 0.4, 11, 3);
  const Tensor emu =
      kernels::dropout_apply(copy_to_device(base, kernel_test_device()).as_strided({29, 37}, {1, 29}, 0), 0.4, 11, 3);
  CHECK(emu.shape() == Shape{29, 37});
  CHECK(bits32(emu) == bits32(fast));
}
