// Out of device memory, on the emulated device with a small capacity: the caching allocator gives
// its cached segments back and retries once, and when that is not enough the error names the
// device, the size asked for, what tensors hold and what stays cached. `define train` on such a
// device ends with that message, not a crash.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "support/runs.h"
#include "support/define_process.h"
#include "core/factory.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t MiB = 1 << 20;

bool caching_on() {
  const char* v = std::getenv("DEFINE_CUDA_CACHE");
  return !(v && std::strcmp(v, "0") == 0);
}

Tensor megabytes_on_emu(std::size_t mib) {
  return empty({static_cast<std::int64_t>(mib * MiB / 4)}, {DType::Float32, Device::emu()});
}

}  // namespace

TEST_CASE("emu device memory: out of memory releases the cache, retries, then names device and sizes", "[cuda][oom]") {
  REQUIRE(kernels::register_devices().emu);
  auto& alloc = cuda_emu::allocator(0);
  alloc.empty_cache();  // what other tests left cached is not part of this one
  kernels::EmuMemoryCapacityGuard capacity(kernels::emu_memory_in_use() + 64 * MiB);

  { Tensor a = megabytes_on_emu(48); }  // freed: its 48 MiB segment stays cached (caching on)
  const std::uint64_t retries = alloc.stats().oom_retries;
  // 56 MiB cannot come from the cached 48 MiB block and does not fit beside it: the cache is
  // released and the allocation retried.
  Tensor b = megabytes_on_emu(56);
  if (caching_on()) {
    CHECK(alloc.stats().oom_retries == retries + 1);
    CHECK(alloc.stats().cached_bytes == 0);
  }
  // 16 MiB more can never fit.
  const std::string error = test::error_of([] { megabytes_on_emu(16); });
  CHECK_THAT(error, Contains("emu:0: out of memory allocating 16777216 bytes"));
  if (caching_on()) {
    CHECK_THAT(error, Contains("(16.0 MiB); 58720256 bytes (56.0 MiB) allocated, 0 bytes (0.0 MiB) cached after "
                               "releasing the free cache and retrying"));
  }
  // The device is still usable once memory is returned.
  b = Tensor();
  Tensor c = megabytes_on_emu(16);
  CHECK(c.numel() == static_cast<std::int64_t>(4 * MiB));
}

TEST_CASE("emu device memory: define train on a device too small says so and exits cleanly", "[cuda][oom][cli]") {
  const fs::path root = test::fresh_root("define_emu_oom_test", 5, 60, 10);
  {
    std::ofstream(root / "config.json") << R"({"data": {"dir": ")" + (root / "data").string() +
                                               R"(", "batch_size": 4, "bptt": 8},
      "model": {"type": "lstm_lm", "input": {"type": "embedding", "dim": 16}, "hidden": 32, "layers": 1},
      "train": {"optimizer": "sgd", "lr": 1, "max_steps": 2, "threads": 1, "device": "emu"}})";
  }
  const fs::path log = root / "train.log";
  const int rc = test::DefineProcess({"train", "--config", (root / "config.json").string(), "--run-dir",
                                      (root / "run").string()},
                                     log, test::with_env({"CUDA_EMU_MEMORY=64K"}))
                     .wait();
  CHECK(rc == 2);
  CHECK_THAT(test::read_all(log), Contains("define train: error: emu:0: out of memory allocating"));
  fs::remove_all(root);
}

TEST_CASE("emu device memory: a failed free on the destructor path is reported, never thrown", "[cuda][oom]") {
  REQUIRE(kernels::register_devices().emu);
  // A pointer this device never handed out, as a freed-twice block or a faulted device gives:
  // the allocator (or cudaFree) refuses it, and the interface, which Storage's destructor calls,
  // reports that on stderr instead of throwing into a destructor.
  alignas(256) static char not_device_memory[256];
  CHECK_NOTHROW(device_interface(DeviceType::Emu).deallocate(not_device_memory, sizeof not_device_memory, 0));
  // The device goes on working.
  Tensor t = megabytes_on_emu(1);
  CHECK(t.numel() == static_cast<std::int64_t>(MiB / 4));
}
