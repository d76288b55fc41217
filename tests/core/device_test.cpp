// Device handling without a GPU: a host-memory stand-in is registered as the CUDA device for the
// duration of a test, so tensors "on cuda:0" exist and every op's device checks can be exercised.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "autograd/ops.h"
#include "kernels/devices.h"

using namespace define;
using Catch::Contains;

namespace {

struct HostBackedDevice final : DeviceInterface {
  void* allocate(std::size_t n, int) override { return std::malloc(n ? n : 1); }
  void deallocate(void* p, std::size_t, int) noexcept override { std::free(p); }
  void copy_to_host(void* d, const void* s, std::size_t n, int) override { std::memcpy(d, s, n); }
  void copy_from_host(void* d, const void* s, std::size_t n, int) override { std::memcpy(d, s, n); }
  void copy_device(void* d, int, const void* s, int, std::size_t n) override { std::memmove(d, s, n); }
  void memset_zero(void* d, std::size_t n, int) override { std::memset(d, 0, n); }
  void synchronize(int) override {}
};

// Registers the stand-in for one scope (only when no real CUDA backend is present).
struct StandInCuda {
  HostBackedDevice dev;
  bool active = !has_device(DeviceType::CUDA);
  StandInCuda() {
    if (active) register_device_interface(DeviceType::CUDA, &dev);
  }
  ~StandInCuda() {
    if (active) register_device_interface(DeviceType::CUDA, nullptr);
  }
};

}  // namespace

TEST_CASE("devices: tensors on different devices are refused by name", "[core][device]") {
  StandInCuda cuda;
  if (!cuda.active) return;  // a real CUDA backend exists: covered by the cuda test mode instead
  Tensor a = ones({2, 2});
  Tensor b = ones({2, 2}, {DType::Float32, Device::cuda()});
  Tensor idx = zeros({2}, {DType::Int64, Device::cuda()});
  CHECK(b.device() == Device::cuda(0));
  CHECK(b.device().str() == "cuda:0");
  CHECK(to_device(b, Device::cpu()).to_vector<float>() == std::vector<float>(4, 1.0f));

  REQUIRE_THROWS_WITH(add(a, b), Contains("add: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(mul(a, b), Contains("mul: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(where(a, a, b), Contains("where: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(matmul(a, b), Contains("matmul: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(linear(a, b), Contains("linear: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(concat({a, b}, 0), Contains("concat: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(embedding(a, idx), Contains("embedding: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(index_select(a, 0, idx), Contains("index_select: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(cross_entropy(a, idx), Contains("cross_entropy: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(layer_norm(a, b, Tensor()), Contains("layer_norm: tensors on cpu and cuda:0"));
  REQUIRE_THROWS_WITH(copy_(a, b), Contains("copy: tensors on cpu and cuda:0"));
  // A single-device op on the stand-in cannot run: without the nvcc build there is no kernel, with
  // it selecting the tensors' GPU fails for want of one. Either way a named error, not a crash.
  if (kernels::built_with_cuda())
    REQUIRE_THROWS_WITH(softmax(b, 1), Contains("cuda: cudaGetDevice"));
  else
    REQUIRE_THROWS_WITH(softmax(b, 1), Contains("no CUDA kernel in this build"));
}
