// CUDA copy kernels (kernels/cuda/copy.cu) on the kernel test device: transposing copies, which go
// through shared-memory tiles, at odd sizes (partial tiles on both edges), with batches of other
// dims, with dtype conversions, and below the tile path's minimum size (the per-element loop),
// each equal to the CPU's copy element for element and bit-identical under every emulator
// schedule; and, on the emulated device, which kernel each takes and that the tiled one moves
// whole sectors on both sides (the profiling mode).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/factory.h"
#include "cuda_emu/emu_profile.hpp"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "support/emulated_device.h"

using namespace define;
using test::check_identical;
using test::kernel_test_device;
using test::run_all_schedules;
using test::to_test_device;

namespace {

// `t` with its dims in the order `perm` (a view).
Tensor permuted(const Tensor& t, const std::vector<int>& perm) {
  Shape shape;
  Strides strides;
  for (const int d : perm) {
    shape.push_back(t.shape()[std::size_t(d)]);
    strides.push_back(t.strides()[std::size_t(d)]);
  }
  return t.as_strided(shape, strides, t.offset());
}

struct Case {
  std::string name;
  Shape shape;
  std::vector<int> perm;
  DType from = DType::Float32, to = DType::Float32;
  bool tiled = true;  // whether the copy goes through the tiles
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"67x45 transposed", {67, 45}, {1, 0}},
      {"1024x33 transposed", {1024, 33}, {1, 0}},
      {"5x40x33 last two swapped", {5, 40, 33}, {0, 2, 1}},
      {"40x3x33 outer and inner swapped", {40, 3, 33}, {2, 1, 0}},
      {"3x4x20x18 (0,3,2,1): inner dim of 4, too short for a tile",
       {3, 4, 20, 18},
       {0, 3, 2, 1},
       DType::Float32,
       DType::Float32,
       false},
      {"3x40x4x36 (0,3,2,1)", {3, 40, 4, 36}, {0, 3, 2, 1}},
      {"float64 -> float32 70x50", {70, 50}, {1, 0}, DType::Float64, DType::Float32},
      {"float32 -> bfloat16 70x50", {70, 50}, {1, 0}, DType::Float32, DType::BFloat16},
      {"float16 -> float32 70x50", {70, 50}, {1, 0}, DType::Float16, DType::Float32},
      {"int64 50x70", {50, 70}, {1, 0}, DType::Int64, DType::Int64},
      {"8x1000 transposed (too short for a tile)", {8, 1000}, {1, 0}, DType::Float32, DType::Float32, false},
      {"1000x8 transposed (too short for a tile)", {1000, 8}, {1, 0}, DType::Float32, DType::Float32, false},
  };
  return c;
}

Tensor source(const Case& c) {
  Generator gen(17);
  const Tensor x = c.from == DType::Int64 ? rand_int(c.shape, 1000, {.dtype = DType::Int64}, gen)
                                          : kernels::cast(rand_uniform(c.shape, -4, 4, {}, gen), c.from);
  return x;
}

// The copy into a fresh contiguous tensor of dtype `to`.
Tensor copied(const Tensor& src_view, DType to) {
  Tensor out = empty(src_view.shape(), {to, src_view.device()});
  kernels::copy_into(out, src_view);
  return out;
}

#if !defined(__SANITIZE_ADDRESS__)
// The one launch of a case's copy on the emulated device, profiled.
::cuda_emu::KernelProfile profiled_copy(const Case& c) {
  const Tensor xd = copy_to_device(source(c), Device::emu());
  ::cuda_emu::profile_start();
  (void)copied(permuted(xd, c.perm), c.to);
  const std::vector<::cuda_emu::KernelProfile> launches = ::cuda_emu::profile_stop();
  REQUIRE(launches.size() == 1);
  return launches[0];
}
#endif

}  // namespace

TEST_CASE("copy kernels: transposing copies equal the CPU's", "[cuda][copy][family:copy]") {
  kernels::register_devices();
  for (const Case& c : cases()) {
    INFO(c.name);
    const Tensor x = source(c);
    const Tensor want = copied(permuted(x, c.perm), c.to);
    const Tensor xd = to_test_device(x);
    const Tensor got = run_all_schedules([&] { return copied(permuted(xd, c.perm), c.to); }, c.name);
    REQUIRE(got.device() == kernel_test_device());
    check_identical(got, want, c.name);
  }
}

#if !defined(__SANITIZE_ADDRESS__)  // the sanitizer builds' kernels carry no access instrumentation

TEST_CASE("copy kernels: a transposing copy moves whole sectors on both sides", "[cuda][copy][profile][family:copy]") {
  kernels::register_devices();
  REQUIRE(kernels::emu_kernels_profiled());
  // Which kernel each case of the table takes.
  for (const Case& c : cases()) {
    INFO(c.name);
    CHECK((profiled_copy(c).kernel.rfind("transpose_copy_kernel<", 0) == 0) == c.tiled);
  }
  // Whole tiles (sizes in multiples of 32): every sector moved is used, on both sides, and the
  // padded tile has no bank conflicts. The per-element loop reads an eighth of each sector.
  const std::vector<Case> whole = {
      {"256x192 transposed", {256, 192}, {1, 0}},
      {"5x96x64 last two swapped", {5, 96, 64}, {0, 2, 1}},
      {"float64 -> float32 128x96", {128, 96}, {1, 0}, DType::Float64, DType::Float32},
      {"bfloat16 64x96", {64, 96}, {1, 0}, DType::BFloat16, DType::BFloat16},
      {"int64 64x96", {64, 96}, {1, 0}, DType::Int64, DType::Int64},
  };
  for (const Case& c : whole) {
    INFO(c.name);
    const ::cuda_emu::KernelProfile k = profiled_copy(c);
    CHECK(k.kernel.rfind("transpose_copy_kernel<", 0) == 0);
    CHECK(k.global_load.efficiency(false) == 1.0);
    CHECK(k.global_store.efficiency(false) == 1.0);
    CHECK(k.shared_load.sectors == k.shared_load.ideal);
    CHECK(k.shared_store.sectors == k.shared_store.ideal);
  }
}

#endif
