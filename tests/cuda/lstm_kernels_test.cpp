// CUDA LSTM recurrence (kernels/cuda/lstm.cu: per step a GEMM through kernels::gemm, the tiled
// kernel here, and one fused cell kernel) on the emulated device: the whole layer forward and
// backward bit-identical under the emulator's forward, reverse and random schedules; larger shapes
// (cell kernels over several blocks, partial tiles in the step GEMMs) against the reference in
// float32 and float64; saturated gates.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/lstm.h"
#include "support/emulated_device.h"

using namespace define;
using define::test::check_close;
using define::test::run_all_schedules;
using define::test::to_cpu;
using test::kernel_test_device;
using test::to_test_device;

namespace {

struct LayerInputs {
  Tensor x, h0, c0, w_ih, w_hh, b_ih, b_hh, dy, dh_n, dc_n;
};

// x scaled by x_scale (large values saturate the gates); weights in +-0.5.
LayerInputs random_inputs(std::int64_t T, std::int64_t B, std::int64_t I, std::int64_t H, DType dtype,
                          double x_scale = 1.0) {
  Generator gen(11);
  const auto u = [&](const Shape& shape, double range) {
    return rand_uniform(shape, -range, range, {.dtype = dtype}, gen);
  };
  return {u({T, B, I}, x_scale), u({B, H}, 1), u({B, H}, 1), u({4 * H, I}, 0.5), u({4 * H, H}, 0.5),
          u({4 * H}, 0.5),       u({4 * H}, 0.5), u({T, B, H}, 1), u({B, H}, 1), u({B, H}, 1)};
}

LayerInputs on_device(const LayerInputs& in, Device device) {
  const auto d = [&](const Tensor& t) { return copy_to_device(t, device); };
  return {d(in.x),    d(in.h0),   d(in.c0), d(in.w_ih), d(in.w_hh),
          d(in.b_ih), d(in.b_hh), d(in.dy), d(in.dh_n), d(in.dc_n)};
}

// Every result of forward and backward, as contiguous CPU tensors, in a fixed order.
std::vector<Tensor> run_layer(const LayerInputs& in) {
  const kernels::LstmForward f = kernels::lstm_forward(in.x, in.h0, in.c0, in.w_ih, in.w_hh, in.b_ih, in.b_hh);
  const kernels::LstmGrads g = kernels::lstm_backward(in.dy, in.dh_n, in.dc_n, in.x, in.w_ih, in.w_hh, f);
  std::vector<Tensor> out;
  for (const Tensor* t : {&f.y, &f.h_n, &f.c_n, &f.gates, &g.dx, &g.dh0, &g.dc0, &g.dw_ih, &g.dw_hh, &g.dbias})
    out.push_back(to_cpu(*t));
  return out;
}

const char* kResultNames[] = {"y", "h_n", "c_n", "gates", "dx", "dh0", "dc0", "dw_ih", "dw_hh", "dbias"};

// All results flattened into one float64 CPU tensor (for run_all_schedules).
Tensor flattened(const std::vector<Tensor>& results) {
  std::vector<double> all;
  for (const Tensor& t : results) {
    const std::vector<double> v = define::test::to_doubles(t);
    all.insert(all.end(), v.begin(), v.end());
  }
  return from_vector<double>(all, {static_cast<std::int64_t>(all.size())});
}

void check_against_reference(const LayerInputs& cpu_inputs, const std::string& what, double tol) {
  const std::vector<Tensor> ref = [&] {
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    return run_layer(cpu_inputs);
  }();
  const std::vector<Tensor> emu = run_layer(on_device(cpu_inputs, kernel_test_device()));
  for (std::size_t i = 0; i < ref.size(); ++i) check_close(emu[i], ref[i], tol, tol, what + ": " + kResultNames[i]);
}

}  // namespace

TEST_CASE("cuda lstm: layer forward and backward identical under forward, reverse and random schedules",
          "[cuda][lstm][family:lstm]") {
  REQUIRE(kernels::register_devices().emu);
  const LayerInputs in = on_device(random_inputs(3, 5, 7, 33, DType::Float32), kernel_test_device());
  run_all_schedules([&] { return flattened(run_layer(in)); }, "lstm layer T 3 B 5 I 7 H 33");
}

// H = 65: 4H = 260 gate columns (five 64-wide GEMM tiles, the last partial), B * H = 585 units
// (three 256-thread blocks, the last partial); I = 40 and H = 65 leave partial 16-deep slices.
TEST_CASE("cuda lstm: larger shapes against the reference, float32 and float64", "[cuda][lstm][family:lstm]") {
  REQUIRE(kernels::register_devices().emu);
  struct Case {
    std::int64_t T, B, I, H;
  };
  for (const Case& c : {Case{4, 9, 40, 65}, Case{2, 3, 130, 130}, Case{5, 1, 1, 1}}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const std::string what = fmt::format("T {} B {} I {} H {} {}", c.T, c.B, c.I, c.H, dtype_name(dtype));
      INFO(what);
      check_against_reference(random_inputs(c.T, c.B, c.I, c.H, dtype), what, dtype == DType::Float32 ? 1e-5 : 1e-12);
    }
  }
}

// Inputs of +-400 drive the gates' pre-activations to hundreds, where sigmoid's exp(-v) overflows
// to inf (v < -88 in float) and the gates are exactly 0 or 1: every value stays finite and agrees
// with the reference.
TEST_CASE("cuda lstm: saturated gates", "[cuda][lstm][family:lstm]") {
  REQUIRE(kernels::register_devices().emu);
  const LayerInputs in = random_inputs(3, 4, 6, 9, DType::Float32, 400.0);
  check_against_reference(in, "saturated", 1e-5);
  std::int64_t non_finite = 0;
  for (const Tensor& t : run_layer(on_device(in, kernel_test_device())))
    for (double v : define::test::to_doubles(t)) non_finite += std::isfinite(v) ? 0 : 1;
  CHECK(non_finite == 0);
}

// Mixed precision's LSTM layer: x, h0, the weights, biases, dy and dh_n in a 16-bit dtype, the cell
// state c0 / dc_n in float32 (autocast keeps it so). The GPUs' kernels take that layer as it is: as
// many launches as the float32 layer (the widening path would add a cast per tensor and per result),
// the cell state and its gradient stay float32, and every result is the reference's (exact upcast,
// float64, one rounding per result) to within a few roundings: the native layer also rounds the
// gates and h of every step to the format, as the next step's 16-bit GEMM reads them.
TEST_CASE("cuda lstm: a 16-bit layer with a float32 cell state runs natively", "[cuda][lstm][family:lstm][float16]") {
  REQUIRE(kernels::register_devices().emu);
  const LayerInputs in32 = random_inputs(4, 9, 40, 65, DType::Float32);
  const auto launches = [](const LayerInputs& in) {
    const std::uint64_t before = kernels::emu_kernel_launches();
    (void)run_layer(on_device(in, kernel_test_device()));
    return kernels::emu_kernel_launches() - before;
  };
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    const auto c = [&](const Tensor& t) { return kernels::cast(t, dt); };
    const LayerInputs in{c(in32.x),    c(in32.h0),   in32.c0,    c(in32.w_ih), c(in32.w_hh),
                         c(in32.b_ih), c(in32.b_hh), c(in32.dy), c(in32.dh_n), in32.dc_n};
    // Copies in and out are the same in both; a widened layer would add casts on top.
    CHECK(launches(in) == launches(in32));
    const std::vector<Tensor> emu = run_layer(on_device(in, kernel_test_device()));
    const std::vector<Tensor> ref = [&] {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      return run_layer(in);
    }();
    const double eps = dt == DType::Float16 ? 0.0009765625 : 0.0078125;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      INFO(kResultNames[i]);
      const bool cell_state = i == 2 || i == 6;  // c_n, dc0
      CHECK(emu[i].dtype() == (cell_state ? DType::Float32 : dt));
      check_close(emu[i], ref[i], 8 * eps, 8 * eps, kResultNames[i]);
    }
  }
}
