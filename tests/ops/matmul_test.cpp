// Matmul family: matmul (2-d, 1-d, batched with broadcasting), bmm, linear, and the gemm kernel
// with its transpose flags and alpha/beta. Harness cases compare the Eigen path with the
// reference loops and check every gradient against finite differences.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <omp.h>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/matmul.h"
#include "kernels/matmul.h"
#include "support/common.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;

namespace {

using V = const std::vector<Tensor>&;

// Shorthand builders for the InputSpecs these cases use.
InputSpec mat(Shape s, bool non_contiguous = false) {
  InputSpec spec;
  spec.shape = std::move(s);
  spec.non_contiguous = non_contiguous;
  return spec;
}

Tensor mm(V x) { return matmul(x[0], x[1]); }

}  // namespace

TEST_CASE("ops: matmul", "[ops][harness][matmul][family:matmul]") {
  define::test::run_op_cases({
      {.name = "matmul/odd_3x5x7", .inputs = {mat({3, 5}), mat({5, 7})}, .forward = mm},
      {.name = "matmul/k1", .inputs = {mat({4, 1}), mat({1, 3})}, .forward = mm},
      {.name = "matmul/1x1x1", .inputs = {mat({1, 1}), mat({1, 1})}, .forward = mm},
      {.name = "matmul/m1_k33_n31", .inputs = {mat({1, 33}), mat({33, 31})}, .forward = mm},
      {.name = "matmul/m31_k33_n2", .inputs = {mat({31, 33}), mat({33, 2})}, .forward = mm},
      {.name = "matmul/m33_k1_n31", .inputs = {mat({33, 1}), mat({1, 31})}, .forward = mm},
      {.name = "matmul/k0", .inputs = {mat({2, 0}), mat({0, 3})}, .forward = mm},
      {.name = "matmul/transposed_a", .inputs = {mat({5, 3}, true), mat({3, 4})}, .forward = mm},
      {.name = "matmul/transposed_b", .inputs = {mat({5, 3}), mat({3, 4}, true)}, .forward = mm},
      {.name = "matmul/transposed_both", .inputs = {mat({4, 3}, true), mat({3, 5}, true)}, .forward = mm},
      {.name = "matmul/transpose_view", .inputs = {mat({3, 4}), mat({5, 4})},
       .forward = [](V x) { return matmul(x[0], transpose(x[1], 0, 1)); }},
      {.name = "matmul/1d_dot", .inputs = {mat({5}), mat({5})}, .forward = mm},
      {.name = "matmul/1d_left", .inputs = {mat({3}), mat({3, 4})}, .forward = mm},
      {.name = "matmul/1d_right", .inputs = {mat({2, 3}), mat({3})}, .forward = mm},
      {.name = "matmul/1d_strided_right", .inputs = {mat({2, 3}), mat({3}, true)}, .forward = mm},
      {.name = "matmul/1d_left_batched", .inputs = {mat({3}), mat({2, 3, 4})}, .forward = mm},
      {.name = "matmul/1d_right_batched", .inputs = {mat({2, 3, 4}), mat({4})}, .forward = mm},
      {.name = "matmul/batched", .inputs = {mat({2, 3, 4}), mat({2, 4, 5})}, .forward = mm},
      {.name = "matmul/batched_broadcast", .inputs = {mat({2, 1, 3, 4}), mat({3, 4, 2})}, .forward = mm},
      {.name = "matmul/batched_broadcast_both", .inputs = {mat({2, 1, 2, 3}), mat({1, 3, 3, 2})}, .forward = mm},
      {.name = "matmul/batch_times_matrix", .inputs = {mat({2, 3, 4}), mat({4, 5})}, .forward = mm},
      {.name = "matmul/matrix_times_batch", .inputs = {mat({3, 4}), mat({2, 4, 5})}, .forward = mm},
      {.name = "matmul/batched_non_contiguous", .inputs = {mat({2, 3, 4}, true), mat({2, 4, 3}, true)}, .forward = mm},
      {.name = "matmul/batch_times_matrix_nc", .inputs = {mat({2, 3, 4}, true), mat({4, 2}, true)}, .forward = mm},
      // Large enough for Eigen's blocked kernels and, batched, for the parallel batch loop.
      {.name = "matmul/large_cpu_only", .inputs = {mat({65, 67}), mat({67, 63})}, .forward = mm, .atol = 1e-4,
       .gradcheck = false},
      {.name = "matmul/large_transposed_cpu_only", .inputs = {mat({65, 67}, true), mat({63, 67})},
       .forward = [](V x) { return matmul(x[0], transpose(x[1], 0, 1)); }, .atol = 1e-4, .gradcheck = false},
      {.name = "matmul/many_small_cpu_only", .inputs = {mat({64, 9, 7}), mat({64, 7, 8}, true)}, .forward = mm,
       .gradcheck = false},
  });
}

// Shapes that leave partial 64x64 tiles and partial 16-deep k slices in the CUDA kernels, each with
// op(a) and op(b) given as plain or transposed (column-major) storage. Only the smallest is
// gradchecked: the Jacobians of the others take minutes.
TEST_CASE("ops: matmul odd shapes and layouts", "[ops][harness][matmul][family:matmul]") {
  struct Mnk {
    std::int64_t m, n, k;
  };
  std::vector<OpCase> cases;
  for (const Mnk s : {Mnk{1, 31, 33}, Mnk{67, 93, 45}, Mnk{96, 64, 80}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        OpCase c;
        c.name = fmt::format("matmul/{}x{}x{}{}{}", s.m, s.k, s.n, ta ? "_ta" : "", tb ? "_tb" : "");
        c.inputs = {mat(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}), mat(tb ? Shape{s.n, s.k} : Shape{s.k, s.n})};
        c.forward = [ta, tb](V x) {
          return matmul(ta ? transpose(x[0], 0, 1) : x[0], tb ? transpose(x[1], 0, 1) : x[1]);
        };
        c.gradcheck = s.m == 1;
        cases.push_back(c);
      }
    }
  }
  // Broadcast batch dims: a's matrices repeat along dim 1, b's along dim 0 (offsets that no
  // single batch stride describes), and a batch of b against one transposed a.
  cases.push_back({.name = "matmul/broadcast_batch_2x1_3", .inputs = {mat({2, 1, 37, 45}), mat({3, 45, 29})},
                   .forward = mm, .gradcheck = false});
  cases.push_back({.name = "matmul/broadcast_batch_transposed",
                   .inputs = {mat({1, 70, 33}), mat({3, 70, 5}, true)},
                   .forward = [](V x) { return matmul(transpose(x[0], 1, 2), x[1]); }, .gradcheck = false});
  define::test::run_op_cases(cases);
}

TEST_CASE("ops: bmm and linear", "[ops][harness][matmul][family:matmul]") {
  define::test::run_op_cases({
      {.name = "bmm", .inputs = {mat({3, 2, 4}), mat({3, 4, 5})}, .forward = [](V x) { return bmm(x[0], x[1]); }},
      {.name = "bmm/non_contiguous", .inputs = {mat({2, 3, 3}, true), mat({2, 3, 1})},
       .forward = [](V x) { return bmm(x[0], x[1]); }},
      {.name = "linear/bias", .inputs = {mat({4, 5}), mat({3, 5}), mat({3})},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }},
      {.name = "linear/no_bias", .inputs = {mat({4, 5}), mat({3, 5})}, .forward = [](V x) { return linear(x[0], x[1]); }},
      {.name = "linear/3d_input", .inputs = {mat({2, 3, 5}), mat({4, 5}), mat({4})},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }},
      {.name = "linear/1d_input", .inputs = {mat({5}), mat({3, 5}), mat({3})},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }},
      {.name = "linear/transposed_input", .inputs = {mat({4, 5}, true), mat({3, 5}, true), mat({3})},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }},
      {.name = "linear/3d_non_contiguous", .inputs = {mat({2, 3, 5}, true), mat({2, 5}), mat({2}, true)},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }},
      {.name = "linear/out1_in1", .inputs = {mat({3, 1}), mat({1, 1}), mat({1})},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }},
      {.name = "linear/large_cpu_only", .inputs = {mat({300, 33}), mat({129, 33}), mat({129})},
       .forward = [](V x) { return linear(x[0], x[1], x[2]); }, .atol = 1e-4, .gradcheck = false},
  });
}

TEST_CASE("matmul: exact values", "[ops][matmul][family:matmul]") {
  const Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor b = from_vector<float>({5, 6, 7, 8}, {2, 2});
  CHECK(matmul(a, b).to_vector<float>() == std::vector<float>{19, 22, 43, 50});
  CHECK(matmul(a, transpose(b, 0, 1)).to_vector<float>() == std::vector<float>{17, 23, 39, 53});
  const Tensor v = from_vector<float>({1, 2});
  const Tensor dot = matmul(v, v);
  CHECK(dot.dim() == 0);
  CHECK(dot.item<float>() == 5.0f);
  CHECK(matmul(v, a).to_vector<float>() == std::vector<float>{7, 10});
  CHECK(matmul(a, v).to_vector<float>() == std::vector<float>{5, 11});
  CHECK(matmul(from_vector<float>({}, {2, 0}), from_vector<float>({}, {0, 3})).to_vector<float>() ==
        std::vector<float>(6, 0.0f));

  const Tensor y = linear(a, b, from_vector<float>({10, 20}));  // a @ b^T + bias
  CHECK(y.to_vector<float>() == std::vector<float>{27, 43, 49, 73});

  // Batch broadcast: one matrix against a stack of two.
  const Tensor stack2 = from_vector<float>({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});
  CHECK(matmul(a, stack2).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8});
  CHECK(bmm(stack2, stack2).to_vector<float>() == std::vector<float>{1, 0, 0, 1, 4, 0, 0, 4});
}

TEST_CASE("matmul: gradients by hand", "[ops][matmul][family:matmul]") {
  Tensor w = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  Tensor x = from_vector<double>({1, 1, 1, 2, 0, -1}, {2, 3}).set_requires_grad();
  Tensor bias = from_vector<double>({0.5, -0.5}).set_requires_grad();
  Tensor y = linear(x, w, bias);
  backward(y, ones({2, 2}, {.dtype = DType::Float64}));
  CHECK(bias.grad().to_vector<double>() == std::vector<double>{2, 2});
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3, 1, 0, 3, 1, 0});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 7, 9, 5, 7, 9});
}

TEST_CASE("matmul: gemm kernel flags, alpha and beta", "[ops][matmul][kernels][family:matmul]") {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const Tensor a = rand_uniform(ta ? Shape{2, 7, 5} : Shape{2, 5, 7}, -1, 1);
      const Tensor b = rand_uniform(tb ? Shape{1, 6, 7} : Shape{1, 7, 6}, -1, 1);  // batch broadcast
      const Tensor init = rand_uniform({2, 5, 6}, -1, 1);
      std::vector<float> results[2];
      for (int backend = 0; backend < 2; ++backend) {
        kernels::CpuBackendGuard guard(backend == 0 ? kernels::Backend::Ref : kernels::Backend::Cpu);
        // A non-contiguous destination (transposed storage) exercises the scratch path.
        Tensor store = empty({2, 6, 5});
        Tensor out = store.as_strided({2, 5, 6}, {30, 1, 5}, 0);
        kernels::copy_into(out, init);
        kernels::gemm(a, b, out, ta, tb, 0.5, 2.0);
        results[backend] = kernels::contiguous(out).to_vector<float>();
      }
      INFO("trans_a " << ta << " trans_b " << tb);
      for (std::size_t i = 0; i < results[0].size(); ++i) CHECK(results[1][i] == Approx(results[0][i]).margin(1e-5));
    }
  }
  // beta == 0 ignores whatever out held, NaN included.
  Tensor out = full({2, 2}, std::nan(""));
  kernels::gemm(from_vector<float>({1, 2, 3, 4}, {2, 2}), from_vector<float>({1, 0, 0, 1}, {2, 2}), out, false, false);
  CHECK(out.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(kernels::column_sum(from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})).to_vector<float>() ==
        std::vector<float>{9, 12});
  CHECK(kernels::column_sum(empty({0, 3})).to_vector<float>() == std::vector<float>{0, 0, 0});
}

// The CPU batch loop's threading rule (kernels/cpu/matmul.cpp): one GEMM per thread unless there
// are few GEMMs, each big enough that every thread's share of one is worth the synchronisation.
TEST_CASE("matmul: CPU batch threading rule", "[ops][matmul][kernels][family:matmul]") {
  const std::int64_t rel_attention_head = 150 * 300 * 48;  // Transformer-XL's position GEMM, per head
  // 8 heads at 8 threads: 0.27 M multiply-adds a thread if each GEMM were split; one GEMM a thread.
  CHECK(kernels::cpu::gemm_batch_parallel(8, rel_attention_head, 8));
  CHECK(kernels::cpu::gemm_batch_parallel(8, rel_attention_head, 16));
  // 2 threads, the build machine's: as before the rule existed (two GEMMs a thread, or small ones).
  CHECK(kernels::cpu::gemm_batch_parallel(8, rel_attention_head, 2));
  CHECK_FALSE(kernels::cpu::gemm_batch_parallel(3, rel_attention_head, 2));
  CHECK(kernels::cpu::gemm_batch_parallel(3, 100 * 100 * 100, 2));
  // Big GEMMs, few of them: each split across the threads.
  CHECK_FALSE(kernels::cpu::gemm_batch_parallel(4, std::int64_t{1024} * 1024 * 1024, 8));
  CHECK_FALSE(kernels::cpu::gemm_batch_parallel(1, 10, 8));
  CHECK_FALSE(kernels::cpu::gemm_batch_parallel(0, 10, 8));

  // Either way the products are the same: the batch at 8 threads (one GEMM a thread) against each
  // GEMM alone at 1 thread, to float rounding.
  kernels::CpuBackendGuard guard(kernels::Backend::Cpu);
  const Tensor q = rand_uniform({8, 150, 48}, -1, 1);
  const Tensor r = rand_uniform({8, 300, 48}, -1, 1);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(8);
  Tensor batched = empty({8, 150, 300});
  kernels::gemm(q, r, batched, false, true, 1.0, 0.0);
  omp_set_num_threads(1);
  std::vector<double> alone;
  for (std::int64_t h = 0; h < 8; ++h) {
    Tensor one = empty({150, 300});
    kernels::gemm(select(q, 0, h), select(r, 0, h), one, false, true, 1.0, 0.0);
    const auto v = test::values(one);
    alone.insert(alone.end(), v.begin(), v.end());
  }
  omp_set_num_threads(threads);
  test::check_close(test::values(batched), alone, 1e-5, 1e-5);
}

TEST_CASE("matmul: bad input", "[ops][matmul][errors][family:matmul]") {
  const Tensor a23 = zeros({2, 3}), a45 = zeros({4, 5});
  REQUIRE_THROWS_WITH(matmul(a23, a45), Catch::Contains("matmul: shapes [2,3] and [4,5] do not match"));
  REQUIRE_THROWS_WITH(matmul(zeros({3}), zeros({4})), Catch::Contains("matmul: shapes [3] and [4] do not match"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 3}), zeros({2})), Catch::Contains("matmul: shapes [2,3] and [2] do not match"));
  REQUIRE_THROWS_WITH(matmul(zeros({}), zeros({3})), Catch::Contains("matmul: operands need at least 1 dim"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})),
                      Catch::Contains("matmul: batch dims of [2,2,3] and [3,3,4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(matmul(a23, zeros({3, 2}, {.dtype = DType::Float64})),
                      Catch::Contains("matmul: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 3}, {.dtype = DType::Int64}), zeros({3, 2}, {.dtype = DType::Int64})),
                      Catch::Contains("matmul: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(matmul(Tensor(), a23), Catch::Contains("matmul: got an undefined tensor"));

  REQUIRE_THROWS_WITH(bmm(a23, a23), Catch::Contains("bmm: expected 3-d tensors"));
  REQUIRE_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({3, 3, 2})), Catch::Contains("bmm: batch sizes of [2,2,3] and [3,3,2]"));
  REQUIRE_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({2, 2, 2})),
                      Catch::Contains("bmm: shapes [2,2,3] and [2,2,2] do not match"));

  REQUIRE_THROWS_WITH(linear(a23, zeros({3})), Catch::Contains("linear: weight must be 2-d [out, in], got [3]"));
  REQUIRE_THROWS_WITH(linear(a23, zeros({4, 2})),
                      Catch::Contains("linear: input [2,3] has 3 features but weight [4,2] expects 2"));
  REQUIRE_THROWS_WITH(linear(a23, zeros({4, 3}), zeros({3})), Catch::Contains("linear: bias shape [3] does not match [4]"));
  REQUIRE_THROWS_WITH(linear(a23, zeros({4, 3}), zeros({4}, {.dtype = DType::Float64})),
                      Catch::Contains("linear: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(linear(zeros({}), zeros({1, 1})), Catch::Contains("linear: input must have at least 1 dim"));

  REQUIRE_THROWS_WITH(kernels::gemm(a23, a23, zeros({2, 3}), false, false),
                      Catch::Contains("gemm: op(a) [2,3] times op(b) [2,3] does not give out [2,3]"));
  REQUIRE_THROWS_WITH(kernels::gemm(zeros({2, 2, 3}), zeros({3, 3, 2}), zeros({2, 2, 2}), false, false),
                      Catch::Contains("gemm: batch dims of [3,3,2] do not broadcast to out [2,2,2]"));
  REQUIRE_THROWS_WITH(kernels::gemm(zeros({3}), a23, a23, false, false), Catch::Contains("gemm: operands need at least 2 dims"));
  if (has_device(DeviceType::CUDA)) {
    REQUIRE_THROWS_WITH(matmul(a23, copy_to_device(zeros({3, 2}), Device::cuda())),
                        Catch::Contains("matmul: tensors on cpu and cuda:0"));
    REQUIRE_THROWS_WITH(linear(a23, zeros({4, 3}), copy_to_device(zeros({4}), Device::cuda())),
                        Catch::Contains("linear: tensors on cpu and cuda:0"));
  }
}
