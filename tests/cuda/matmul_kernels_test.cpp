// The CUDA GEMM kernels (kernels/cuda/matmul.cu) on the emulated device, with what the op harness
// cannot express: a 256^3 product against the reference, alpha/beta (beta == 0 never reading out),
// trans flags combined with transposed and arbitrarily strided views of every operand, broadcast
// batch dims, float64, and bit-identical results under the emulator's thread schedules. Then the
// cuBLAS path (DEFINE_CUDA_GEMM=cublas) against the emulated cuBLAS over the same kinds of operands,
// with the cuBLAS calls it must make, and the emulated cuBLAS itself: exact values, argument
// validation, handles, device ownership.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/factory.h"
#include "support/common.h"
#include "support/emulated_device.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/devices.h"
#include "cuda_emu/emu_cublas.hpp"
#include "cuda_emu/emu_runtime.hpp"
#include "kernels/matmul.h"

using namespace define;
using test::kernel_test_device;
using test::check_close;
using test::to_test_device;

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

// Batch dims of a, b and out, broadcast in various ways. Offsets that are i * stride for batch
// entry i take one cublas<t>gemmStridedBatched call on the cuBLAS path (stride 0 for a broadcast
// operand); any other pattern one such call per run of its longest batch dim (the tiled kernel: an
// offset table).
struct BatchCase {
  const char* name;
  Shape batch_a, batch_b, batch_out;
  long cublas_gemm_calls, cublas_strided_calls;
};
const BatchCase kBatchCases[] = {
    {"a batch against a batch", {3}, {3}, {3}, 0, 1},
    {"b broadcast to a's batch (batch stride 0)", {4}, {1}, {4}, 0, 1},
    {"one matrix a against a batch of b", {}, {3}, {3}, 0, 1},
    {"a repeats along dim 1, b along dim 0", {2, 1}, {3}, {2, 3}, 0, 2},
    {"both broadcast in different dims", {1, 3}, {2, 1}, {2, 3}, 0, 2},
};

// check(case, a, b, out, trans_a, trans_b) for every batch case and trans flags, with CPU values
// of op(a) m x k, op(b) k x n and out m x n (n: one full and one 2-column tile).
void for_batch_cases(
    Generator& gen,
    const std::function<void(const BatchCase&, const Tensor&, const Tensor&, const Tensor&, bool, bool)>& check) {
  const std::int64_t m = 37, n = 66, k = 19;
  for (const BatchCase& c : kBatchCases) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const Tensor va = rand_uniform(matrix_shape(c.batch_a, m, k, ta), -1, 1, {}, gen);
        const Tensor vb = rand_uniform(matrix_shape(c.batch_b, k, n, tb), -1, 1, {}, gen);
        const Tensor init = rand_uniform(matrix_shape(c.batch_out, m, n, false), -1, 1, {}, gen);
        INFO(c.name << ", trans_a " << ta << " trans_b " << tb);
        check(c, va, vb, init, ta, tb);
      }
    }
  }
}

// check(a, b, out, trans_a, trans_b) for every combination of the trans flags and of the layouts
// of a, b and out, with op(a) m x k, op(b) k x n and random values.
void for_trans_and_layouts(Generator& gen, std::int64_t m, std::int64_t n, std::int64_t k,
                           const std::function<void(const Tensor&, const Tensor&, const Tensor&, bool, bool)>& check) {
  const Device dev = kernel_test_device();
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
            check(with_layout(va, dev, la), with_layout(vb, dev, lb), with_layout(init, dev, lc), ta, tb);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("gemm kernels: 256^3 float32 against the reference", "[cuda][matmul][family:matmul]") {
  const Device dev = kernel_test_device();
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
  const Device dev = kernel_test_device();
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
  // Two row tiles (one partial), one partial column tile, three k slices (the last partial).
  Generator gen(13);
  for_trans_and_layouts(gen, 70, 29, 37, [](const Tensor& a, const Tensor& b, const Tensor& out, bool ta, bool tb) {
    check_gemm<float>(a, b, out, ta, tb, 1.0, 0.5, 1e-5, 1e-5);
  });
}

TEST_CASE("gemm kernels: broadcast batch dims", "[cuda][matmul][family:matmul]") {
  const Device dev = kernel_test_device();
  Generator gen(14);
  for_batch_cases(gen, [&](const BatchCase&, const Tensor& va, const Tensor& vb, const Tensor& init, bool ta, bool tb) {
    check_gemm<float>(with_layout(va, dev, Layout::Contiguous), with_layout(vb, dev, Layout::Transposed),
                      with_layout(init, dev, Layout::Contiguous), ta, tb, 1.0, 0.0, 1e-5, 1e-5);
    check_gemm<float>(with_layout(va, dev, Layout::Gapped), with_layout(vb, dev, Layout::Contiguous),
                      with_layout(init, dev, Layout::Transposed), ta, tb, -0.5, 1.0, 1e-5, 1e-5);
  });
}

TEST_CASE("gemm kernels: float64", "[cuda][matmul][family:matmul]") {
  const Device dev = kernel_test_device();
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
  const Device dev = kernel_test_device();
  Generator gen(16);
  const Tensor a = with_layout(rand_uniform({2, 1, 45, 67}, -1, 1, {}, gen), dev, Layout::Contiguous);
  const Tensor b = with_layout(rand_uniform({3, 45, 93}, -1, 1, {}, gen), dev, Layout::Transposed);
  const Tensor init = rand_uniform({2, 3, 67, 93}, -1, 1, {}, gen);
  std::vector<std::vector<float>> results;
  for (const std::string schedule : {"forward", "reverse", "random:12345", "race:777"}) {
    const kernels::EmuScheduleGuard guard(schedule);
    const Tensor out = with_layout(init, dev, Layout::Contiguous);
    kernels::gemm(a, b, out, true, false, 0.75, 0.5);
    results.push_back(host_values<float>(out));
  }
  const std::vector<float> ref =
      reference_gemm<float>(a, b, with_layout(init, dev, Layout::Contiguous), true, false, 0.75, 0.5);
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
  CHECK(std::string(kernels::cuda_gemm_name(kernels::CudaGemm::Default)) == "default");
  const kernels::CudaGemm before = kernels::cuda_gemm();
  kernels::set_cuda_gemm(kernels::CudaGemm::Tiled);
  CHECK(kernels::cuda_gemm() == kernels::CudaGemm::Tiled);
  kernels::set_cuda_gemm(kernels::CudaGemm::Cublas);
  CHECK(kernels::cuda_gemm() == kernels::CudaGemm::Cublas);
  kernels::set_cuda_gemm(before);
}

// ---------------------------------------------------------------------------------------------
// The cuBLAS path (run_cublas / gemm_cublas in kernels/cuda/matmul.cu) on the emulated device,
// which runs it against the emulated cuBLAS (cuda_emu/emu_cublas.hpp), and that emulation's
// own contract: argument validation, handles, device ownership, exact values.

namespace {

// Successful emulated cublas<t>gemm / cublas<t>gemmStridedBatched calls made while it lives.
class CublasCallCount {
 public:
  long gemm() const { return ::cuda_emu::cublas_calls().gemm - start_.gemm; }
  long strided_batched() const { return ::cuda_emu::cublas_calls().gemm_strided_batched - start_.gemm_strided_batched; }

 private:
  ::cuda_emu::CublasCalls start_ = ::cuda_emu::cublas_calls();
};

// check_gemm through the cuBLAS path, which must make exactly `gemm_calls` cublas<t>gemm and
// `strided_calls` cublas<t>gemmStridedBatched calls.
template <typename T>
void check_gemm_cublas(const Tensor& a, const Tensor& b, const Tensor& out, bool ta, bool tb, double alpha, double beta,
                       double tol, long gemm_calls, long strided_calls) {
  const kernels::CudaGemmGuard cublas(kernels::CudaGemm::Cublas);
  const CublasCallCount calls;
  check_gemm<T>(a, b, out, ta, tb, alpha, beta, tol, tol);
  if (kernel_test_device().is_emu()) {  // only the emulated cuBLAS counts its calls
    CHECK(calls.gemm() == gemm_calls);
    CHECK(calls.strided_batched() == strided_calls);
  }
}

}  // namespace

TEST_CASE("gemm kernels: the emulated device defaults to the tiled kernels, cuBLAS when selected",
          "[cuda][matmul][family:matmul]") {
  const Device dev = kernel_test_device();
  Generator gen(21);
  const Tensor a = with_layout(rand_uniform({33, 20}, -1, 1, {}, gen), dev, Layout::Contiguous);
  const Tensor b = with_layout(rand_uniform({20, 17}, -1, 1, {}, gen), dev, Layout::Contiguous);
  const Tensor init = rand_uniform({33, 17}, -1, 1, {}, gen);
  {
    const kernels::CudaGemmGuard by_default(kernels::CudaGemm::Default);
    CHECK(kernels::cuda_gemm_in_effect(/*emulated=*/true) == kernels::CudaGemm::Tiled);
    CHECK(kernels::cuda_gemm_in_effect(/*emulated=*/false) == kernels::CudaGemm::Cublas);
    const CublasCallCount calls;
    check_gemm<float>(a, b, with_layout(init, dev, Layout::Contiguous), false, false, 1.0, 0.0, 1e-5, 1e-5);
    CHECK(calls.gemm() + calls.strided_batched() == 0);
  }
  for (const kernels::CudaGemm which : {kernels::CudaGemm::Cublas, kernels::CudaGemm::Tiled}) {
    const kernels::CudaGemmGuard selected(which);
    INFO("selected " << kernels::cuda_gemm_name(which));
    CHECK(kernels::cuda_gemm_in_effect(true) == which);
    CHECK(kernels::cuda_gemm_in_effect(false) == which);
    const CublasCallCount calls;
    check_gemm<float>(a, b, with_layout(init, dev, Layout::Contiguous), false, false, 1.0, 0.0, 1e-5, 1e-5);
    if (dev.is_emu()) CHECK(calls.gemm() == (which == kernels::CudaGemm::Cublas ? 1 : 0));
  }
}

TEST_CASE("gemm kernels: cuBLAS path, trans flags with transposed and strided operands",
          "[cuda][matmul][cublas][family:matmul]") {
  // Non-square everywhere, so that a swapped or unflipped operation cannot go unnoticed. Gapped
  // operands are copied to contiguous ones first, a gapped out is computed in a scratch (whose
  // initial values beta reads) and copied back: one cublas<t>gemm call every time.
  Generator gen(22);
  for_trans_and_layouts(gen, 70, 29, 37, [](const Tensor& a, const Tensor& b, const Tensor& out, bool ta, bool tb) {
    check_gemm_cublas<float>(a, b, out, ta, tb, 0.75, 0.5, 1e-5, 1, 0);
  });
}

TEST_CASE("gemm kernels: cuBLAS path, float64, odd shapes and vectors", "[cuda][matmul][cublas][family:matmul]") {
  const Device dev = kernel_test_device();
  const TensorOptions f64{DType::Float64};
  Generator gen(23);
  // Size-1 dims may carry any stride: cuBLAS then needs a leading dimension of its own choosing.
  const std::int64_t shapes[][3] = {{67, 45, 93}, {1, 45, 93}, {67, 1, 93}, {67, 45, 1}, {1, 1, 1}, {1, 7, 1}};
  for (const auto& s : shapes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const Tensor va = rand_uniform(matrix_shape({}, s[0], s[1], ta), -1, 1, f64, gen);
        const Tensor vb = rand_uniform(matrix_shape({}, s[1], s[2], tb), -1, 1, f64, gen);
        const Tensor init = rand_uniform({s[0], s[2]}, -1, 1, f64, gen);
        for (const Layout la : kLayouts) {
          for (const Layout lc : kLayouts) {
            INFO(s[0] << "x" << s[1] << "x" << s[2] << ", trans_a " << ta << " trans_b " << tb << ", a "
                      << layout_name(la) << ", out " << layout_name(lc));
            check_gemm_cublas<double>(with_layout(va, dev, la), with_layout(vb, dev, Layout::Transposed),
                                      with_layout(init, dev, lc), ta, tb, 1.5, -0.25, 1e-12, 1, 0);
          }
        }
      }
    }
  }
}

TEST_CASE("gemm kernels: cuBLAS path, batches (strided batched, at once or per run of a batch dim)",
          "[cuda][matmul][cublas][family:matmul]") {
  const Device dev = kernel_test_device();
  Generator gen(24);
  for_batch_cases(
      gen, [&](const BatchCase& c, const Tensor& va, const Tensor& vb, const Tensor& init, bool ta, bool tb) {
        const auto check = [&](Layout la, Layout lb, Layout lc, double alpha, double beta) {
          check_gemm_cublas<float>(with_layout(va, dev, la), with_layout(vb, dev, lb), with_layout(init, dev, lc), ta,
                                   tb, alpha, beta, 1e-5, c.cublas_gemm_calls, c.cublas_strided_calls);
        };
        check(Layout::Contiguous, Layout::Transposed, Layout::Contiguous, 1.0, 0.0);
        check(Layout::Transposed, Layout::Contiguous, Layout::Transposed, -0.5, 1.0);
        // A gapped out: computed in a contiguous scratch, whose batch strides are uniform again.
        check(Layout::Gapped, Layout::Contiguous, Layout::Gapped, 2.0, 0.5);
      });

  // Attention's layout: [B, H, T, d] read from a [B, T, H, d] tensor is strided along B and along
  // H but not over the flattened B*H index. One call per run of the longer dim (2 calls of 3, not
  // 6 single GEMMs: per-entry calls had made a Transformer step on a GPU launch-bound).
  SECTION("batch dims stored out of order: offsets 0, 2S, 4S, S, 3S, 5S (a call per run of dim 1)") {
    const std::int64_t m = 37, n = 66, k = 19;
    const TensorOptions f64{DType::Float64};
    const Tensor values = rand_uniform({2, 3, m, k}, -1, 1, f64, gen);
    // a's [2, 3] batch dims stored as [3, 2]: the batch entry (i, j) at (j * 2 + i) * m * k.
    const Tensor base = empty({3, 2, m, k}, {DType::Float64, dev});
    const Tensor a = base.as_strided({2, 3, m, k}, {m * k, 2 * m * k, k, 1}, 0);
    kernels::copy_into(a, copy_to_device(values, dev));
    const Tensor b = with_layout(rand_uniform({k, n}, -1, 1, f64, gen), dev, Layout::Contiguous);
    const Tensor init = rand_uniform({2, 3, m, n}, -1, 1, f64, gen);
    check_gemm_cublas<double>(a, b, with_layout(init, dev, Layout::Contiguous), false, false, 1.0, 0.5, 1e-12, 0, 2);
    check_gemm_cublas<double>(a, b, with_layout(init, dev, Layout::Transposed), false, false, 1.0, 0.5, 1e-12, 0, 2);
  }

  SECTION("the longer strided dim is the batched one: [5, 3] batch from a [5, T, 3, d] layout") {
    const std::int64_t heads = 3, batch = 5, t = 7, d = 4;
    const TensorOptions f32{DType::Float32};
    // q and k as attention holds them: [B, T, H, d] storage viewed as [B, H, T, d].
    const auto heads_first = [&](const Tensor& btHd) {
      return copy_to_device(btHd, dev).as_strided({batch, heads, t, d}, {t * heads * d, d, heads * d, 1}, 0);
    };
    const Tensor q = heads_first(rand_uniform({batch, t, heads, d}, -1, 1, f32, gen));
    const Tensor key = heads_first(rand_uniform({batch, t, heads, d}, -1, 1, f32, gen));
    const Tensor init = rand_uniform({batch, heads, t, t}, -1, 1, f32, gen);
    // scores = q k^T: 3 calls (one per head) of 5 (the sentences), no single GEMMs.
    check_gemm_cublas<float>(q, key, with_layout(init, dev, Layout::Contiguous), false, true, 0.5, 0.0, 1e-5, 0, 3);
  }
}

TEST_CASE("gemm kernels: cuBLAS path, alpha, beta == 0 over NaN, k == 0",
          "[cuda][matmul][cublas][family:matmul]") {
  const Device dev = kernel_test_device();
  Generator gen(25);
  const Tensor va = rand_uniform({67, 45}, -1, 1, {}, gen), vb = rand_uniform({45, 93}, -1, 1, {}, gen);
  const Tensor a = with_layout(va, dev, Layout::Contiguous), b = with_layout(vb, dev, Layout::Transposed);

  SECTION("beta == 0 does not read out, nor its scratch copy") {
    const Tensor nan = full({67, 93}, std::nan(""), {});
    for (const Layout lc : kLayouts) {
      INFO("out " << layout_name(lc));
      check_gemm_cublas<float>(a, b, with_layout(nan, dev, lc), false, false, -2.0, 0.0, 1e-5, 1, 0);
    }
  }
  SECTION("k == 0 stays on the tiled kernel: beta * out") {
    const kernels::CudaGemmGuard cublas(kernels::CudaGemm::Cublas);
    const CublasCallCount calls;
    const Tensor init = rand_uniform({67, 93}, -1, 1, {}, gen);
    const Tensor out = with_layout(init, dev, Layout::Contiguous);
    kernels::gemm(empty({67, 0}, {DType::Float32, dev}), empty({0, 93}, {DType::Float32, dev}), out, false, false, 1.0,
                  3.0);
    std::vector<float> thrice = init.to_vector<float>();
    for (float& v : thrice) v *= 3.0f;
    CHECK(host_values<float>(out) == thrice);
    CHECK(calls.gemm() + calls.strided_batched() == 0);
  }
}

// A test case of its own (not a SECTION of the one above) so that with one emulated device it is
// reported as skipped.
TEST_CASE("gemm kernels: cuBLAS path on the second device: tensors on emu:1 use emu:1's handle",
          "[cuda][matmul][cublas][family:matmul]") {
  REQUIRE(kernels::register_devices().emu);
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  if (devices < 2) DEFINE_SKIP_TEST("one emulated device (CUDA_EMU_DEVICES=1)");
  Generator gen(25);  // the same draws as the test case above
  rand_uniform({67, 45}, -1, 1, {}, gen);
  const Tensor vb = rand_uniform({45, 93}, -1, 1, {}, gen);
  const Device second = Device::emu(1);
  const Tensor init = rand_uniform({2, 67, 93}, -1, 1, {}, gen);
  const Tensor batched_a = rand_uniform({2, 67, 45}, -1, 1, {}, gen);
  check_gemm_cublas<float>(with_layout(batched_a, second, Layout::Contiguous),
                           with_layout(vb, second, Layout::Gapped), with_layout(init, second, Layout::Transposed),
                           false, false, 1.0, 1.0, 1e-5, 0, 1);
}

namespace {

// Memory of emulated device `device`, filled with `values`.
template <typename T>
class EmuBuffer {
 public:
  EmuBuffer(const std::vector<T>& values, int device) : size_(values.size()) {
    int previous = 0;
    REQUIRE(cudaGetDevice(&previous) == cudaSuccess);
    REQUIRE(cudaSetDevice(device) == cudaSuccess);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, size_ * sizeof(T));
    REQUIRE(cudaSetDevice(previous) == cudaSuccess);
    REQUIRE(e == cudaSuccess);
    data_ = static_cast<T*>(p);
    std::memcpy(data_, values.data(), size_ * sizeof(T));  // device memory is host memory
  }
  ~EmuBuffer() { (void)cudaFree(data_); }
  EmuBuffer(const EmuBuffer&) = delete;
  EmuBuffer& operator=(const EmuBuffer&) = delete;
  T* get() const { return data_; }
  std::vector<T> values() const { return std::vector<T>(data_, data_ + size_); }

 private:
  std::size_t size_;
  T* data_ = nullptr;
};

// A handle created with `device` current (the calling thread's current device is restored).
class EmuCublasHandle {
 public:
  explicit EmuCublasHandle(int device = 0) {
    int previous = 0;
    REQUIRE(cudaGetDevice(&previous) == cudaSuccess);
    REQUIRE(cudaSetDevice(device) == cudaSuccess);
    const cublasStatus_t s = cublasCreate(&handle_);
    REQUIRE(cudaSetDevice(previous) == cudaSuccess);
    REQUIRE(s == CUBLAS_STATUS_SUCCESS);
  }
  ~EmuCublasHandle() { (void)cublasDestroy(handle_); }
  EmuCublasHandle(const EmuCublasHandle&) = delete;
  EmuCublasHandle& operator=(const EmuCublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A = [[1, 2, 3], [4, 5, 6]] (2 x 3), B = [[7, 8], [9, 10], [11, 12]] (3 x 2): A B = [[58, 64], [139, 154]].
// Column-major, with a NaN row of padding (leading dimension rows + 1), which must never be read.
const std::vector<float> kA = {1, 4, kNaN, 2, 5, kNaN, 3, 6, kNaN};      // lda 3
const std::vector<float> kAt = {1, 2, 3, kNaN, 4, 5, 6, kNaN};           // A^T (3 x 2), lda 4
const std::vector<float> kB = {7, 9, 11, kNaN, 8, 10, 12, kNaN};         // ldb 4
const std::vector<float> kBt = {7, 8, kNaN, 9, 10, kNaN, 11, 12, kNaN};  // B^T (2 x 3), ldb 3
const std::vector<float> kProduct = {58, 139, 64, 154};                  // ldc 2

}  // namespace

TEST_CASE("emulated cuBLAS: exact column-major products for every operation", "[cuda][matmul][cublas][family:matmul]") {
  const EmuCublasHandle handle;
  const EmuBuffer<float> a(kA, 0), at(kAt, 0), b(kB, 0), bt(kBt, 0);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      INFO("transa " << ta << " transb " << tb);
      const EmuBuffer<float> c({1, 2, 3, 4}, 0);
      const float alpha = 2, beta = 0.5f;
      REQUIRE(cublasSgemm(handle.get(), ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_C : CUBLAS_OP_N, 2, 2, 3, &alpha,
                          ta ? at.get() : a.get(), ta ? 4 : 3, tb ? bt.get() : b.get(), tb ? 3 : 4, &beta, c.get(),
                          2) == CUBLAS_STATUS_SUCCESS);
      CHECK(c.values() == std::vector<float>{2 * 58 + 0.5f, 2 * 139 + 1.0f, 2 * 64 + 1.5f, 2 * 154 + 2.0f});
    }
  }

  SECTION("beta == 0 does not read C; alpha == 0 does not read A or B") {
    const EmuBuffer<float> c({kNaN, kNaN, kNaN, kNaN}, 0);
    const float one = 1, zero = 0;
    REQUIRE(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a.get(), 3, b.get(), 4, &zero, c.get(),
                        2) == CUBLAS_STATUS_SUCCESS);
    CHECK(c.values() == kProduct);
    const EmuBuffer<float> nan_a({kNaN, kNaN, kNaN, kNaN, kNaN, kNaN}, 0);
    const float half = 0.5f;
    REQUIRE(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &zero, nan_a.get(), 2, b.get(), 4, &half,
                        c.get(), 2) == CUBLAS_STATUS_SUCCESS);
    CHECK(c.values() == std::vector<float>{29, 69.5f, 32, 77});
  }
  SECTION("strided batched, B broadcast with stride 0, double") {
    // A_0 = A, A_1 = 2 A (lda 2, stride 6); C_i at stride 5 (ldc 2, one element of padding).
    const EmuBuffer<double> a2({1, 4, 2, 5, 3, 6, 2, 8, 4, 10, 6, 12}, 0);
    const EmuBuffer<double> b2({7, 9, 11, 8, 10, 12}, 0);
    const EmuBuffer<double> c2({0, 0, 0, 0, -1, 0, 0, 0, 0, -1}, 0);
    const double one = 1, zero = 0;
    REQUIRE(cublasDgemmStridedBatched(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a2.get(), 2, 6, b2.get(),
                                      3, 0, &zero, c2.get(), 2, 5, 2) == CUBLAS_STATUS_SUCCESS);
    CHECK(c2.values() == std::vector<double>{58, 139, 64, 154, -1, 116, 278, 128, 308, -1});
  }
  SECTION("CUBLAS_TF32_TENSOR_OP_MATH rounds float operands to a 10-bit mantissa") {
    const float x = 1.0f + 0x1p-12f, y = 1.0f + 0x1p-10f;
    const EmuBuffer<float> av({x, y}, 0), bv({1, 1}, 0), c({0}, 0);
    const float one = 1, zero = 0;
    const auto product = [&] {
      REQUIRE(cublasSgemm(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 2, &one, av.get(), 2, bv.get(), 2, &zero,
                          c.get(), 1) == CUBLAS_STATUS_SUCCESS);
      return c.values()[0];
    };
    CHECK(product() == x + y);
    REQUIRE(cublasSetMathMode(handle.get(), CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS);
    CHECK(product() == 1.0f + y);
    REQUIRE(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS);
    CHECK(product() == x + y);
  }
}

TEST_CASE("emulated cuBLAS: refuses what cublas<t>gemm refuses", "[cuda][matmul][cublas][family:matmul]") {
  const EmuCublasHandle handle;
  const EmuBuffer<float> a(kA, 0), b(kB, 0), c({1, 2, 3, 4}, 0);
  const float one = 1;
  // The valid call is 2 x 2 x 3 with lda 3, ldb 4, ldc 2; each case changes one argument.
  struct Args {
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    int m = 2, n = 2, k = 3, lda = 3, ldb = 4, ldc = 2, batch = 1;
    const float* alpha = nullptr;
  };
  const auto call = [&](Args x) {
    return cublasSgemmStridedBatched(handle.get(), x.ta, x.tb, x.m, x.n, x.k, x.alpha ? x.alpha : &one, a.get(), x.lda,
                                     0, b.get(), x.ldb, 0, &one, c.get(), x.ldc, 0, x.batch);
  };
  struct Case {
    const char* name;
    Args args;
    const char* problem;
  };
  const auto with = [](auto change) {
    Args x;
    change(x);
    return x;
  };
  const Case cases[] = {
      {"m < 0", with([](Args& x) { x.m = -1; }), "m = -1 is below 0"},
      {"n < 0", with([](Args& x) { x.n = -1; }), "n = -1 is below 0"},
      {"k < 0", with([](Args& x) { x.k = -1; }), "k = -1 is below 0"},
      {"batchCount < 0", with([](Args& x) { x.batch = -1; }), "batchCount = -1 is below 0"},
      {"unknown transa", with([](Args& x) { x.ta = static_cast<cublasOperation_t>(7); }), "transa = 7"},
      {"CUBLAS_OP_CONJG", with([](Args& x) { x.tb = CUBLAS_OP_CONJG; }), "transb = 3"},
      {"lda < m", with([](Args& x) { x.lda = 1; }), "lda (rows of A = m) = 1 is below 2"},
      {"lda < k with op(A) = A^T", with([](Args& x) {
         x.ta = CUBLAS_OP_T;
         x.lda = 2;
       }),
       "lda (op(A) transposed"},
      {"ldb < k", with([](Args& x) { x.ldb = 2; }), "ldb (rows of B = k) = 2 is below 3"},
      {"ldb < n with op(B) = B^T", with([](Args& x) {
         x.tb = CUBLAS_OP_T;
         x.ldb = 1;
       }),
       "ldb (op(B) transposed"},
      {"ldc < m", with([](Args& x) { x.ldc = 1; }), "ldc (rows of C = m) = 1 is below 2"},
      {"lda 0 for an empty A", with([](Args& x) {
         x.m = 0;
         x.lda = 0;
       }),
       "lda (rows of A = m) = 0 is below 1"},
  };
  for (const Case& cs : cases) {
    INFO(cs.name);
    CHECK(call(cs.args) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_THAT(::cuda_emu::cublas_last_problem(), Catch::Contains(cs.problem));
    CHECK(c.values() == std::vector<float>{1, 2, 3, 4});
  }
  CHECK(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, nullptr, a.get(), 3, b.get(), 4, &one, c.get(),
                    2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK_THAT(::cuda_emu::cublas_last_problem(), Catch::Contains("alpha and beta"));

  // The smallest leading dimensions are accepted (for op(A) = A^T: k, not m), and empty problems
  // return before touching memory.
  const EmuBuffer<float> at_tight({1, 2, 3, 4, 5, 6}, 0), b_tight({7, 9, 11, 8, 10, 12}, 0), c_tight({0, 0, 0, 0}, 0);
  const float zero = 0;
  CHECK(cublasSgemm(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, at_tight.get(), 3, b_tight.get(), 3, &zero,
                    c_tight.get(), 2) == CUBLAS_STATUS_SUCCESS);
  CHECK(c_tight.values() == kProduct);
  CHECK(call(with([](Args& x) {
          x.m = 0;
          x.lda = 1;
        })) == CUBLAS_STATUS_SUCCESS);
  CHECK(call(with([](Args& x) { x.batch = 0; })) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 0, 5, 3, &one, nullptr, 1, nullptr, 3, &one, nullptr, 1) ==
        CUBLAS_STATUS_SUCCESS);

  SECTION("status names and texts are libcublas's") {
    CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) == "CUBLAS_STATUS_INVALID_VALUE");
    CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)) ==
          "an unsupported value or parameter was passed to the function");
    CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED)) == "CUBLAS_STATUS_NOT_INITIALIZED");
    CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)) == "the library was not initialized");
    CHECK(std::string(cublasGetStatusString(static_cast<cublasStatus_t>(99))) == "unrecognized status");
  }
}

TEST_CASE("emulated cuBLAS: handles", "[cuda][matmul][cublas][family:matmul]") {
  const EmuBuffer<float> a(kA, 0), b(kB, 0), c({1, 2, 3, 4}, 0);
  const float one = 1;
  const auto sgemm = [&](cublasHandle_t h) {
    return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a.get(), 3, b.get(), 4, &one, c.get(), 2);
  };
  CHECK(sgemm(nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(), Catch::Contains("cublasSgemm: the handle is null or destroyed"));
  CHECK(cublasCreate(nullptr) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetStream(nullptr, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasSetMathMode(nullptr, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasDestroy(nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);

  cublasHandle_t h = nullptr;
  REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  cublasMath_t mode = CUBLAS_TENSOR_OP_MATH;
  CHECK(cublasGetMathMode(h, &mode) == CUBLAS_STATUS_SUCCESS);
  CHECK(mode == CUBLAS_DEFAULT_MATH);
  CHECK(cublasSetMathMode(
            h, static_cast<cublasMath_t>(CUBLAS_PEDANTIC_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(5)) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(32)) == CUBLAS_STATUS_INVALID_VALUE);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  cudaStream_t got = nullptr;
  CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasGetStream(h, &got) == CUBLAS_STATUS_SUCCESS);
  CHECK(got == stream);
  CHECK(sgemm(h) == CUBLAS_STATUS_SUCCESS);
  CHECK(c.values() == std::vector<float>{59, 141, 67, 158});
  REQUIRE(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
  (void)cudaStreamDestroy(stream);
  // A destroyed handle is refused, not used.
  CHECK(sgemm(h) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasDestroy(h) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(c.values() == std::vector<float>{59, 141, 67, 158});
}

TEST_CASE("emulated cuBLAS: every matrix must be memory of the handle's device",
          "[cuda][matmul][cublas][family:matmul]") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  if (devices < 2) DEFINE_SKIP_TEST("one emulated device (CUDA_EMU_DEVICES=1)");
  const EmuCublasHandle on0(0);
  const EmuBuffer<float> a(kA, 0), b(kB, 0), c({1, 2, 3, 4}, 0), c1({1, 2, 3, 4}, 1);
  const float one = 1, zero = 0;
  const auto sgemm = [&](const float* pa, const float* pb, float* pc, int ldc) {
    return cublasSgemm(on0.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, pa, 3, pb, 4, &zero, pc, ldc);
  };
  CHECK(sgemm(a.get(), b.get(), c1.get(), 2) == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(),
             Catch::Contains("C of batch entry 0 (2 x 2, ld 2) is in the memory of device 1 but the handle belongs "
                             "to device 0"));
  CHECK(c1.values() == std::vector<float>{1, 2, 3, 4});

  std::vector<float> host_b = kB;
  CHECK(sgemm(a.get(), host_b.data(), c.get(), 2) == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(),
             Catch::Contains("B of batch entry 0 (3 x 2, ld 4) is not in device memory"));

  // C's last column would end at element 3 * 2 + 2 = 8 of a 4-element allocation.
  CHECK(sgemm(a.get(), b.get(), c.get(), 3) == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(), Catch::Contains("C of batch entry 0 (2 x 2, ld 3) runs past the end"));
  CHECK(cublasSgemmStridedBatched(on0.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a.get(), 3, 0, b.get(), 4, 0,
                                  &zero, c.get(), 2, 2, 2) == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(), Catch::Contains("C of batch entry 1 (2 x 2, ld 2) runs past the end"));
  CHECK(c.values() == std::vector<float>{1, 2, 3, 4});

  // Memory and handle agree, but another device is current.
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  const cublasStatus_t wrong_current = sgemm(a.get(), b.get(), c.get(), 2);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(wrong_current == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(),
             Catch::Contains("the current device is 1 but the handle was created on device 0"));

  // The same call on device 1's handle and memory works.
  const EmuCublasHandle on1(1);
  const EmuBuffer<float> a1(kA, 1), b1(kB, 1);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  const cublasStatus_t on_device1 =
      cublasSgemm(on1.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a1.get(), 3, b1.get(), 4, &zero, c1.get(), 2);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(on_device1 == CUBLAS_STATUS_SUCCESS);
  CHECK(c1.values() == kProduct);
}

TEST_CASE("emulated cuBLAS: GemmEx reads 16-bit operands exactly, sums in float and rounds once",
          "[cuda][matmul][cublas][float16][family:matmul]") {
  const EmuCublasHandle handle;
  // k = 3 products whose float sum is exact, then a result that needs rounding: 1 + 2^-11 + 2^-12
  // is above float16's tie between 1 and 1 + 2^-10 and must round up (once, from the float sum).
  const std::vector<__half> a = {__half(1.0f), __half(0x1p-11f), __half(0x1p-12f)};  // 1 x 3, lda 1
  const std::vector<__half> b = {__half(1.0f), __half(1.0f), __half(1.0f)};           // 3 x 1, ldb 3
  const EmuBuffer<__half> da(a, 0), db(b, 0), dc({__half(0.0f)}, 0);
  const float one = 1, zero = 0;
  REQUIRE(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, da.get(), CUDA_R_16F, 1, db.get(),
                       CUDA_R_16F, 3, &zero, dc.get(), CUDA_R_16F, 1, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK(__half_as_ushort(dc.values()[0]) == 0x3C01);
  const long ex_calls = ::cuda_emu::cublas_calls().gemm_ex;
  // bfloat16, strided batched, beta reads C in float: C_i = 2 A_i B + 0.5 C_i.
  const EmuBuffer<__nv_bfloat16> ba({__nv_bfloat16(1.0f), __nv_bfloat16(2.0f), __nv_bfloat16(3.0f),
                                     __nv_bfloat16(4.0f)}, 0);  // A_0 = [1 2], A_1 = [3 4] (1 x 2)
  const EmuBuffer<__nv_bfloat16> bb({__nv_bfloat16(0.5f), __nv_bfloat16(0.25f)}, 0);
  const EmuBuffer<__nv_bfloat16> bc({__nv_bfloat16(8.0f), __nv_bfloat16(-8.0f)}, 0);
  const float two = 2, half = 0.5f;
  REQUIRE(cublasGemmStridedBatchedEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &two, ba.get(), CUDA_R_16BF, 1,
                                     2, bb.get(), CUDA_R_16BF, 2, 0, &half, bc.get(), CUDA_R_16BF, 1, 1, 2,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK(__bfloat162float(bc.values()[0]) == 2 * (0.5f + 0.5f) + 4.0f);
  CHECK(__bfloat162float(bc.values()[1]) == 2 * (1.5f + 1.0f) - 4.0f);
  CHECK(::cuda_emu::cublas_calls().gemm_ex == ex_calls + 1);
  // What the emulator does not know to round is refused, naming the types.
  CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, da.get(), CUDA_R_16F, 1, db.get(),
                     CUDA_R_16F, 3, &zero, dc.get(), CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK_THAT(::cuda_emu::cublas_last_problem(), Catch::Contains("types A 2, B 2, C 0"));
  CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, da.get(), CUDA_R_16F, 1, db.get(),
                     CUDA_R_16F, 3, &zero, dc.get(), CUDA_R_16F, 1, CUBLAS_COMPUTE_16F,
                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_CASE("gemm kernels: 16-bit tensors through cublasGemmEx and through the tiled kernel agree with a float64 "
          "product rounded once", "[cuda][matmul][float16][family:matmul]") {
  REQUIRE(kernels::register_devices().emu);
  for (const kernels::CudaGemm which : {kernels::CudaGemm::Cublas, kernels::CudaGemm::Tiled}) {
    const kernels::CudaGemmGuard use(which);
    for (const DType dt : {DType::Float16, DType::BFloat16}) {
      INFO(kernels::cuda_gemm_name(which) << " " << dtype_name(dt));
      Generator gen(5);
      const Tensor a = kernels::cast(rand_uniform({2, 37, 70}, -1, 1, {}, gen), dt);
      const Tensor b = kernels::cast(rand_uniform({2, 70, 19}, -1, 1, {}, gen), dt);
      const Tensor got = kernels::matmul(copy_to_device(a, Device::emu()), copy_to_device(b, Device::emu()));
      REQUIRE(got.dtype() == dt);
      // Exact products of the 16-bit values, summed in double: the float sum differs from it by far
      // less than half a 16-bit ulp, so the result is the double one rounded, or its neighbour.
      const Tensor want =
          kernels::cast(kernels::matmul(kernels::cast(a, DType::Float64), kernels::cast(b, DType::Float64)), dt);
      const std::vector<double> g =
          kernels::cast(copy_to_device(got, Device::cpu()), DType::Float64).to_vector<double>();
      const std::vector<double> w = kernels::cast(want, DType::Float64).to_vector<double>();
      const double eps = dt == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
      std::int64_t off_by_more_than_one_ulp = 0, exact = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        const double ulp = std::max(std::abs(w[i]), 0x1p-14) * eps;
        if (std::abs(g[i] - w[i]) > 1.01 * ulp) ++off_by_more_than_one_ulp;
        if (g[i] == w[i]) ++exact;
      }
      CHECK(off_by_more_than_one_ulp == 0);
      CHECK(exact > static_cast<std::int64_t>(g.size() * 9 / 10));
    }
  }
}
