// CUDA softmax-family kernels (kernels/cuda/softmax.cu) on the emulated device, for what the op
// harness cannot express: vocabulary-sized rows against the reference, bit-identical results under
// every emulator schedule (the kernels reduce with warp shuffles and shared memory behind
// barriers), the reference's inf/NaN semantics, and losses whose every target is ignored.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "support/emulated_device.h"
#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/softmax.h"

using namespace define;
using test::kernel_test_device;
using test::check_close;
using test::to_test_device;

namespace {

using define::test::values;

void register_emu() {
  static const kernels::DeviceAvailability devices = kernels::register_devices();
  REQUIRE(devices.emu);
}

// Checks got against ref element by element: NaN where ref is NaN, the same infinity, else close.
void check_same_values(const std::string& what, const Tensor& got, const Tensor& ref) {
  const std::vector<double> g = values(got), r = values(ref);
  REQUIRE(g.size() == r.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO(what << ", element " << i << ": got " << g[i] << ", reference " << r[i]);
    if (std::isnan(r[i]))
      CHECK(std::isnan(g[i]));
    else
      CHECK(g[i] == Approx(r[i]).epsilon(1e-5).margin(1e-6));
  }
}

// Every output of the family for one set of inputs, as host doubles (the exact float32 values):
// x3d through the column tiles (softmax over its middle dim), rows through one warp per row,
// long_rows through one block per row and the loss kernels (target: one class per long row).
std::vector<std::vector<double>> family_outputs(const Tensor& x3d, const Tensor& rows, const Tensor& long_rows,
                                                const Tensor& target) {
  std::vector<std::vector<double>> out;
  for (const auto& [x, dim] : {std::pair{x3d, 1}, std::pair{rows, 1}, std::pair{long_rows, -1}}) {
    Tensor y = kernels::softmax(x, dim), ly = kernels::log_softmax(x, dim);
    out.push_back(values(y));
    out.push_back(values(ly));
    // Each output doubles as the other's upstream gradient: any tensor of the right shape will do.
    out.push_back(values(kernels::softmax_backward(y, ly, dim)));
    out.push_back(values(kernels::log_softmax_backward(ly, y, dim)));
  }
  kernels::CrossEntropyRows ce = kernels::cross_entropy_rows(long_rows, target, -100, 0.1);
  kernels::ReducedLoss mean = kernels::reduce_loss_rows(ce.loss, target, -100, true);
  out.push_back(values(ce.loss));
  out.push_back(values(ce.lse));
  out.push_back(values(mean.loss));
  out.push_back(values(mean.total_weight));
  out.push_back(values(kernels::cross_entropy_backward(long_rows, ce.lse, target, mean.loss, mean.total_weight, -100,
                                                       0.1)));
  Tensor nll = kernels::nll_rows(kernels::log_softmax(long_rows, 1), target, -100);
  kernels::ReducedLoss sum = kernels::reduce_loss_rows(nll, target, -100, false);
  out.push_back(values(nll));
  out.push_back(values(sum.loss));
  out.push_back(values(kernels::nll_backward(long_rows.shape(), target, sum.loss, sum.total_weight, -100)));
  return out;
}

}  // namespace

TEST_CASE("cuda softmax: [64, 10007] log_softmax and cross entropy match the reference",
          "[cuda][softmax][family:softmax]") {
  register_emu();
  Generator gen(11);
  const std::int64_t rows = 64, classes = 10007;
  Tensor x = rand_uniform({rows, classes}, -8, 8, {}, gen);
  std::vector<std::int64_t> t(rows);
  for (std::int64_t i = 0; i < rows; ++i) t[i] = i % 9 == 4 ? -100 : (i * 1237) % classes;
  Tensor target = from_vector<std::int64_t>(t);
  Tensor dy = rand_uniform({rows, classes}, -1, 1, {}, gen);

  Tensor xe = to_test_device(x), te = to_test_device(target), dye = to_test_device(dy);
  Tensor ly = kernels::log_softmax(xe, 1);
  Tensor dly = kernels::log_softmax_backward(ly, dye, 1);
  kernels::CrossEntropyRows ce = kernels::cross_entropy_rows(xe, te, -100, 0.1);
  kernels::ReducedLoss mean = kernels::reduce_loss_rows(ce.loss, te, -100, true);
  Tensor dce = kernels::cross_entropy_backward(xe, ce.lse, te, mean.loss, mean.total_weight, -100, 0.1);

  kernels::CpuBackendGuard ref_backend(kernels::Backend::Ref);
  Tensor ly_ref = kernels::log_softmax(x, 1);
  kernels::CrossEntropyRows ce_ref = kernels::cross_entropy_rows(x, target, -100, 0.1);
  kernels::ReducedLoss mean_ref = kernels::reduce_loss_rows(ce_ref.loss, target, -100, true);
  check_close(ly, ly_ref, 1e-5, 1e-5, "log_softmax");
  check_close(dly, kernels::log_softmax_backward(ly_ref, dy, 1), 1e-5, 1e-5, "log_softmax_backward");
  check_close(ce.loss, ce_ref.loss, 1e-5, 1e-5, "cross_entropy rows");
  check_close(ce.lse, ce_ref.lse, 1e-5, 1e-5, "cross_entropy lse");
  check_close(mean.loss, mean_ref.loss, 1e-5, 1e-5, "cross_entropy mean");
  CHECK(values(mean.total_weight) == values(mean_ref.total_weight));
  // The backward pass with the reference's own lse and weight, so it is checked on its own.
  check_close(dce,
              kernels::cross_entropy_backward(x, ce_ref.lse, target, mean_ref.loss, mean_ref.total_weight, -100, 0.1),
              1e-5, 1e-5, "cross_entropy_backward");
  const std::vector<double> lse = values(ce.lse);
  for (std::int64_t i = 0; i < rows; ++i)
    if (t[i] == -100) CHECK(lse[i] == 0.0);
}

// A row of 2^20 logits goes to one 512-thread block: 2048 elements per thread. Each thread's first
// element is the row's maximum 0, the rest are -17 (exp = 4.1e-8, below half an ulp of 1), so a
// plain float sum of exp(x - max) rounds every one of them away (8.5e-5 of the sum); the
// compensated sum (kernels/cuda/float_sum.cuh) keeps them.
TEST_CASE("cuda softmax: a long row of small terms keeps its sum", "[cuda][softmax][family:softmax]") {
  register_emu();
  const std::int64_t n = 1 << 20;
  std::vector<float> v(static_cast<std::size_t>(n), -17.0f);
  for (std::size_t j = 0; j < 512; ++j) v[j] = 0.0f;
  const Tensor x = from_vector<float>(v, {1, n});
  const Tensor xe = to_test_device(x);
  kernels::CpuBackendGuard ref_backend(kernels::Backend::Ref);
  const Tensor x64 = kernels::cast(x, DType::Float64);
  // Absolute error of log-probabilities (the error of log(sum)), relative error of probabilities.
  const std::vector<double> ly = values(kernels::log_softmax(xe, 1)), ly_ref = values(kernels::log_softmax(x64, 1));
  const std::vector<double> y = values(kernels::softmax(xe, 1)), y_ref = values(kernels::softmax(x64, 1));
  double log_err = 0, rel_err = 0;
  for (std::size_t j = 0; j < ly.size(); ++j) {
    log_err = std::max(log_err, std::abs(ly[j] - ly_ref[j]));
    rel_err = std::max(rel_err, std::abs(y[j] - y_ref[j]) / y_ref[j]);
  }
  CHECK(log_err < 2e-6);
  CHECK(rel_err < 2e-6);
}

TEST_CASE("cuda softmax: results are bit-identical under forward, reverse and random schedules",
          "[cuda][softmax][family:softmax]") {
  register_emu();
  Generator gen(5);
  Tensor x3d = to_test_device(rand_uniform({3, 37, 45}, -3, 3, {}, gen));  // 45 columns: a full and a partial tile
  Tensor rows = to_test_device(rand_uniform({19, 300}, -3, 3, {}, gen));
  Tensor long_rows = to_test_device(rand_uniform({5, 2000}, -6, 6, {}, gen));
  Tensor target = to_test_device(from_vector<std::int64_t>({1999, -100, 0, 1234, -100}));

  std::vector<std::vector<double>> forward;
  {
    kernels::EmuScheduleGuard schedule("forward");
    forward = family_outputs(x3d, rows, long_rows, target);
  }
  for (const std::string s : {"reverse", "random:1", "race:20240607"}) {
    kernels::EmuScheduleGuard schedule(s);
    const auto other = family_outputs(x3d, rows, long_rows, target);
    REQUIRE(other.size() == forward.size());
    for (std::size_t k = 0; k < forward.size(); ++k) {
      INFO("schedule " << s << ", output " << k);
      CHECK(other[k] == forward[k]);
    }
  }
}

TEST_CASE("cuda softmax: inf and NaN follow the reference", "[cuda][softmax][family:softmax]") {
  register_emu();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Rows: masked logits, all masked, one +inf, a NaN, a NaN after the maximum.
  const std::vector<float> v = {0.f, -inf, 1.f, -inf, 2.f,  -inf, -inf, -inf, -inf, -inf, 1.f, 2.f, inf,
                                0.f, -1.f, nan, 1.f,  2.f,  3.f,  -inf, 5.f,  4.f,  nan,  0.f, -inf};
  Tensor target = from_vector<std::int64_t>({2, 0, 1, 4, 3});
  Tensor te = to_test_device(target);
  for (std::int64_t n : {5, 1100}) {  // one warp per row; one block per row (patterns padded with -inf)
    std::vector<float> padded;
    for (int r = 0; r < 5; ++r) {
      for (int j = 0; j < 5; ++j) padded.push_back(v[r * 5 + j]);
      for (std::int64_t j = 5; j < n; ++j) padded.push_back(-inf);
    }
    Tensor x = from_vector<float>(padded, {5, n});
    Tensor xe = to_test_device(x);
    INFO("row length " << n);
    const auto run = [&](const Tensor& t, const Tensor& tt) {
      return std::vector<Tensor>{kernels::softmax(t, 1),
                                 kernels::log_softmax(t, 1),
                                 kernels::softmax(transpose(t, 0, 1), 0),  // column tiles
                                 kernels::cross_entropy_rows(t, tt, -100, 0.1).loss,
                                 kernels::cross_entropy_rows(t, tt, -100, 0.0).lse};
    };
    const std::vector<Tensor> got = run(xe, te);
    std::vector<Tensor> ref;
    {
      kernels::CpuBackendGuard ref_backend(kernels::Backend::Ref);
      ref = run(x, target);
    }
    for (std::size_t k = 0; k < got.size(); ++k) check_same_values("output " + std::to_string(k), got[k], ref[k]);
    // Without label smoothing the eps * (lse - mean of the logits) term is left out everywhere
    // (it would be 0 * inf = NaN once a logit is masked to -inf): all three paths agree.
    Tensor plain = kernels::cross_entropy_rows(xe, te, -100, 0.0).loss;
    {
      kernels::CpuBackendGuard ref_backend(kernels::Backend::Ref);
      check_same_values("cross entropy without smoothing vs reference", plain,
                        kernels::cross_entropy_rows(x, target, -100, 0.0).loss);
    }
    kernels::CpuBackendGuard cpu_backend(kernels::Backend::Cpu);
    check_same_values("cross entropy without smoothing", plain, kernels::cross_entropy_rows(x, target, -100, 0.0).loss);
    CHECK_FALSE(std::isnan(values(plain)[0]));  // masked logits, finite maximum: a finite loss
  }
}

TEST_CASE("cuda softmax: every target ignored gives 0 loss and zero gradients, no NaN",
          "[cuda][softmax][family:softmax]") {
  register_emu();
  for (std::int64_t classes : {7, 1500}) {  // one warp per row, one block per row
    for (DType target_dtype : {DType::Int64, DType::Int32}) {
      Tensor target = to_test_device(kernels::cast(from_vector<std::int64_t>({-100, -100, -100}), target_dtype));
      for (double smoothing : {0.0, 0.2}) {
        for (Reduction reduction : {Reduction::Mean, Reduction::Sum}) {
          INFO("classes " << classes << ", smoothing " << smoothing << ", reduction " << int(reduction));
          Tensor logits = to_test_device(rand_uniform({3, classes}, -1, 1));
          logits.set_requires_grad();
          Tensor loss = cross_entropy(logits, target, -100, smoothing, reduction);
          CHECK(loss.device() == kernel_test_device());
          CHECK(values(loss) == std::vector<double>{0.0});
          backward(loss);
          for (double g : values(logits.grad())) REQUIRE(g == 0.0);

          Tensor lp = to_test_device(rand_uniform({3, classes}, -1, 1));
          lp.set_requires_grad();
          Tensor nll = nll_loss(lp, target, -100, reduction);
          CHECK(values(nll) == std::vector<double>{0.0});
          backward(nll);
          for (double g : values(lp.grad())) REQUIRE(g == 0.0);
        }
      }
      // The per-row pieces directly: zero rows, zero lse, weight 0 for a mean.
      Tensor logits = to_test_device(rand_uniform({3, classes}, -1, 1));
      kernels::CrossEntropyRows ce = kernels::cross_entropy_rows(logits, target, -100, 0.1);
      CHECK(values(ce.loss) == std::vector<double>{0, 0, 0});
      CHECK(values(ce.lse) == std::vector<double>{0, 0, 0});
      kernels::ReducedLoss mean = kernels::reduce_loss_rows(ce.loss, target, -100, true);
      CHECK(values(mean.loss) == std::vector<double>{0.0});
      CHECK(values(mean.total_weight) == std::vector<double>{0.0});
    }
  }
}

TEST_CASE("cuda softmax: loss reduction over many rows is exact in count and deterministic",
          "[cuda][softmax][family:softmax]") {
  register_emu();
  Generator gen(9);
  const std::int64_t n = 5003;  // not a multiple of the 256-thread block
  Tensor rows = rand_uniform({n}, 0, 4, {}, gen);
  std::vector<std::int64_t> t(n);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    t[i] = i % 7 == 3 ? -1 : 0;
    kept += t[i] != -1;
  }
  Tensor target = from_vector<std::int64_t>(t);
  Tensor re = to_test_device(rows), te = to_test_device(kernels::cast(target, DType::Int32));
  kernels::ReducedLoss mean = kernels::reduce_loss_rows(re, te, -1, true);
  kernels::ReducedLoss sum = kernels::reduce_loss_rows(re, te, -1, false);
  CHECK(values(mean.total_weight) == std::vector<double>{double(kept)});
  CHECK(values(sum.total_weight) == std::vector<double>{1.0});
  kernels::ReducedLoss again = kernels::reduce_loss_rows(re, te, -1, true);
  CHECK(values(again.loss) == values(mean.loss));
  kernels::CpuBackendGuard ref_backend(kernels::Backend::Ref);
  check_close(mean.loss, kernels::reduce_loss_rows(rows, target, -1, true).loss, 0, 1e-6, "mean");
  check_close(sum.loss, kernels::reduce_loss_rows(rows, target, -1, false).loss, 0, 1e-6, "sum");
  // Zero rows: the empty mean is 0 with weight 0.
  Tensor none = to_test_device(zeros({0})), no_target = to_test_device(zeros({0}, {.dtype = DType::Int64}));
  kernels::ReducedLoss empty_mean = kernels::reduce_loss_rows(none, no_target, -100, true);
  CHECK(values(empty_mean.loss) == std::vector<double>{0.0});
  CHECK(values(empty_mean.total_weight) == std::vector<double>{0.0});
}
