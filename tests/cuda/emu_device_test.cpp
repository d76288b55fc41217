// The emulated CUDA device (Device::emu()): registration, storage through the CUDA host code
// (kernels/cuda/device.cu compiled against the emulator's runtime shim), device parsing and errors,
// and the copy kernels (kernels/cuda/copy.cu): casts, broadcasts, strided views, accumulate, fill.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "support/emulated_device.h"
#include "kernels/copy.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"

using namespace define;

using test::to_cpu;
using test::to_emu;

TEST_CASE("emu device: registration, names and allocator statistics", "[cuda][emu]") {
  const kernels::DeviceAvailability a = kernels::register_devices();
  REQUIRE(a.emu);
  CHECK(has_device(DeviceType::Emu));
  CHECK(cuda_emu::device_count() == 2);  // CUDA_EMU_DEVICES' default
  CHECK_FALSE(cuda_emu::device_name(0).empty());
  CHECK_THROWS_WITH(cuda_emu::set_device(2), Catch::Contains("device 2 out of range (2 devices)"));

  // Storage for emu tensors comes through the CUDA host code: with caching on (the default outside
  // the asan preset) the caching allocator serves it and counts it.
  auto& alloc = cuda_emu::allocator(0);
  const std::size_t before = alloc.stats().active_bytes;
  {
    Tensor t = empty({1000}, {DType::Float32, Device::emu()});
    CHECK(t.device() == Device::emu());
    if (std::getenv("DEFINE_CUDA_CACHE") == nullptr) CHECK(alloc.stats().active_bytes >= before + 4000);
  }
  CHECK(alloc.stats().active_bytes == before);
}

TEST_CASE("emu device: Device::parse and errors name the device", "[cuda][emu]") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::parse("emu") == Device::emu());
  CHECK(Device::emu().str() == "emu:0");
  CHECK_THROWS_WITH(Device::parse("tpu"), Catch::Contains("unknown device 'tpu'"));
  CHECK_THROWS_WITH(Device::parse("cuda:x"), Catch::Contains("bad device index"));
  kernels::register_devices();
  // Mixing devices in one op is refused by name.
  Tensor a = ones({3});
  Tensor b = to_emu(ones({3}));
  CHECK_THROWS_WITH(define::add(a, b), Catch::Contains("tensors on cpu and emu:0"));
  CHECK_THROWS_WITH(kernels::set_emu_schedule("sideways"), Catch::Contains("unknown schedule 'sideways'"));
  CHECK_THROWS_WITH(kernels::set_emu_schedule("random"), Catch::Contains("random:<seed>"));
}

TEST_CASE("emu copy kernels: casts, broadcasts and strided views match the CPU", "[cuda][emu][copy][family:copy]") {
  kernels::register_devices();
  // Every dtype pair, through a transposed (non-contiguous) source.
  const std::vector<DType> dtypes{DType::Float32, DType::Float64, DType::Int32, DType::Int64};
  const Tensor base = rand_int({33, 31}, 100, {.dtype = DType::Int64});
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      const Tensor src_cpu = kernels::cast(base, from);
      const Tensor src = to_emu(src_cpu).as_strided({31, 33}, {1, 31}, 0);  // the transpose
      const Tensor dst = empty({31, 33}, {to, Device::emu()});
      kernels::copy_into(dst, src);
      const Tensor want = empty({31, 33}, {to});
      kernels::copy_into(want, src_cpu.as_strided({31, 33}, {1, 31}, 0));
      CHECK(kernels::cast(to_cpu(dst), DType::Float64).to_vector<double>() ==
            kernels::cast(want, DType::Float64).to_vector<double>());
    }
  }
  // Broadcast a row into a strided destination (every other column of a wider tensor).
  const Tensor wide = to_emu(zeros({5, 66}));
  const Tensor dst = wide.as_strided({5, 33}, {66, 2}, 1);
  const Tensor row = to_emu(arange(33, {.dtype = DType::Float32}));
  kernels::copy_into(dst, row);
  const std::vector<float> got = to_cpu(wide).to_vector<float>();
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 66; ++c) CHECK(got[r * 66 + c] == ((c % 2) ? static_cast<float>(c / 2) : 0.0f));
}

TEST_CASE("emu copy kernels: accumulate and fill, odd sizes", "[cuda][emu][copy][family:copy]") {
  kernels::register_devices();
  for (std::int64_t n : {1, 31, 33, 257, 100003}) {
    const Tensor a = rand_uniform({n}, -1, 1);
    const Tensor b = rand_uniform({n}, -1, 1);
    const Tensor acc = to_emu(a);
    kernels::accumulate_into(acc, to_emu(b));
    const std::vector<float> got = to_cpu(acc).to_vector<float>();
    const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(got[i] == va[i] + vb[i]);

    const Tensor f = empty({n}, {DType::Float64, Device::emu()});
    kernels::fill(f, -2.5);
    for (double v : to_cpu(f).to_vector<double>()) REQUIRE(v == -2.5);
  }
  // fill through a strided view leaves the gaps alone.
  const Tensor t = to_emu(zeros({4, 8}));
  kernels::fill(t.as_strided({4, 4}, {8, 2}, 0), 7.0);
  const std::vector<float> v = to_cpu(t).to_vector<float>();
  for (int i = 0; i < 32; ++i) CHECK(v[i] == ((i % 2) ? 0.0f : 7.0f));
}

TEST_CASE("emu device: tensors round-trip through host copies and autograd runs on it", "[cuda][emu]") {
  kernels::register_devices();
  const Tensor x = rand_uniform({7, 9}, -1, 1);
  CHECK(to_cpu(to_emu(x)).to_vector<float>() == x.to_vector<float>());
  // A device-to-device copy on the emulated device (clone through the device interface).
  const Tensor e = to_emu(x);
  const Tensor e2 = copy_to_device(e, Device::emu());
  CHECK(to_cpu(e2).to_vector<float>() == x.to_vector<float>());
}
