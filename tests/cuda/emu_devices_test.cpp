// Several emulated devices (emu:0, emu:1), as several GPUs: each op runs on its tensors' device
// whatever device the calling thread has selected, memory knows the device that owns it, a kernel
// launched on one device with another device's memory fails as it would fault on a GPU, and
// tensors of two devices in one op are an error naming both.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "kernels/devices.h"
#include "kernels/elementwise.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;

namespace {

Tensor on(const Tensor& t, int device) { return copy_to_device(t, Device::emu(device)); }

}  // namespace

TEST_CASE("emu devices: ops run on their tensors' device, memory has an owner", "[cuda][emu][devices]") {
  const kernels::DeviceAvailability a = kernels::register_devices();
  REQUIRE(a.emu_devices == 2);
  cuda_emu::set_device(0);
  const Tensor x = on(from_vector<float>({1, 2, 3, 4}), 1);
  const Tensor y = on(from_vector<float>({10, 20, 30, 40}), 1);
  CHECK(x.device() == Device::emu(1));
  CHECK(kernels::emu_memory_in_use(1) >= 16);  // emu:1's memory holds them

  // The thread has emu:0 selected; the op runs on emu:1, where its tensors are, and leaves the
  // selection as it was.
  const Tensor z = define::add(define::mul(x, y), 1.0);
  CHECK(z.device() == Device::emu(1));
  CHECK(copy_to_device(z, Device::cpu()).to_vector<float>() == std::vector<float>{11, 41, 91, 161});
  CHECK(cuda_emu::current_device() == 0);

  // Tensors of two devices in one op.
  const Tensor w = on(from_vector<float>({1, 2, 3, 4}), 0);
  CHECK_THROWS_WITH(define::add(x, w), Contains("tensors on emu:1 and emu:0"));
}

TEST_CASE("emu devices: a kernel given another device's memory fails as on a GPU", "[cuda][emu][devices]") {
  REQUIRE(kernels::register_devices().emu_devices == 2);
  const Tensor x = on(from_vector<float>({1, 2, 3}), 1);
  Tensor out = empty({3}, {DType::Float32, Device::emu(1)});
  cuda_emu::set_device(0);
  // The backend function itself, without the entry point's device scope: launched on emu:0.
  CHECK_THROWS_WITH(kernels::cuda_emu::unary(x, out, kernels::UnaryOp::Neg, 0, 0),
                    Contains("points into the memory of device 1 but the kernel runs on device 0"));
  // Through the entry point it runs on emu:1.
  kernels::unary_into(kernels::UnaryOp::Neg, out, x);
  CHECK(copy_to_device(out, Device::cpu()).to_vector<float>() == std::vector<float>{-1, -2, -3});
}

TEST_CASE("emu devices: copies and memsets run with their memory's device current", "[cuda][emu][devices]") {
  REQUIRE(kernels::register_devices().emu_devices == 2);
  cuda_emu::set_device(0);
  // The device interface makes the tensor's device current for each of them (the emulator refuses
  // a copy or memset of another device's memory: tests/cuda_emu/streams_test.cpp).
  const Tensor z = zeros({5}, {DType::Float32, Device::emu(1)});                  // memset
  const Tensor a = on(from_vector<float>({1, 2, 3, 4, 5}), 1);                     // host to device
  const Tensor b = copy_to_device(a, Device::emu(0));                              // device 1 to 0
  const Tensor c = copy_to_device(b, Device::emu(1));                              // device 0 to 1
  CHECK(copy_to_device(z, Device::cpu()).to_vector<float>() == std::vector<float>(5, 0.f));  // to host
  CHECK(copy_to_device(c, Device::cpu()).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5});
  CHECK(b.device() == Device::emu(0));
  CHECK(c.device() == Device::emu(1));
  CHECK(cuda_emu::current_device() == 0);  // the caller's selection is left as it was
}
