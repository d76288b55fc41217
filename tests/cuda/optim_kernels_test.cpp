// CUDA Adam update (kernels/cuda/optim.cu) on the emulated device: p, m and v against the double
// reference and the CPU fast path, for sizes around the block and grid-stride boundaries, with and
// without the L2 and decoupled-decay terms, in float32 and float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/factory.h"
#include "support/emulated_device.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/optim.h"

using namespace define;
using test::check_close;
using test::kernel_test_device;
using test::to_cpu;
using test::to_test_device;

namespace {

struct State {
  Tensor p, g, m, v;
};

State draw(std::int64_t n, DType dtype, std::uint64_t seed) {
  Generator gen(seed);
  return {rand_uniform({n}, -1, 1, {dtype}, gen), rand_uniform({n}, -0.5, 0.5, {dtype}, gen),
          rand_uniform({n}, -0.1, 0.1, {dtype}, gen), rand_uniform({n}, 0, 0.01, {dtype}, gen)};
}

State copy_to(const State& s, Device d) {
  return {copy_to_device(s.p, d), copy_to_device(s.g, d), copy_to_device(s.m, d), copy_to_device(s.v, d)};
}

}  // namespace

TEST_CASE("cuda adam_update: p, m and v match the reference and the CPU path", "[cuda][optim][family:optim]") {
  REQUIRE(kernels::register_devices().emu);
  struct Terms {
    double l2, decay;
  };
  for (const std::int64_t n : {1, 255, 256, 257, 4099, 300001}) {
    for (const Terms terms : {Terms{0, 1}, Terms{0.01, 1}, Terms{0, 0.9999}, Terms{0.01, 0.9999}}) {
      for (const DType dtype : {DType::Float32, DType::Float64}) {
        INFO("n " << n << ", l2 " << terms.l2 << ", decay " << terms.decay << ", " << dtype_name(dtype));
        const double b1 = 0.9, b2 = 0.98, t = 2;
        const kernels::AdamHyper h{.beta1 = b1,
                                   .beta2 = b2,
                                   .eps = 1e-9,
                                   .step_size = 5e-4 / (1 - std::pow(b1, t)),
                                   .inv_bias_sqrt = 1 / std::sqrt(1 - std::pow(b2, t)),
                                   .l2 = terms.l2,
                                   .decay = terms.decay};
        const State start = draw(n, dtype, static_cast<std::uint64_t>(n));
        State ref = copy_to(start, Device::cpu()), fast = copy_to(start, Device::cpu());
        {
          kernels::CpuBackendGuard guard(kernels::Backend::Ref);
          kernels::adam_update(ref.p, ref.g, ref.m, ref.v, h);
        }
        kernels::adam_update(fast.p, fast.g, fast.m, fast.v, h);
        State dev = copy_to(start, kernel_test_device());
        kernels::adam_update(dev.p, dev.g, dev.m, dev.v, h);
        const double tol = dtype == DType::Float32 ? 1e-6 : 1e-14;
        check_close(to_cpu(dev.p), ref.p, tol, tol, "p");
        check_close(to_cpu(dev.m), ref.m, tol, tol, "m");
        check_close(to_cpu(dev.v), ref.v, tol, tol, "v");
        // The same float operations in the same order as the CPU path: equal but for contraction
        // into fused multiply-adds, which each compiler may choose differently.
        check_close(to_cpu(dev.p), fast.p, tol, tol, "p against the CPU path");
        // The gradient is read, never written.
        CHECK(test::to_doubles(to_cpu(dev.g)) == test::to_doubles(start.g));
      }
    }
  }
}
