// Device-side index checks (kernels/cuda/index_check.cu, index_check.cuh, index_error.h) on the
// emulated device: every op family that reads indices (embedding, index, the softmax losses,
// adaptive softmax) checks them in its
// kernels, so a call neither copies the indices to the host nor waits for the device; a bad index
// is reported at the next synchronisation point with the message a CPU tensor raises at once,
// exactly once; good indices cost no device-to-host copy at all.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/factory.h"
#include "support/emulated_device.h"
#include "kernels/adaptive_softmax.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "kernels/embedding.h"
#include "kernels/index.h"
#include "kernels/softmax.h"

using namespace define;
using namespace define::test;

namespace {

constexpr std::int64_t kIgnore = -100;

Tensor emu_ids(const std::vector<std::int64_t>& v, const Shape& shape, DType dtype = DType::Int64) {
  return to_emu(kernels::cast(from_vector<std::int64_t>(v, shape), dtype));
}
Tensor emu_values(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return to_emu(rand_uniform(shape, -1, 1, {}, gen));
}

// Runs f, which launches kernels on the emulated device, counting device-to-host copies; nothing
// may be pending before.
std::uint64_t copies_of(const std::function<void()>& f) {
  REQUIRE_NOTHROW(cuda_emu::synchronize());
  cuda_emu::reset_device_to_host_copies();
  f();
  return cuda_emu::device_to_host_copies();
}

// Good indices: no copy to the host, and nothing to report.
void check_clean(const std::function<void()>& f) {
  CHECK(copies_of(f) == 0);
  CHECK_NOTHROW(cuda_emu::synchronize());
}

// A bad index: the call itself neither throws nor copies; the next synchronisation point throws
// `message`, and the one after it has nothing left to report.
void check_reported(const std::function<void()>& f, const std::string& message) {
  std::uint64_t copies = 0;
  CHECK_NOTHROW(copies = copies_of(f));
  CHECK(copies == 0);
  CHECK_THROWS_WITH(cuda_emu::synchronize(), message);
  CHECK_NOTHROW(cuda_emu::synchronize());
}

}  // namespace

TEST_CASE("cuda index checks: embedding reports a bad index at the next synchronisation",
          "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  const Tensor weight = emu_values({10, 3}, 1);
  for (DType dtype : {DType::Int64, DType::Int32}) {
    INFO(dtype_name(dtype));
    check_clean([&] { kernels::embedding(weight, emu_ids({0, 9, 4}, {3}, dtype)); });
    check_reported([&] { kernels::embedding(weight, emu_ids({1, 40, 2}, {3}, dtype)); },
                   "embedding: index 40 out of range for 10 rows");
    check_reported([&] { kernels::embedding(weight, emu_ids({-1, 2}, {2, 1}, dtype)); },
                   "embedding: index -1 out of range for 10 rows");
    const Tensor grad = emu_values({3, 3}, 2);
    check_clean([&] { kernels::embedding_backward(grad, emu_ids({0, 9, 9}, {3}, dtype), 10, -1); });
    check_reported([&] { kernels::embedding_backward(grad, emu_ids({1, 12, 2}, {3}, dtype), 10, -1); },
                   "embedding_backward: index 12 out of range for 10 rows");
    // 257 sorts by its low eight bits among the 1s, so the sorted keys are not in order: the
    // grouping stays within its arrays all the same.
    const Tensor grad5 = emu_values({5, 3}, 2), unordered = emu_ids({5, 257, 2, 9, 1}, {5}, dtype);
    check_reported([&] { kernels::embedding_backward(grad5, unordered, 10, -1); },
                   "embedding_backward: index 257 out of range for 10 rows");
  }
}

TEST_CASE("cuda index checks: a device-to-host copy reports the error, the first one only",
          "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  REQUIRE_NOTHROW(cuda_emu::synchronize());
  const Tensor weight = emu_values({10, 3}, 3);
  const Tensor bad = kernels::embedding(weight, emu_ids({3, 11}, {2}));
  kernels::embedding(weight, emu_ids({12}, {1}));  // a second failure before the host looked: dropped
  const Tensor good = kernels::embedding(weight, emu_ids({3}, {1}));
  CHECK_THROWS_WITH(good.to_vector<float>(), "embedding: index 11 out of range for 10 rows");
  // Reported once: the same data reads fine now, and a bad index's row reads as zeros.
  const std::vector<float> row = bad.to_vector<float>();
  CHECK(std::vector<float>(row.begin() + 3, row.end()) == std::vector<float>(3, 0.0f));
  CHECK(std::vector<float>(row.begin(), row.begin() + 3) == good.to_vector<float>());
}

TEST_CASE("cuda index checks: gather, index_select, scatter_add and index_add", "[cuda][index][family:index]") {
  REQUIRE(kernels::register_devices().emu);
  const Tensor x = emu_values({3, 4}, 4);
  check_clean([&] { kernels::gather(x, 1, emu_ids({0, 3, 1, 2, 3, 0}, {3, 2})); });
  check_reported([&] { kernels::gather(x, 1, emu_ids({0, 5, 1, 2, 3, 0}, {3, 2})); },
                 "gather: index 5 out of range for dim 1 of size 4");
  check_clean([&] { kernels::index_select(x, 0, emu_ids({2, 0}, {2})); });
  check_reported([&] { kernels::index_select(x, 0, emu_ids({0, 3}, {2}, DType::Int32)); },
                 "index_select: index 3 out of range for dim 0 of size 3");
  // scatter_add by columns (a 2-d index) and through the row grouping (a single column).
  const Tensor src = emu_values({2, 4}, 5);
  check_clean([&] { kernels::scatter_add(x, 0, emu_ids({0, 1, 2, 0, 2, 2, 1, 0}, {2, 4}), src); });
  check_reported([&] { kernels::scatter_add(x, 0, emu_ids({0, 1, 2, 0, 2, 7, 1, 0}, {2, 4}), src); },
                 "scatter_add: index 7 out of range for dim 0 of size 3");
  const Tensor x1 = emu_values({5}, 6), src1 = emu_values({2}, 7);
  check_clean([&] { kernels::scatter_add(x1, 0, emu_ids({1, 4}, {2}), src1); });
  check_reported([&] { kernels::scatter_add(x1, 0, emu_ids({1, 9}, {2}), src1); },
                 "scatter_add: index 9 out of range for dim 0 of size 5");
  const Tensor add_src = emu_values({3, 2}, 8);
  check_clean([&] { kernels::index_add(x, 1, emu_ids({0, 3}, {2}), add_src); });
  check_reported([&] { kernels::index_add(x, 1, emu_ids({0, 4}, {2}), add_src); },
                 "index_add: index 4 out of range for dim 1 of size 4");
}

TEST_CASE("cuda index checks: cross_entropy and nll_loss targets", "[cuda][softmax][family:softmax]") {
  REQUIRE(kernels::register_devices().emu);
  const Tensor logits = emu_values({3, 5}, 9);
  check_clean([&] { kernels::cross_entropy_rows(logits, emu_ids({1, 4, kIgnore}, {3}), kIgnore, 0.1); });
  check_reported([&] { kernels::cross_entropy_rows(logits, emu_ids({1, 7, kIgnore}, {3}), kIgnore, 0.0); },
                 "cross_entropy: target 7 out of range for 5 classes");
  check_clean([&] { kernels::nll_rows(logits, emu_ids({0, kIgnore, 4}, {3}, DType::Int32), kIgnore); });
  check_reported([&] { kernels::nll_rows(logits, emu_ids({0, 9, 4}, {3}), kIgnore); },
                 "nll_loss: target 9 out of range for 5 classes");
}

TEST_CASE("cuda index checks: adaptive softmax targets and tail rows", "[cuda][adaptive_softmax][family:adaptive_softmax]") {
  REQUIRE(kernels::register_devices().emu);
  // Shortlist [0, 4), one tail [4, 8): the head has 4 + 1 columns.
  const std::vector<std::int64_t> bounds{4, 8};
  const Tensor head = emu_values({2, 5}, 10);
  auto loss = [&](const std::vector<std::int64_t>& target, const std::vector<std::int64_t>& rows) {
    const auto n = static_cast<std::int64_t>(rows.size());
    kernels::adaptive_softmax_rows(head, {emu_values({n, 4}, 11)}, {emu_ids(rows, {n})}, emu_ids(target, {2}), bounds,
                                   kIgnore);
  };
  check_clean([&] { loss({1, 5}, {1}); });
  check_clean([&] { loss({kIgnore, 3}, {}); });
  check_reported([&] { loss({1, 9}, {}); }, "adaptive_softmax: target 9 out of range for 8 classes");
  check_reported([&] { loss({1, 5}, {7}); }, "adaptive_softmax: tail 0 lists row 7, outside [0, 2)");
  check_reported([&] { loss({1, 5}, {0}); }, "adaptive_softmax: row 0 (target 1) is listed for tail 0 [4, 8)");
}
