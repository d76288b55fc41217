// The CUDA GEMM kernels (kernels/cuda/matmul.cu) on the emulated device, with what the op harness
// cannot express: a 256^3 product against the reference, alpha/beta (beta == 0 never reading out),
// trans flags combined with transposed and arbitrarily strided views of every operand, broadcast
// batch dims, float64, and bit-identical results under the emulator's thread schedules.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/devices.h"
#include "kernels/matmul.h"

using namespace define;

namespace {

// Storage of an operand: plain row-major, its last two dims swapped in memory (column-major
// matrices), or every other row and column of a padded buffer (no unit stride at all).
enum class Layout { Contiguous, Transposed, Gapped };
constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Gapped};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Gapped: return "gapped";
  }
  return "?";
}

Device emu() {
  static const bool registered = kernels::register_devices().emu;
  REQUIRE(registered);
  return Device::emu();
}

// A tensor on `device` holding `values` (a CPU tensor), stored with `layout`.
Tensor with_layout(const Tensor& values, Device device, Layout layout) {
  const Tensor dev = copy_to_device(values, device);
  if (layout == Layout::Contiguous) return dev;
  const Shape shape = values.shape();
  const std::size_t nd = shape.size();
  Shape base_shape = shape;
  if (layout == Layout::Transposed) std::swap(base_shape[nd - 1], base_shape[nd - 2]);
  else {
    base_shape[nd - 2] = 2 * shape[nd - 2];
    base_shape[nd - 1] = 2 * shape[nd - 1] + 1;
  }
  const Tensor base = empty(base_shape, {values.dtype(), device});
  Strides strides = base.strides();
  if (layout == Layout::Transposed) std::swap(strides[nd - 1], strides[nd - 2]);
  else {
    strides[nd - 2] *= 2;
    strides[nd - 1] = 2;
  }
  const Tensor view = base.as_strided(shape, strides, layout == Layout::Gapped ? 1 : 0);
  kernels::copy_into(view, dev);
  return view;
}

template <typename T>
std::vector<T> host_values(const Tensor& t) {
  return copy_to_device(kernels::contiguous(t), Device::cpu()).to_vector<T>();
}

// out = alpha op(a) op(b) + beta out by the reference loops, on CPU copies; returns the result.
template <typename T>
std::vector<T> reference_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool ta, bool tb, double alpha,
                              double beta) {
  const kernels::CpuBackendGuard guard(kernels::Backend::Ref);
  const Tensor c = copy_to_device(kernels::contiguous(out), Device::cpu());
  kernels::gemm(copy_to_device(kernels::contiguous(a), Device::cpu()),
                copy_to_device(kernels::contiguous(b), Device::cpu()), c, ta, tb, alpha, beta);
  return c.to_vector<T>();
}

template <typename T>
void check_close(const std::vector<T>& got, const std::vector<T>& ref, double atol, double rtol) {
  REQUIRE(got.size() == ref.size());
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    const double share = std::isnan(err) ? INFINITY : err / (atol + rtol * std::abs(static_cast<double>(ref[i])));
    if (share > worst || i == 0) {
      worst = share;
      worst_at = i;
    }
  }
  INFO("worst element " << worst_at << ": got " << got[worst_at] << ", reference " << ref[worst_at] << " ("
                        << 100.0 * worst << "% of the allowed error)");
  CHECK(worst <= 1.0);
}

// The emulated GEMM on (a, b, out) against the reference, out's initial values included.
template <typename T>
void check_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool ta, bool tb, double alpha, double beta,
                double atol, double rtol) {
  const std::vector<T> ref = reference_gemm<T>(a, b, out, ta, tb, alpha, beta);
  kernels::gemm(a, b, out, ta, tb, alpha, beta);
  check_close(host_values<T>(out), ref, atol, rtol);
}

Shape matrix_shape(Shape batch, std::int64_t rows, std::int64_t cols, bool trans) {
  batch.push_back(trans ? cols : rows);
  batch.push_back(trans ? rows : cols);
  return batch;
}

}  // namespace

TEST_CASE("gemm kernels: 256^3 float32 against the reference", "[cuda][matmul][family:matmul]") {
  const Device dev = emu();
  Generator gen(11);
  const Tensor a = rand_uniform({256, 256}, -1, 1, {}, gen);
  const Tensor b = rand_uniform({256, 256}, -1, 1, {}, gen);
  const std::vector<float> ref = reference_gemm<float>(a, b, zeros({256, 256}), false, false, 1.0, 0.0);
  const Tensor da = copy_to_device(a, dev), db = copy_to_device(b, dev);
  const Tensor out = empty({256, 256}, {DType::Float32, dev});
  // Timed twice: the first launch also sets up the emulator's fiber stacks on each OS thread.
  double ms[2];
  for (double& t : ms) {
    const auto start = std::chrono::steady_clock::now();
    kernels::gemm(da, db, out, false, false, 1.0, 0.0);
    t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  fmt::print("  gemm 256^3 float32 on the emulator: {:.1f} ms (first launch {:.1f} ms)\n", ms[1], ms[0]);
  check_close(host_values<float>(out), ref, 1e-5, 1e-5);
}

TEST_CASE("gemm kernels: alpha and beta", "[cuda][matmul][family:matmul]") {
  const Device dev = emu();
  Generator gen(12);
  const Tensor a = with_layout(rand_uniform({67, 45}, -1, 1, {}, gen), dev, Layout::Contiguous);
  const Tensor b = with_layout(rand_uniform({45, 93}, -1, 1, {}, gen), dev, Layout::Contiguous);
  const Tensor init = rand_uniform({67, 93}, -1, 1, {}, gen);

  SECTION("alpha and beta scale the product and out") {
    check_gemm<float>(a, b, with_layout(init, dev, Layout::Contiguous), false, false, 0.5, -1.5, 1e-5, 1e-5);
  }
  SECTION("beta == 0 does not read out (NaN does not propagate)") {
    const Tensor out = full({67, 93}, std::nan(""), {DType::Float32, dev});
    check_gemm<float>(a, b, out, false, false, 2.0, 0.0, 1e-5, 1e-5);
  }
  SECTION("k == 0 gives beta * out, or zeros over NaN when beta == 0") {
    const Tensor a0 = empty({67, 0}, {DType::Float32, dev}), b0 = empty({0, 93}, {DType::Float32, dev});
    const Tensor out = with_layout(init, dev, Layout::Transposed);
    kernels::gemm(a0, b0, out, false, false, 1.0, 2.0);
    std::vector<float> twice = init.to_vector<float>();
    for (float& v : twice) v *= 2.0f;
    CHECK(host_values<float>(out) == twice);
    const Tensor nan_out = full({67, 93}, std::nan(""), {DType::Float32, dev});
    kernels::gemm(a0, b0, nan_out, false, false, 1.0, 0.0);
    CHECK(host_values<float>(nan_out) == std::vector<float>(67 * 93, 0.0f));
  }
}

TEST_CASE("gemm kernels: trans flags with transposed and strided operands", "[cuda][matmul][family:matmul]") {
  const Device dev = emu();
  // Two row tiles (one partial), one partial column tile, three k slices (the last partial).
  const std::int64_t m = 70, n = 29, k = 37;
  Generator gen(13);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const Tensor va = rand_uniform(matrix_shape({}, m, k, ta), -1, 1, {}, gen);
      const Tensor vb = rand_uniform(matrix_shape({}, k, n, tb), -1, 1, {}, gen);
      const Tensor init = rand_uniform({m, n}, -1, 1, {}, gen);
      for (const Layout la : kLayouts) {
        for (const Layout lb : kLayouts) {
          for (const Layout lc : kLayouts) {
            INFO("trans_a " << ta << " trans_b " << tb << ", a " << layout_name(la) << ", b " << layout_name(lb)
                            << ", out " << layout_name(lc));
            check_gemm<float>(with_layout(va, dev, la), with_layout(vb, dev, lb), with_layout(init, dev, lc), ta,
                              tb, 1.0, 0.5, 1e-5, 1e-5);
          }
        }
      }
    }
  }
}

TEST_CASE("gemm kernels: broadcast batch dims", "[cuda][matmul][family:matmul]") {
  const Device dev = emu();
  Generator gen(14);
  struct BatchCase {
    const char* name;
    Shape batch_a, batch_b, batch_out;
  };
  const BatchCase cases[] = {
      {"a repeats along dim 1, b along dim 0 (offset table)", {2, 1}, {3}, {2, 3}},
      {"b broadcast to a's batch (batch stride 0)", {4}, {1}, {4}},
      {"one matrix a against a batch of b", {}, {3}, {3}},
      {"both broadcast in different dims", {1, 3}, {2, 1}, {2, 3}},
  };
  const std::int64_t m = 37, n = 66, k = 19;  // n: one full and one 2-column tile
  for (const BatchCase& c : cases) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const Tensor va = rand_uniform(matrix_shape(c.batch_a, m, k, ta), -1, 1, {}, gen);
        const Tensor vb = rand_uniform(matrix_shape(c.batch_b, k, n, tb), -1, 1, {}, gen);
        const Tensor init = rand_uniform(matrix_shape(c.batch_out, m, n, false), -1, 1, {}, gen);
        INFO(c.name << ", trans_a " << ta << " trans_b " << tb);
        check_gemm<float>(with_layout(va, dev, Layout::Contiguous), with_layout(vb, dev, Layout::Transposed),
                          with_layout(init, dev, Layout::Contiguous), ta, tb, 1.0, 0.0, 1e-5, 1e-5);
        check_gemm<float>(with_layout(va, dev, Layout::Gapped), with_layout(vb, dev, Layout::Contiguous),
                          with_layout(init, dev, Layout::Transposed), ta, tb, -0.5, 1.0, 1e-5, 1e-5);
      }
    }
  }
}

TEST_CASE("gemm kernels: float64", "[cuda][matmul][family:matmul]") {
  const Device dev = emu();
  const TensorOptions f64{DType::Float64};
  Generator gen(15);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const Tensor va = rand_uniform(matrix_shape({2}, 67, 45, ta), -1, 1, f64, gen);
      const Tensor vb = rand_uniform(matrix_shape({}, 45, 93, tb), -1, 1, f64, gen);
      const Tensor init = rand_uniform({2, 67, 93}, -1, 1, f64, gen);
      INFO("trans_a " << ta << " trans_b " << tb);
      check_gemm<double>(with_layout(va, dev, Layout::Contiguous), with_layout(vb, dev, Layout::Transposed),
                         with_layout(init, dev, Layout::Contiguous), ta, tb, 1.5, -0.25, 1e-12, 1e-12);
    }
  }
}

TEST_CASE("gemm kernels: bit-identical under every thread schedule", "[cuda][matmul][family:matmul]") {
  const Device dev = emu();
  Generator gen(16);
  const Tensor a = with_layout(rand_uniform({2, 1, 45, 67}, -1, 1, {}, gen), dev, Layout::Contiguous);
  const Tensor b = with_layout(rand_uniform({3, 45, 93}, -1, 1, {}, gen), dev, Layout::Transposed);
  const Tensor init = rand_uniform({2, 3, 67, 93}, -1, 1, {}, gen);
  std::vector<std::vector<float>> results;
  for (const std::string schedule : {"forward", "reverse", "random:12345", "random:777"}) {
    const kernels::EmuScheduleGuard guard(schedule);
    const Tensor out = with_layout(init, dev, Layout::Contiguous);
    kernels::gemm(a, b, out, true, false, 0.75, 0.5);
    results.push_back(host_values<float>(out));
  }
  const std::vector<float> ref = reference_gemm<float>(a, b, with_layout(init, dev, Layout::Contiguous), true, false,
                                                       0.75, 0.5);
  check_close(results[0], ref, 1e-5, 1e-5);
  for (std::size_t i = 1; i < results.size(); ++i) {
    INFO("schedule " << i);
    REQUIRE(results[i].size() == results[0].size());
    CHECK(std::memcmp(results[i].data(), results[0].data(), results[0].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("gemm kernels: implementation switch", "[cuda][matmul][family:matmul]") {
  CHECK(kernels::parse_cuda_gemm("cublas") == kernels::CudaGemm::Cublas);
  CHECK(kernels::parse_cuda_gemm("tiled") == kernels::CudaGemm::Tiled);
  REQUIRE_THROWS_WITH(kernels::parse_cuda_gemm("fast"),
                      Catch::Contains("DEFINE_CUDA_GEMM: unknown GEMM implementation 'fast'"));
  CHECK(std::string(kernels::cuda_gemm_name(kernels::CudaGemm::Tiled)) == "tiled");
  const kernels::CudaGemm before = kernels::cuda_gemm();
  kernels::set_cuda_gemm(kernels::CudaGemm::Tiled);
  CHECK(kernels::cuda_gemm() == kernels::CudaGemm::Tiled);
  kernels::set_cuda_gemm(kernels::CudaGemm::Cublas);
  CHECK(kernels::cuda_gemm() == kernels::CudaGemm::Cublas);
  kernels::set_cuda_gemm(before);
}
