// CUDA split-mix kernels (kernels/cuda/split_mix.cu) on the emulated device, and the CPU fast
// path beside them: forward and backward are permutations, so everything is compared bit for
// bit with the reference: under every emulator schedule, for every dtype, for strided views that
// the entry point passes to the kernels without a copy, and for a size that needs more than one
// grid-stride round.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/factory.h"
#include "support/emulated_device.h"
#include "kernels/backend.h"
#include "kernels/devices.h"
#include "kernels/split_mix.h"

using namespace define;
using define::test::check_identical;
using define::test::on_cpu_backend;
using define::test::run_all_schedules;
using test::kernel_test_device;
using test::to_test_device;

namespace {

struct MixShape {
  std::int64_t rows, p, q, g, s;
};

Tensor random_of(const Shape& shape, DType dtype, std::uint64_t seed) {
  Generator gen(seed);
  if (dtype == DType::Int32 || dtype == DType::Int64) return rand_int(shape, 1 << 20, {.dtype = dtype}, gen);
  return rand_uniform(shape, -1, 1, {.dtype = dtype}, gen);
}

// Emulated forward and backward against the reference, bit for bit.
void check_against_reference(const Tensor& x, const Tensor& y, const Tensor& grad_out, const MixShape& m,
                             const std::string& what) {
  const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::split_mix(x, y, m.g, m.s); });
  const kernels::SplitMixGrads ref_grads = [&] {
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    return kernels::split_mix_backward(grad_out, m.p, m.g, m.s);
  }();
  const Tensor emu = kernels::split_mix(to_test_device(x), to_test_device(y), m.g, m.s);
  REQUIRE(emu.device() == kernel_test_device());
  check_identical(emu, ref, what + ": forward");
  const kernels::SplitMixGrads emu_grads = kernels::split_mix_backward(to_test_device(grad_out), m.p, m.g, m.s);
  check_identical(emu_grads.grad_x, ref_grads.grad_x, what + ": grad_x");
  check_identical(emu_grads.grad_y, ref_grads.grad_y, what + ": grad_y");
  // The CPU fast path too (its unrolled transposes and strided fallbacks).
  check_identical(kernels::split_mix(x, y, m.g, m.s), ref, what + ": cpu forward");
  const kernels::SplitMixGrads cpu_grads = kernels::split_mix_backward(grad_out, m.p, m.g, m.s);
  check_identical(cpu_grads.grad_x, ref_grads.grad_x, what + ": cpu grad_x");
  check_identical(cpu_grads.grad_y, ref_grads.grad_y, what + ": cpu grad_y");
}

}  // namespace

TEST_CASE("cuda split_mix: bit-identical to the reference, every dtype and odd sizes",
          "[cuda][split_mix][family:split_mix]") {
  REQUIRE(kernels::register_devices().emu);
  const std::vector<MixShape> shapes = {
      {1, 3, 5, 1, 1},    {31, 6, 10, 2, 2},   {33, 12, 20, 4, 4},  {257, 12, 20, 4, 10},
      {3, 0, 20, 1, 4},   {5, 8, 0, 4, 1},     {7, 1, 255, 1, 5},   {300, 40, 72, 8, 4},
      {65, 96, 160, 8, 8}, {2, 1000, 3, 1, 3},  {300, 40, 64, 8, 8},  {129, 32, 256, 2, 16},
      {17, 12, 48, 4, 4}, {9, 6, 20, 2, 2},
  };
  for (const MixShape& m : shapes) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
      const std::string what = fmt::format("T {} p {} q {} g {} s {} {}", m.rows, m.p, m.q, m.g, m.s, dtype_name(dtype));
      INFO(what);
      check_against_reference(random_of({m.rows, m.p}, dtype, 1), random_of({m.rows, m.q}, dtype, 2),
                              random_of({m.rows, m.p + m.q}, dtype, 3), m, what);
    }
  }
}

TEST_CASE("cuda split_mix: the same under forward, reverse and random schedules",
          "[cuda][split_mix][family:split_mix]") {
  REQUIRE(kernels::register_devices().emu);
  const MixShape m{31, 12, 20, 4, 2};
  const Tensor x = to_test_device(random_of({m.rows, m.p}, DType::Float32, 4));
  const Tensor y = to_test_device(random_of({m.rows, m.q}, DType::Float32, 5));
  const Tensor go = to_test_device(random_of({m.rows, m.p + m.q}, DType::Float32, 6));
  const Tensor out = run_all_schedules([&] { return kernels::split_mix(x, y, m.g, m.s); }, "forward");
  const Tensor gx = run_all_schedules([&] { return kernels::split_mix_backward(go, m.p, m.g, m.s).grad_x; }, "grad_x");
  const Tensor gy = run_all_schedules([&] { return kernels::split_mix_backward(go, m.p, m.g, m.s).grad_y; }, "grad_y");
  const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] {
    return kernels::split_mix(define::test::to_cpu(x), define::test::to_cpu(y), m.g, m.s);
  });
  const kernels::SplitMixGrads ref_g = [&] {
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    return kernels::split_mix_backward(define::test::to_cpu(go), m.p, m.g, m.s);
  }();
  check_identical(out, ref, "forward vs reference");
  check_identical(gx, ref_g.grad_x, "grad_x vs reference");
  check_identical(gy, ref_g.grad_y, "grad_y vs reference");
}

TEST_CASE("cuda split_mix: strided views read in place (column slice, transposed rows, grad_out view)",
          "[cuda][split_mix][family:split_mix]") {
  REQUIRE(kernels::register_devices().emu);
  const MixShape m{37, 12, 20, 4, 5};
  // x: columns 5..16 of a [37, 40] matrix (row stride 40); y: the transpose of a [20, 37] matrix
  // (row stride 1, column stride 37); grad_out: columns 3..34 of a [37, 64] matrix.
  const Tensor xbase = random_of({m.rows, 40}, DType::Float32, 7);
  const Tensor ybase = random_of({m.q, m.rows}, DType::Float32, 8);
  const Tensor gbase = random_of({m.rows, 64}, DType::Float32, 9);
  auto views = [&](const Tensor& xb, const Tensor& yb, const Tensor& gb) {
    return std::vector<Tensor>{xb.as_strided({m.rows, m.p}, {40, 1}, 5), yb.as_strided({m.rows, m.q}, {1, m.rows}, 0),
                               gb.as_strided({m.rows, m.p + m.q}, {64, 1}, 3)};
  };
  const std::vector<Tensor> host = views(xbase, ybase, gbase);
  const std::vector<Tensor> dev = views(to_test_device(xbase), to_test_device(ybase), to_test_device(gbase));
  CHECK_FALSE(dev[0].is_contiguous());
  CHECK_FALSE(dev[1].is_contiguous());
  const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::split_mix(host[0], host[1], m.g, m.s); });
  const Tensor fast = kernels::split_mix(host[0], host[1], m.g, m.s);
  check_identical(kernels::split_mix(dev[0], dev[1], m.g, m.s), ref, "forward, emu");
  check_identical(fast, ref, "forward, cpu fast path");
  const kernels::SplitMixGrads ref_g = [&] {
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    return kernels::split_mix_backward(host[2], m.p, m.g, m.s);
  }();
  const kernels::SplitMixGrads emu_g = kernels::split_mix_backward(dev[2], m.p, m.g, m.s);
  check_identical(emu_g.grad_x, ref_g.grad_x, "grad_x, emu");
  check_identical(emu_g.grad_y, ref_g.grad_y, "grad_y, emu");
}

TEST_CASE("cuda split_mix: backward inverts forward, over several grid-stride rounds",
          "[cuda][split_mix][family:split_mix]") {
  REQUIRE(kernels::register_devices().emu);
  // 4200 x 256 = 1,075,200 elements: more than the 4096 x 256 threads of one grid-stride round.
  const MixShape m{4200, 96, 160, 8, 8};
  const Tensor x = to_test_device(random_of({m.rows, m.p}, DType::Float32, 10));
  const Tensor y = to_test_device(random_of({m.rows, m.q}, DType::Float32, 11));
  const Tensor out = kernels::split_mix(x, y, m.g, m.s);
  const kernels::SplitMixGrads back = kernels::split_mix_backward(out, m.p, m.g, m.s);
  check_identical(back.grad_x, x, "x recovered");
  check_identical(back.grad_y, y, "y recovered");
  // The shuffle with q / s groups undoes the shuffle with s groups.
  check_identical(kernels::channel_shuffle(kernels::channel_shuffle(y, 8), 20), y, "shuffle inverse");
  // And the forward equals the CPU fast path.
  check_identical(out, kernels::split_mix(define::test::to_cpu(x), define::test::to_cpu(y), m.g, m.s),
                  "forward vs cpu fast path");
}
