// Embedding: lookup and its deterministic backward (repeated ids, padding_idx, int32/int64 ids).
#include <catch2/catch.hpp>

#include <omp.h>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/embedding.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;

namespace {

using V = const std::vector<Tensor>&;

InputSpec ids(Shape shape, std::vector<double> values, DType dtype = DType::Int64) {
  InputSpec spec;
  spec.shape = std::move(shape);
  spec.fill = InputSpec::Fill::Fixed;
  spec.index_dtype = dtype;
  spec.grad = false;
  spec.values = std::move(values);
  return spec;
}
InputSpec mat(Shape s, bool non_contiguous = false) {
  InputSpec spec;
  spec.shape = std::move(s);
  spec.non_contiguous = non_contiguous;
  return spec;
}
InputSpec random_ids(Shape shape, std::int64_t high, DType dtype = DType::Int64, bool non_contiguous = false) {
  InputSpec spec;
  spec.shape = std::move(shape);
  spec.fill = InputSpec::Fill::Index;
  spec.index_high = high;
  spec.index_dtype = dtype;
  spec.non_contiguous = non_contiguous;
  return spec;
}

Tensor emb(V x) { return embedding(x[0], x[1]); }

}  // namespace

TEST_CASE("ops: embedding", "[ops][harness][embedding][family:embedding]") {
  const InputSpec table = mat({6, 3});
  define::test::run_op_cases({
      {.name = "embedding/repeated_ids", .inputs = {table, ids({2, 4}, {1, 3, 1, 5, 0, 1, 3, 1})}, .forward = emb},
      {.name = "embedding/int32_ids", .inputs = {table, ids({5}, {2, 2, 4, 0, 2}, DType::Int32)}, .forward = emb},
      // padding_idx withholds a gradient the finite differences do see: cpu-vs-ref only here;
      // the exact-value test below checks the padding row's zero gradient.
      {.name = "embedding/padding_idx", .inputs = {table, ids({2, 3}, {2, 1, 2, 4, 2, 5})},
       .forward = [](V x) { return embedding(x[0], x[1], 2); }, .gradcheck = false},
      {.name = "embedding/padding_idx_int32", .inputs = {table, ids({4}, {0, 0, 3, 5}, DType::Int32)},
       .forward = [](V x) { return embedding(x[0], x[1], 0); }, .gradcheck = false},
      {.name = "embedding/padding_idx_unused", .inputs = {table, ids({3}, {1, 4, 1})},
       .forward = [](V x) { return embedding(x[0], x[1], 2); }},
      {.name = "embedding/non_contiguous_table", .inputs = {mat({5, 4}, true),
                                                            random_ids({3, 2}, 5)},
       .forward = emb},
      {.name = "embedding/non_contiguous_ids", .inputs = {table, random_ids({3, 4}, 6, DType::Int64, true)},
       .forward = emb},
      {.name = "embedding/scalar_id", .inputs = {table, ids({}, {4})}, .forward = emb},
      {.name = "embedding/one_row_one_col", .inputs = {mat({1, 1}), ids({3}, {0, 0, 0})}, .forward = emb},
      {.name = "embedding/no_ids", .inputs = {table, ids({0}, {})}, .forward = emb},
      // Big enough for the parallel lookup and the parallel grouped backward.
      {.name = "embedding/large_cpu_only", .inputs = {mat({97, 40}), random_ids({31, 33}, 97, DType::Int32)},
       .forward = emb, .gradcheck = false},
  });
}

// Odd vocabularies and widths: the device backward sorts token positions by id with 4-bit radix
// passes over tiles of 2048 tokens (vocab 1 and 7: one pass; 31, 33: two; 257: three), so
// these cover one and several passes, a partial last tile and tiles past the first.
TEST_CASE("ops: embedding odd sizes", "[ops][harness][embedding][family:embedding]") {
  define::test::run_op_cases({
      {.name = "embedding/vocab1_dim33", .inputs = {mat({1, 33}), random_ids({5, 8}, 1)}, .forward = emb},
      {.name = "embedding/vocab31_dim1", .inputs = {mat({31, 1}), random_ids({5, 7}, 31, DType::Int32)},
       .forward = emb},
      {.name = "embedding/vocab33_dim33", .inputs = {mat({33, 33}), random_ids({37}, 33)}, .forward = emb},
      {.name = "embedding/vocab257_dim3", .inputs = {mat({257, 3}), random_ids({3, 100}, 257, DType::Int32)},
       .forward = emb},
      {.name = "embedding/vocab257_two_tiles", .inputs = {mat({257, 5}), random_ids({2100}, 257)}, .forward = emb,
       .gradcheck = false},
      // Heavy collisions: ~700 tokens per row, over two tiles.
      {.name = "embedding/vocab3_collisions", .inputs = {mat({3, 33}), random_ids({65, 33}, 3, DType::Int32)},
       .forward = emb, .gradcheck = false},
      {.name = "embedding/vocab7_collisions_non_contiguous_ids",
       .inputs = {mat({7, 31}), random_ids({33, 31}, 7, DType::Int64, true)}, .forward = emb, .gradcheck = false},
      {.name = "embedding/vocab33_padding", .inputs = {mat({33, 5}), random_ids({9, 31}, 33)},
       .forward = [](V x) { return embedding(x[0], x[1], 7); }, .gradcheck = false},
      {.name = "embedding/vocab1_padding", .inputs = {mat({1, 33}), random_ids({31}, 1, DType::Int32)},
       .forward = [](V x) { return embedding(x[0], x[1], 0); }, .gradcheck = false},
      {.name = "embedding/vocab257_non_contiguous_table", .inputs = {mat({257, 33}, true), random_ids({31}, 257)},
       .forward = emb, .gradcheck = false},
  });
}

TEST_CASE("embedding: exact values and gradients", "[ops][embedding][family:embedding]") {
  Tensor w = from_vector<float>({0, 1, 10, 11, 20, 21}, {3, 2}).set_requires_grad();
  const Tensor idx = from_vector<std::int64_t>({2, 0, 2, 2}, {2, 2});
  Tensor y = embedding(w, idx, 1);
  CHECK(y.shape() == Shape{2, 2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{20, 21, 0, 1, 20, 21, 20, 21});
  backward(y, from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
  // Row 2 collects positions 0, 2, 3; row 0 position 1; row 1 is never used.
  CHECK(w.grad().to_vector<float>() == std::vector<float>{3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8});

  // padding_idx: the padding row's gradient stays zero even though it is looked up.
  Tensor w2 = from_vector<float>({0, 1, 10, 11, 20, 21}, {3, 2}).set_requires_grad();
  backward(embedding(w2, from_vector<std::int32_t>({1, 0, 1}), 1), ones({3, 2}));
  CHECK(w2.grad().to_vector<float>() == std::vector<float>{1, 1, 0, 0, 0, 0});
}

TEST_CASE("embedding: backward is deterministic across thread counts", "[ops][embedding][family:embedding]") {
  const Tensor grad = rand_uniform({4000, 16}, -1, 1);
  const Tensor idx = rand_int({4000}, 7);  // many collisions per row
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = kernels::embedding_backward(grad, idx, 7, -1).to_vector<float>();
  omp_set_num_threads(std::max(2, threads));
  const std::vector<float> many = kernels::embedding_backward(grad, idx, 7, -1).to_vector<float>();
  omp_set_num_threads(threads);
  CHECK(one == many);
}

TEST_CASE("embedding: backward into an existing gradient adds only the rows it names",
          "[ops][embedding][family:embedding]") {
  // Exact values on both CPU backends: row 2 gets positions 0 and 2 on top of its value, row 0
  // is the padding row and keeps its value although position 1 names it, rows 1 and 3 keep theirs.
  for (const kernels::Backend backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    const Tensor into = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
    kernels::embedding_backward_into(into, from_vector<double>({1, 10, 2, 20, 3, 30}, {3, 2}),
                                     from_vector<std::int32_t>({2, 0, 2}), 0);
    CHECK(into.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 9, 46, 7, 8});
  }
  // Random float64 sums over many collisions and a 2-d batch of ids: the fast path adds the terms
  // in the reference's order, so the results are bit-identical, for 1 and 2 threads; float32 is
  // within rounding of (existing + the fresh backward).
  Generator gen(5);
  const Tensor ids = rand_int({50, 40}, 300, {.dtype = DType::Int64}, gen);
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor grad = rand_uniform({50, 40, 24}, -1, 1, {.dtype = dtype}, gen);
    const Tensor start = rand_uniform({300, 24}, -1, 1, {.dtype = dtype}, gen);
    auto run = [&](kernels::Backend backend, int threads) {
      kernels::CpuBackendGuard guard(backend);
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
      Tensor into = kernels::cast(start, dtype);
      kernels::embedding_backward_into(into, grad, ids, 7);
      omp_set_num_threads(before);
      return define::test::to_doubles(into);
    };
    const std::vector<double> ref = run(kernels::Backend::Ref, 1), one = run(kernels::Backend::Cpu, 1);
    CHECK(one == run(kernels::Backend::Cpu, 2));
    const std::vector<double> fresh = define::test::to_doubles(kernels::embedding_backward(grad, ids, 300, 7));
    const std::vector<double> begin = define::test::to_doubles(start);
    for (std::size_t i = 0; i < one.size(); ++i) {
      INFO("element " << i << ", " << dtype_name(dtype));
      if (dtype == DType::Float64) REQUIRE(one[i] == ref[i]);
      REQUIRE(one[i] == Approx(begin[i] + fresh[i]).margin(1e-5));
      if (i / 24 == 7) REQUIRE(one[i] == begin[i]);  // the padding row
    }
  }
  // Errors name the problem.
  const Tensor g = zeros({3, 4});
  const Tensor i3 = from_vector<std::int64_t>({0, 1, 2});
  REQUIRE_THROWS_WITH(kernels::embedding_backward_into(zeros({5, 3}), g, i3, -1),
                      Catch::Contains("embedding_backward_into: grad_out rows of width 4 do not match grad_weight [5,3]"));
  REQUIRE_THROWS_WITH(kernels::embedding_backward_into(zeros({5, 4}, {.dtype = DType::Float64}), g, i3, -1),
                      Catch::Contains("embedding_backward_into"));
  REQUIRE_THROWS_WITH(kernels::embedding_backward_into(transpose(zeros({4, 5}), 0, 1), g, i3, -1),
                      Catch::Contains("grad_weight must be a contiguous 2-d [rows, dim] tensor, got [5,4]"));
  REQUIRE_THROWS_WITH(kernels::embedding_backward_into(zeros({2, 4}), g, i3, -1),
                      Catch::Contains("embedding_backward_into: index 2 out of range for 2 rows"));
}

TEST_CASE("embedding: a tied table's gradient sums both uses, scattered into the dense one",
          "[ops][embedding][autograd][family:embedding]") {
  // The table feeds an embedding and a classifier (logits = h W^T): the classifier's dense
  // gradient reaches the table first, the embedding adds its rows into it in place. Compared with
  // the two gradients computed apart and added, on float64.
  Generator gen(9);
  const Tensor table = rand_uniform({11, 6}, -1, 1, {.dtype = DType::Float64}, gen);
  const Tensor ids = from_vector<std::int64_t>({3, 0, 3, 7, 10}, {5});
  const Tensor h = rand_uniform({5, 6}, -1, 1, {.dtype = DType::Float64}, gen);
  const Tensor up = rand_uniform({5, 11}, -1, 1, {.dtype = DType::Float64}, gen);
  auto loss = [&](const Tensor& emb_table, const Tensor& out_table) {
    return sum(mul(linear(add(embedding(emb_table, ids), h), out_table), up));
  };
  // Three separate copies of the table (cast always copies).
  Tensor tied = kernels::cast(table, DType::Float64).set_requires_grad();
  backward(loss(tied, tied));
  Tensor in_only = kernels::cast(table, DType::Float64).set_requires_grad();
  Tensor out_only = kernels::cast(table, DType::Float64).set_requires_grad();
  backward(loss(in_only, out_only));
  const std::vector<double> got = tied.grad().to_vector<double>();
  const std::vector<double> a = in_only.grad().to_vector<double>(), b = out_only.grad().to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(a[i] + b[i]).margin(1e-12));
  // Row 5 is named by no id: only the classifier's gradient.
  CHECK(got[5 * 6] == b[5 * 6]);
}

TEST_CASE("embedding: bad input", "[ops][embedding][errors][family:embedding]") {
  const Tensor w = zeros({10, 4});
  REQUIRE_THROWS_WITH(embedding(w, from_vector<std::int64_t>({1, 12})),
                      Catch::Contains("embedding: index 12 out of range for 10 rows"));
  REQUIRE_THROWS_WITH(embedding(w, from_vector<std::int32_t>({-1})),
                      Catch::Contains("embedding: index -1 out of range for 10 rows"));
  REQUIRE_THROWS_WITH(embedding(w, from_vector<float>({1})),
                      Catch::Contains("embedding: indices must be int32 or int64, got float32"));
  REQUIRE_THROWS_WITH(embedding(zeros({10}), from_vector<std::int64_t>({1})),
                      Catch::Contains("embedding: weight must be 2-d [rows, dim], got [10]"));
  REQUIRE_THROWS_WITH(embedding(zeros({10, 4}, {.dtype = DType::Int64}), from_vector<std::int64_t>({1})),
                      Catch::Contains("embedding: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(embedding(w, from_vector<std::int64_t>({1}), 10),
                      Catch::Contains("embedding: padding_idx 10 out of range for 10 rows"));
  REQUIRE_THROWS_WITH(embedding(Tensor(), from_vector<std::int64_t>({1})),
                      Catch::Contains("embedding: got an undefined tensor"));
  REQUIRE_THROWS_WITH(kernels::embedding_backward(zeros({2, 3}), from_vector<std::int64_t>({1, 2, 3}), 10, -1),
                      Catch::Contains("embedding_backward: grad_out [2,3] does not match indices [3]"));
  if (has_device(DeviceType::CUDA)) {
    REQUIRE_THROWS_WITH(embedding(w, copy_to_device(from_vector<std::int64_t>({1}), Device::cuda())),
                        Catch::Contains("embedding: tensors on cpu and cuda:0"));
  }
}
