// The CUDA embedding kernels (kernels/cuda/embedding.cu, with the grouping by token id from
// kernels/cuda/index.cu) on the emulated device. The op harness (tests/ops/embedding_test.cpp,
// mode emu) covers small shapes; here: the backward with heavy collisions and with vocabularies
// that need several radix passes, compared with the reference, bit-identical under the
// emulator's forward/reverse/random schedules (the sort uses warp shuffles and barriers) and
// bit-identical to the CPU path, which sums every row in the same (position) order.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/factory.h"
#include "support/emulated_device.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/embedding.h"

using namespace define;
using namespace define::test;

namespace {


const std::vector<std::string> kSchedules = {"forward", "reverse", "random:20240611", "race:20240611"};

// embedding_backward on the emulated device under every schedule: all runs bit-identical, equal
// to the CPU path bit for bit and to the reference within tolerance. Returns the device result.
Tensor check_backward(const Tensor& grad, const Tensor& ids, std::int64_t rows, std::int64_t padding_idx,
                      const std::string& what) {
  const Tensor ref = on_cpu_backend(kernels::Backend::Ref,
                                    [&] { return kernels::embedding_backward(grad, ids, rows, padding_idx); });
  const Tensor cpu = on_cpu_backend(kernels::Backend::Cpu,
                                    [&] { return kernels::embedding_backward(grad, ids, rows, padding_idx); });
  const Tensor g = to_test_device(grad), i = to_test_device(ids);
  Tensor first;
  for (const std::string& schedule : kSchedules) {
    kernels::EmuScheduleGuard guard(schedule);
    const Tensor got = kernels::embedding_backward(g, i, rows, padding_idx);
    REQUIRE(got.device() == kernel_test_device());
    if (!first.defined()) first = got;
    check_identical(got, first, what + ": schedule " + schedule + " vs forward");
  }
  check_identical(first, cpu, what + ": emu vs cpu path");
  check_close(first, ref, 1e-5, 1e-5, what + ": emu vs reference");
  return first;
}

}  // namespace

TEST_CASE("cuda embedding: backward, 4096 tokens over 7 rows, deterministic", "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(7);
  const Tensor grad = rand_uniform({4096, 40}, -1, 1, {}, gen);
  for (DType id_dtype : {DType::Int64, DType::Int32}) {
    const Tensor ids = rand_int({4096}, 7, {.dtype = id_dtype}, gen);
    check_backward(grad, ids, 7, -1, std::string("vocab 7, ids ") + std::string(dtype_name(id_dtype)));
  }
  // Ids as a [64, 64] batch (flattened by the entry point) and float64 gradients.
  const Tensor ids2d = rand_int({64, 64}, 7, {.dtype = DType::Int64}, gen);
  const Tensor grad64 = rand_uniform({64, 64, 33}, -1, 1, {.dtype = DType::Float64}, gen);
  check_backward(grad64, ids2d, 7, -1, "vocab 7, float64, 2-d ids");
}

TEST_CASE("cuda embedding: backward padding row stays zero", "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(11);
  const Tensor grad = rand_uniform({3000, 9}, -1, 1, {}, gen);
  const Tensor ids = rand_int({3000}, 7, {.dtype = DType::Int64}, gen);
  const Tensor got = to_cpu(check_backward(grad, ids, 7, 3, "vocab 7, padding 3"));
  const std::vector<float> w = got.to_vector<float>();
  for (int k = 0; k < 9; ++k) CHECK(w[3 * 9 + k] == 0.0f);
  // The padding row also stays zero when every token is padding.
  const Tensor all_pad = to_cpu(
      kernels::embedding_backward(to_test_device(grad), to_test_device(zeros({3000}, {.dtype = DType::Int64})), 2, 0));
  CHECK(all_pad.to_vector<float>() == std::vector<float>(18, 0.0f));
}

TEST_CASE("cuda embedding: backward over several radix passes and tiles", "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(13);
  // 50,000 rows need four 4-bit passes; 5,000 tokens fill two tiles of 2,048 and part of a third.
  const Tensor grad = rand_uniform({5000, 4}, -1, 1, {}, gen);
  const Tensor ids = rand_int({5000}, 50000, {.dtype = DType::Int32}, gen);
  check_backward(grad, ids, 50000, 12345, "vocab 50000");
  // Sizes around one tile, a vocabulary of one row, and a width of one.
  for (std::int64_t n : {1, 31, 2047, 2048, 2049}) {
    const Tensor g = rand_uniform({n, 1}, -1, 1, {}, gen);
    check_backward(g, rand_int({n}, 257, {.dtype = DType::Int64}, gen), 257, -1, "vocab 257, tokens " + std::to_string(n));
    check_backward(g, zeros({n}, {.dtype = DType::Int64}), 1, -1, "vocab 1, tokens " + std::to_string(n));
  }
}

TEST_CASE("cuda embedding: backward into an existing gradient, padding row and unnamed rows kept",
          "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(19);
  // 3,000 tokens over 500 rows (several radix passes, collisions), padding row 3.
  const Tensor grad = rand_uniform({3000, 9}, -1, 1, {}, gen);
  const Tensor ids = rand_int({3000}, 500, {.dtype = DType::Int64}, gen);
  const Tensor start = rand_uniform({600, 9}, -1, 1, {}, gen);  // rows 500..599 are never named
  auto run_cpu = [&](kernels::Backend backend) {
    return on_cpu_backend(backend, [&] {
      Tensor into = kernels::cast(start, DType::Float32);
      kernels::embedding_backward_into(into, grad, ids, 3);
      return into;
    });
  };
  const Tensor ref = run_cpu(kernels::Backend::Ref), cpu = run_cpu(kernels::Backend::Cpu);
  const Tensor got = run_all_schedules(
      [&] {
        Tensor into = to_test_device(start);
        kernels::embedding_backward_into(into, to_test_device(grad), to_test_device(ids), 3);
        return into;
      },
      "embedding_backward_into");
  check_identical(got, cpu, "backward into: emu vs cpu path");
  check_close(got, ref, 1e-5, 1e-5, "backward into: emu vs reference");
  const std::vector<float> w = to_cpu(got).to_vector<float>(), s = start.to_vector<float>();
  for (int k = 0; k < 9; ++k) CHECK(w[3 * 9 + k] == s[3 * 9 + k]);
  CHECK(std::vector<float>(w.begin() + 500 * 9, w.end()) == std::vector<float>(s.begin() + 500 * 9, s.end()));
}

TEST_CASE("cuda embedding: backward with no tokens writes zeros", "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  const Tensor got = kernels::embedding_backward(to_test_device(zeros({0, 3})),
                                                 to_test_device(zeros({0}, {.dtype = DType::Int64})), 5, -1);
  CHECK(to_cpu(got).to_vector<float>() == std::vector<float>(15, 0.0f));
}

TEST_CASE("cuda embedding: lookup with odd shapes and strided tables", "[cuda][embedding][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(17);
  for (std::int64_t width : {1, 33, 257}) {
    const Tensor table = rand_uniform({width, 31}, -1, 1, {}, gen).as_strided({31, width}, {1, 31}, 0);  // transposed
    const Tensor ids = rand_int({3, 67}, 31, {.dtype = DType::Int32}, gen);
    const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::embedding(table, ids); });
    Tensor emu_table = empty({width, 31}, {.device = kernel_test_device()}).as_strided({31, width}, {1, 31}, 0);
    kernels::copy_into(emu_table, to_test_device(kernels::contiguous(table)));
    const Tensor got = kernels::embedding(emu_table, to_test_device(ids));
    CHECK(got.shape() == Shape{3, 67, width});
    check_identical(got, ref, "lookup width " + std::to_string(width));
  }
}
