// CUDA adaptive-softmax kernels (kernels/cuda/adaptive_softmax.cu) on the emulated device:
// bit-identical results under the forward, reverse and random emulator schedules (warp-per-row
// and block-per-row reductions, loss, gradients, log-probabilities and their gradients), and
// larger shapes against the double-accumulating reference in float32 and float64, including rows
// wider than 1024 (one block per row), empty tails and ignored rows.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/factory.h"
#include "support/emulated_device.h"
#include "kernels/adaptive_softmax.h"
#include "kernels/backend.h"
#include "kernels/devices.h"

using namespace define;
using define::test::check_close;
using define::test::check_identical;
using test::kernel_test_device;
using test::to_test_device;
using Bounds = std::vector<std::int64_t>;

namespace {

// One problem: logits for the loss (tails hold only their rows) and for the log-probabilities
// (tails hold every row), targets, the partition, and upstream gradients. All on the CPU.
struct Problem {
  Bounds bounds;
  Tensor target, head, grad_rows, grad_lp;
  std::vector<Tensor> tails, tail_rows, full_tails;
};

Problem make_problem(std::int64_t n, const Bounds& b, DType dtype, std::uint64_t seed, std::int64_t ignore_every,
                     std::int64_t skip_tail = -1) {
  Generator gen(seed);
  Problem p;
  p.bounds = b;
  std::vector<std::int64_t> t;
  const std::vector<std::int64_t> draws = rand_int({n}, b.back(), {.dtype = DType::Int64}, gen).to_vector<std::int64_t>();
  for (std::int64_t r = 0; r < n; ++r) {
    std::int64_t w = draws[static_cast<std::size_t>(r)];
    if (skip_tail >= 0 && w >= b[skip_tail] && w < b[skip_tail + 1]) w = w % b[0];  // leave that tail empty
    t.push_back(ignore_every > 0 && r % ignore_every == 0 ? -100 : w);
  }
  p.target = from_vector<std::int64_t>(t, {n});
  const kernels::AdaptivePartition part = kernels::adaptive_partition(p.target, b, -100);
  const std::int64_t head_width = b[0] + static_cast<std::int64_t>(b.size()) - 1;
  p.head = rand_uniform({n, head_width}, -4, 4, {.dtype = dtype}, gen);
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    p.tail_rows.push_back(part.rows[i + 1]);
    p.tails.push_back(rand_uniform({part.counts[i + 1], b[i + 1] - b[i]}, -4, 4, {.dtype = dtype}, gen));
    p.full_tails.push_back(rand_uniform({n, b[i + 1] - b[i]}, -4, 4, {.dtype = dtype}, gen));
  }
  p.grad_rows = rand_uniform({n}, -1, 1, {.dtype = dtype}, gen);
  p.grad_lp = rand_uniform({n, b.back()}, -1, 1, {.dtype = dtype}, gen);
  return p;
}

std::vector<Tensor> moved(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(copy_to_device(t, d));
  return out;
}

// A total weight of 3 (as a mean over three rows would give), on the head's device and dtype.
Tensor full_like_weight(const Tensor& head) { return full({}, 3.0, {head.dtype(), head.device()}); }

// Every output of the family for problem p on device d, in a fixed order: loss, head_lse,
// tail_lse..., grad_head, grad_tails..., log-probs, head_lp, lp grad_head, lp grad_tails...
std::vector<Tensor> run_family(const Problem& p, Device d) {
  const Tensor head = copy_to_device(p.head, d), target = copy_to_device(p.target, d);
  const std::vector<Tensor> tails = moved(p.tails, d), rows = moved(p.tail_rows, d), full = moved(p.full_tails, d);
  const kernels::AdaptiveSoftmaxRows fwd = kernels::adaptive_softmax_rows(head, tails, rows, target, p.bounds, -100);
  const Tensor weight = full_like_weight(head);
  const kernels::AdaptiveSoftmaxGrads g = kernels::adaptive_softmax_backward(
      head, tails, fwd, rows, target, p.bounds, copy_to_device(p.grad_rows, d), weight, -100);
  const kernels::AdaptiveLogProb lp = kernels::adaptive_log_prob(head, full, p.bounds);
  const kernels::AdaptiveLogProbGrads lg = kernels::adaptive_log_prob_backward(lp, copy_to_device(p.grad_lp, d), p.bounds);
  std::vector<Tensor> out{fwd.loss, fwd.head_lse};
  out.insert(out.end(), fwd.tail_lse.begin(), fwd.tail_lse.end());
  out.push_back(g.grad_head);
  out.insert(out.end(), g.grad_tails.begin(), g.grad_tails.end());
  out.push_back(lp.out);
  out.push_back(lp.head_lp);
  out.push_back(lg.grad_head);
  out.insert(out.end(), lg.grad_tails.begin(), lg.grad_tails.end());
  return out;
}

}  // namespace

TEST_CASE("cuda adaptive_softmax: bit-identical under forward, reverse and random schedules",
          "[cuda][adaptive_softmax][family:adaptive_softmax]") {
  REQUIRE(kernels::register_devices().emu);
  // Warp-per-row rows (33 rows: a partial 8-row block; head 13 wide, tails 7 and 20: partial
  // warps in every row) and block-per-row rows (7 rows, head 1027 wide, tail 1100 wide).
  for (const auto& [rows, b] : {std::pair{33, Bounds{11, 18, 38}}, std::pair{7, Bounds{1025, 1030, 2130}}}) {
    const Problem p = make_problem(rows, b, DType::Float32, 7, 5);
    const std::vector<Tensor> first = run_family(p, kernel_test_device());
    for (const std::string schedule : {"reverse", "random:4242", "race:17"}) {
      kernels::EmuScheduleGuard guard(schedule);
      const std::vector<Tensor> again = run_family(p, kernel_test_device());
      REQUIRE(again.size() == first.size());
      for (std::size_t i = 0; i < first.size(); ++i)
        check_identical(again[i], first[i], "output " + std::to_string(i) + " under " + schedule);
    }
  }
}

namespace {

struct Case {
  std::int64_t n;
  Bounds bounds;
  std::int64_t skip_tail;  // a tail left without rows (-1: none)
};

// Emulated kernels and the CPU fast path against the reference, float32 and float64.
void check_against_reference(const Case& c) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO("n " << c.n << ", V " << c.bounds.back() << ", " << dtype_name(dtype));
    const Problem p = make_problem(c.n, c.bounds, dtype, 11, 9, c.skip_tail);
    const std::vector<Tensor> ref = [&] {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      return run_family(p, Device::cpu());
    }();
    const std::vector<Tensor> emu = run_family(p, kernel_test_device());
    const std::vector<Tensor> cpu = run_family(p, Device::cpu());
    REQUIRE(emu.size() == ref.size());
    const double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      check_close(emu[i], ref[i], tol, tol, "emu output " + std::to_string(i));
      check_close(cpu[i], ref[i], tol, tol, "cpu output " + std::to_string(i));
    }
  }
}

}  // namespace

TEST_CASE("cuda adaptive_softmax: warp-per-row shapes match the reference",
          "[cuda][adaptive_softmax][family:adaptive_softmax]") {
  REQUIRE(kernels::register_devices().emu);
  // 129 rows (16 full 8-row blocks and one more row), head 302 wide, tails of 600 and 100 words;
  // one row only.
  check_against_reference({129, {300, 900, 1000}, -1});
  check_against_reference({1, {40, 1000}, -1});
}

TEST_CASE("cuda adaptive_softmax: block-per-row shapes and an empty tail match the reference",
          "[cuda][adaptive_softmax][family:adaptive_softmax]") {
  REQUIRE(kernels::register_devices().emu);
  // 19 rows through a 1103-wide head and a 1200-word tail (one block per row); 100 rows with the
  // middle tail left empty.
  check_against_reference({19, {1100, 1150, 2350, 2400}, -1});
  check_against_reference({100, {64, 300, 900, 1000}, 1});
}
