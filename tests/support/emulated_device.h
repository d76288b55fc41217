// Helpers shared by the CUDA kernel tests (tests/cuda/*_kernels_test.cpp): moving tensors to and
// from the emulated device, running an op on a chosen CPU backend, and the two comparisons every
// kernel test makes (close to the reference on the test device; bit-identical, e.g. across emulator
// schedules).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/factory.h"
#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"

namespace define::test {

// The device the kernel tests run on: the emulated device, or the first GPU when
// DEFINE_KERNEL_TEST_DEVICE=cuda. On a GPU the same tests check the nvcc build of each kernel against
// the reference, and the schedule loops (run_all_schedules) run it several times, so they check
// that a GPU's results repeat bit for bit (no order-dependent atomics).
inline Device kernel_test_device() {
  static const Device device = [] {
    const char* env = std::getenv("DEFINE_KERNEL_TEST_DEVICE");
    const std::string name = env ? env : "emu";
    const kernels::DeviceAvailability available = kernels::register_devices();
    if (name == "cuda") {
      if (available.cuda_devices == 0) FAIL("DEFINE_KERNEL_TEST_DEVICE=cuda, but this build or machine has no GPU");
      return Device::cuda();
    }
    if (name != "emu") FAIL("DEFINE_KERNEL_TEST_DEVICE must be emu or cuda, not '" << name << "'");
    return Device::emu();
  }();
  return device;
}
// The emulated GPU's settings for a scope, put back when it ends; 0 leaves one as it is. arch: what
// cudaGetDeviceProperties reports (the default sm_61 has no tensor-core instruction); threads: the
// OS threads that run blocks, which the device also reports as its multiprocessors.
struct EmuDeviceSettings {
  int arch = 0;
  unsigned threads = 0;
};
class EmuDeviceScope {
 public:
  explicit EmuDeviceScope(EmuDeviceSettings s);
  ~EmuDeviceScope();
  EmuDeviceScope(const EmuDeviceScope&) = delete;
  EmuDeviceScope& operator=(const EmuDeviceScope&) = delete;

 private:
  EmuDeviceSettings saved_;
};

inline Tensor to_test_device(const Tensor& t) { return copy_to_device(t, kernel_test_device()); }
// Always the emulated device (tests of the emulator itself).
inline Tensor to_emu(const Tensor& t) { return copy_to_device(t, Device::emu()); }
// A contiguous CPU copy (any device, any strides).
inline Tensor to_cpu(const Tensor& t) {
  return copy_to_device(t.is_contiguous() ? t : kernels::contiguous(t), Device::cpu());
}

// f() with CPU tensors served by `backend` (Ref: the double-accumulating oracle; Cpu: the fast path).
inline Tensor on_cpu_backend(kernels::Backend backend, const std::function<Tensor()>& f) {
  kernels::CpuBackendGuard guard(backend);
  return f();
}

// check_close (support/common.h) for a result that must live on the kernel test device.
inline void check_emu_close(const Tensor& got, const Tensor& ref, double atol, double rtol, const std::string& what) {
  REQUIRE(got.device() == kernel_test_device());
  check_close(got, ref, atol, rtol, what);
}

// The same element bytes (after contiguous CPU copies).
inline void check_identical(const Tensor& a_in, const Tensor& b_in, const std::string& what) {
  REQUIRE(a_in.shape() == b_in.shape());
  REQUIRE(a_in.dtype() == b_in.dtype());
  const Tensor a = to_cpu(a_in), b = to_cpu(b_in);
  INFO(what);
  CHECK(std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0);
}

// Runs f (an op on emulated tensors) under each emulator schedule; every result must be
// bit-identical to the first (a missing __syncthreads, a race between blocks or a raced
// non-atomic update shows up as a difference). Returns it.
inline Tensor run_all_schedules(const std::function<Tensor()>& f, const std::string& what,
                                const std::vector<std::string>& schedules = {"forward", "reverse", "random:4242",
                                                                             "race:4242"}) {
  Tensor first;
  for (const std::string& s : schedules) {
    kernels::EmuScheduleGuard guard(s);
    const Tensor got = f();
    if (!first.defined()) first = got;
    else check_identical(got, first, what + " under schedule " + s);
  }
  return first;
}

}  // namespace define::test
