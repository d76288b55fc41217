// Indexing and joining: concat, stack, split, chunk, gather, index_select, scatter_add.
#include <catch2/catch.hpp>

#include "harness/op_harness.h"
#include "kernels/index.h"

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
InputSpec ids(Shape shape, std::vector<double> values, DType dtype = DType::Int64) {
  InputSpec spec;
  spec.shape = std::move(shape);
  spec.fill = InputSpec::Fill::Fixed;
  spec.index_dtype = dtype;
  spec.grad = false;
  spec.values = std::move(values);
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

}  // namespace

TEST_CASE("ops: concat, stack, split, chunk", "[ops][harness][index][family:index]") {
  define::test::run_op_cases({
      {.name = "concat/three_dim0", .inputs = {mat({2, 3}), mat({1, 3}), mat({3, 3})},
       .forward = [](V x) { return concat({x[0], x[1], x[2]}, 0); }},
      {.name = "concat/three_dim1", .inputs = {mat({2, 1}), mat({2, 3}, true), mat({2, 2})},
       .forward = [](V x) { return concat({x[0], x[1], x[2]}, 1); }},
      {.name = "concat/negative_dim_3d", .inputs = {mat({2, 2, 1}), mat({2, 2, 3}, true)},
       .forward = [](V x) { return concat({x[0], x[1]}, -1); }},
      {.name = "concat/with_empty", .inputs = {mat({0, 3}), mat({2, 3})}, .forward = [](V x) { return concat({x[0], x[1]}, 0); }},
      {.name = "concat/same_tensor_twice", .inputs = {mat({2, 2})}, .forward = [](V x) { return concat({x[0], x[0]}, 1); }},
      {.name = "concat/single", .inputs = {mat({3})}, .forward = [](V x) { return concat({x[0]}, 0); }},
      {.name = "stack/dim0", .inputs = {mat({2, 3}), mat({2, 3}, true), mat({2, 3})},
       .forward = [](V x) { return stack({x[0], x[1], x[2]}, 0); }},
      {.name = "stack/dim1", .inputs = {mat({2, 3}), mat({2, 3})}, .forward = [](V x) { return stack({x[0], x[1]}, 1); }},
      {.name = "stack/last_dim", .inputs = {mat({2, 3}, true), mat({2, 3})}, .forward = [](V x) { return stack({x[0], x[1]}, -1); }},
      {.name = "stack/scalars", .inputs = {mat({}), mat({})}, .forward = [](V x) { return stack({x[0], x[1]}, 0); }},
      // Pieces are rejoined in another order, and one piece left out: its gradient is zero.
      {.name = "split/uneven", .inputs = {mat({6, 2})},
       .forward = [](V x) { auto p = split(x[0], {1, 3, 2}, 0); return concat({p[2], p[0]}, 0); }},
      {.name = "split/zero_piece_non_contiguous", .inputs = {mat({3, 5}, true)},
       .forward = [](V x) { auto p = split(x[0], {2, 0, 3}, 1); return concat({p[2], p[1], p[0]}, 1); }},
      {.name = "chunk/uneven", .inputs = {mat({7, 2})},
       .forward = [](V x) { auto p = chunk(x[0], 3, 0); return concat({p[2], p[1], p[0]}, 0); }},
      {.name = "chunk/more_chunks_than_rows", .inputs = {mat({2, 3})},
       .forward = [](V x) { auto p = chunk(x[0], 5, -1); return stack(p, 0); }},
  });
}

TEST_CASE("ops: gather, index_select, scatter_add", "[ops][harness][index][family:index]") {
  define::test::run_op_cases({
      {.name = "gather/dim1_collisions", .inputs = {mat({3, 4}), ids({3, 3}, {0, 0, 3, 1, 1, 1, 2, 0, 2})},
       .forward = [](V x) { return gather(x[0], 1, x[1]); }},
      {.name = "gather/dim0_int32", .inputs = {mat({4, 3}), random_ids({5, 3}, 4, DType::Int32)},
       .forward = [](V x) { return gather(x[0], 0, x[1]); }},
      {.name = "gather/smaller_index", .inputs = {mat({3, 4, 2}), random_ids({2, 5, 1}, 4)},
       .forward = [](V x) { return gather(x[0], 1, x[1]); }},
      {.name = "gather/non_contiguous", .inputs = {mat({4, 3}, true), random_ids({4, 2}, 3)},
       .forward = [](V x) { return gather(x[0], -1, x[1]); }},
      {.name = "index_select/dim0_repeats", .inputs = {mat({4, 3}), ids({5}, {3, 0, 3, 3, 1})},
       .forward = [](V x) { return index_select(x[0], 0, x[1]); }},
      {.name = "index_select/dim1_int32", .inputs = {mat({2, 4, 3}), ids({3}, {2, 2, 0}, DType::Int32)},
       .forward = [](V x) { return index_select(x[0], 1, x[1]); }},
      {.name = "index_select/non_contiguous_last", .inputs = {mat({3, 4}, true), random_ids({6}, 4)},
       .forward = [](V x) { return index_select(x[0], -1, x[1]); }},
      {.name = "scatter_add/dim0_collisions", .inputs = {mat({3, 4}), ids({4, 4}, {0, 1, 2, 0, 0, 1, 2, 0, 2, 2, 2, 2, 0, 0, 0, 0}), mat({4, 4})},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }},
      {.name = "scatter_add/dim1_int32", .inputs = {mat({2, 5}), random_ids({2, 7}, 5, DType::Int32), mat({2, 7})},
       .forward = [](V x) { return scatter_add(x[0], 1, x[1], x[2]); }},
      {.name = "scatter_add/src_larger_than_index", .inputs = {mat({3, 4}), random_ids({2, 3}, 4), mat({3, 5})},
       .forward = [](V x) { return scatter_add(x[0], 1, x[1], x[2]); }},
      {.name = "scatter_add/non_contiguous", .inputs = {mat({3, 4}, true), random_ids({3, 4}, 3), mat({3, 4}, true)},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }},
      // Large enough for the parallel paths.
      {.name = "gather/large_cpu_only", .inputs = {mat({150, 300}), random_ids({150, 300}, 300)},
       .forward = [](V x) { return gather(x[0], 1, x[1]); }, .gradcheck = false},
      {.name = "index_select/large_cpu_only", .inputs = {mat({300, 150}), random_ids({400}, 300, DType::Int32)},
       .forward = [](V x) { return index_select(x[0], 0, x[1]); }, .gradcheck = false},
      {.name = "scatter_add/large_cpu_only", .inputs = {mat({20, 300}), random_ids({200, 300}, 20), mat({200, 300})},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }, .atol = 1e-4, .gradcheck = false},
  });
}

// Odd sizes for the device kernels: gather/index_select are one elementwise kernel over a
// strided iteration; scatter_add walks index columns, except a single column (1-d tensors),
// which like index_add (index_select's backward) groups positions by target with 4-bit radix
// passes over tiles of 2048 entries (257 rows: three passes; 2100 entries: two tiles).
TEST_CASE("ops: gather, index_select, scatter_add odd sizes", "[ops][harness][index][family:index]") {
  define::test::run_op_cases({
      {.name = "gather/dim0_33x31", .inputs = {mat({33, 31}), random_ids({31, 31}, 33, DType::Int32)},
       .forward = [](V x) { return gather(x[0], 0, x[1]); }, .gradcheck = false},
      {.name = "gather/dim1_3d_smaller_index", .inputs = {mat({3, 33, 5}), random_ids({2, 31, 5}, 33)},
       .forward = [](V x) { return gather(x[0], 1, x[1]); }},
      {.name = "gather/1d_vocab1", .inputs = {mat({1}), random_ids({33}, 1)},
       .forward = [](V x) { return gather(x[0], 0, x[1]); }},
      {.name = "gather/1d_257", .inputs = {mat({257}), random_ids({300}, 257, DType::Int32)},
       .forward = [](V x) { return gather(x[0], 0, x[1]); }},
      {.name = "gather/last_dim_non_contiguous_index", .inputs = {mat({5, 33}, true), random_ids({5, 31}, 33, DType::Int64, true)},
       .forward = [](V x) { return gather(x[0], -1, x[1]); }},
      {.name = "index_select/dim0_257_rows", .inputs = {mat({257, 3}), random_ids({300}, 257)},
       .forward = [](V x) { return index_select(x[0], 0, x[1]); }},
      {.name = "index_select/dim1_3d_odd", .inputs = {mat({3, 33, 5}), random_ids({31}, 33, DType::Int32)},
       .forward = [](V x) { return index_select(x[0], 1, x[1]); }},
      {.name = "index_select/last_dim_collisions", .inputs = {mat({5, 2}), random_ids({65}, 2)},
       .forward = [](V x) { return index_select(x[0], -1, x[1]); }},
      {.name = "index_select/one_row", .inputs = {mat({1, 33}), random_ids({40}, 1, DType::Int32, true)},
       .forward = [](V x) { return index_select(x[0], 0, x[1]); }},
      {.name = "index_select/two_tiles_cpu_only", .inputs = {mat({257, 7}), random_ids({2100}, 257, DType::Int32)},
       .forward = [](V x) { return index_select(x[0], 0, x[1]); }, .gradcheck = false},
      {.name = "scatter_add/1d_257", .inputs = {mat({257}), random_ids({300}, 257), mat({300})},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }},
      {.name = "scatter_add/1d_src_longer", .inputs = {mat({31}), random_ids({20}, 31, DType::Int32), mat({33}, true)},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }},
      {.name = "scatter_add/single_column_2d", .inputs = {mat({4, 33}), random_ids({1, 40}, 33), mat({2, 41}, true)},
       .forward = [](V x) { return scatter_add(x[0], 1, x[1], x[2]); }},
      {.name = "scatter_add/collisions_vocab5", .inputs = {mat({2, 5}), random_ids({2, 300}, 5, DType::Int32), mat({2, 300})},
       .forward = [](V x) { return scatter_add(x[0], 1, x[1], x[2]); }},
      {.name = "scatter_add/dim2_3d", .inputs = {mat({3, 4, 33}), random_ids({3, 4, 31}, 33), mat({3, 4, 31}, true)},
       .forward = [](V x) { return scatter_add(x[0], 2, x[1], x[2]); }, .gradcheck = false},
      {.name = "scatter_add/dim0_smaller_index", .inputs = {mat({33, 5}), random_ids({31, 3}, 33), mat({32, 4})},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }},
      {.name = "scatter_add/1d_two_tiles_cpu_only", .inputs = {mat({7}), random_ids({2100}, 7), mat({2100})},
       .forward = [](V x) { return scatter_add(x[0], 0, x[1], x[2]); }, .gradcheck = false},
  });
}

// index_add directly (no autograd node: forward only). src is made contiguous by the device
// path when its dims around dim cannot be walked with one stride each.
TEST_CASE("ops: index_add odd sizes", "[ops][harness][index][family:index]") {
  const auto index_add = [](std::int64_t dim) {
    return [dim](V x) { return kernels::index_add(x[0], dim, x[1], x[2]); };
  };
  define::test::run_op_cases({
      {.name = "index_add/dim0_257", .inputs = {mat({257, 3}), random_ids({300}, 257), mat({300, 3})},
       .forward = index_add(0), .gradcheck = false},
      {.name = "index_add/dim1_non_contiguous_src", .inputs = {mat({4, 33}), random_ids({31}, 33, DType::Int32), mat({4, 31}, true)},
       .forward = index_add(1), .gradcheck = false},
      {.name = "index_add/dim0_3d_unmergeable_src", .inputs = {mat({5, 4, 3}), random_ids({33}, 5), mat({33, 4, 3}, true)},
       .forward = index_add(0), .gradcheck = false},
      {.name = "index_add/last_dim_non_contiguous_index", .inputs = {mat({3, 7}), random_ids({65}, 7, DType::Int64, true), mat({3, 65})},
       .forward = index_add(-1), .gradcheck = false},
      {.name = "index_add/one_row", .inputs = {mat({1, 33}), random_ids({40}, 1), mat({40, 33})},
       .forward = index_add(0), .gradcheck = false},
  });
}

TEST_CASE("index: exact values", "[ops][index][family:index]") {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(gather(x, 1, from_vector<std::int64_t>({2, 2, 0, 1}, {2, 2})).to_vector<float>() == std::vector<float>{3, 3, 4, 5});
  CHECK(index_select(x, 1, from_vector<std::int32_t>({2, 0})).to_vector<float>() == std::vector<float>{3, 1, 6, 4});
  const Tensor s = scatter_add(zeros({2, 3}), 1, from_vector<std::int64_t>({0, 0, 2, 1, 1, 1}, {2, 3}), x);
  CHECK(s.to_vector<float>() == std::vector<float>{3, 0, 3, 0, 15, 0});
  CHECK(concat({x, x}, 0).shape() == Shape{4, 3});
  CHECK(concat({x, from_vector<float>({7, 8}, {2, 1})}, 1).to_vector<float>() == std::vector<float>{1, 2, 3, 7, 4, 5, 6, 8});
  CHECK(stack({x, x}, 2).shape() == Shape{2, 3, 2});
  const std::vector<Tensor> parts = chunk(from_vector<float>({1, 2, 3, 4, 5}), 2, 0);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(parts[1].to_vector<float>() == std::vector<float>{4, 5});
  CHECK(chunk(zeros({0, 2}), 3, 0).size() == 3);
  CHECK(split(x, {1, 2}, 1)[1].to_vector<float>() == std::vector<float>{2, 3, 5, 6});
  CHECK(split(x, {1, 2}, 1)[1].shares_storage_with(x));  // pieces are views
  CHECK(kernels::index_add(zeros({3}), 0, from_vector<std::int64_t>({2, 2, 0}), from_vector<float>({1, 2, 3})).to_vector<float>() ==
        std::vector<float>{3, 0, 3});
  // Integer tensors go through the copy ops too.
  CHECK(gather(from_vector<std::int64_t>({5, 6, 7}), 0, from_vector<std::int64_t>({2, 0})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{7, 5});
}

TEST_CASE("index: bad input", "[ops][index][errors][family:index]") {
  const Tensor x = zeros({2, 4});
  const auto i64 = [](std::vector<std::int64_t> v, Shape s) { return from_vector<std::int64_t>(v, s); };
  REQUIRE_THROWS_WITH(gather(x, 1, i64({0, 5}, {2, 1})), Catch::Contains("gather: index 5 out of range for dim 1 of size 4"));
  REQUIRE_THROWS_WITH(gather(x, 2, i64({0}, {1, 1})), Catch::Contains("gather: dim 2 out of range"));
  REQUIRE_THROWS_WITH(gather(x, 1, i64({0, 1}, {2})), Catch::Contains("gather: index [2] and x [2,4] must have the same number of dims"));
  REQUIRE_THROWS_WITH(gather(x, 1, i64({0, 0, 0}, {3, 1})), Catch::Contains("gather: index shape [3,1] exceeds x shape [2,4] outside dim 1"));
  REQUIRE_THROWS_WITH(gather(x, 1, zeros({2, 1})), Catch::Contains("gather: indices must be int32 or int64, got float32"));
  REQUIRE_THROWS_WITH(gather(zeros({}), 0, i64({0}, {})), Catch::Contains("gather: expected a tensor with at least 1 dim"));

  REQUIRE_THROWS_WITH(index_select(x, 0, i64({0, 2}, {2})), Catch::Contains("index_select: index 2 out of range for dim 0 of size 2"));
  REQUIRE_THROWS_WITH(index_select(x, 0, i64({0, 1}, {1, 2})), Catch::Contains("index_select: index must be 1-d, got [1,2]"));
  REQUIRE_THROWS_WITH(index_select(x, 0, zeros({1})), Catch::Contains("index_select: indices must be int32 or int64"));

  REQUIRE_THROWS_WITH(scatter_add(x, 1, i64({-1}, {1, 1}), zeros({1, 1})),
                      Catch::Contains("scatter_add: index -1 out of range for dim 1 of size 4"));
  REQUIRE_THROWS_WITH(scatter_add(x, 1, i64({0, 0}, {1, 2}), zeros({1, 1})),
                      Catch::Contains("scatter_add: index shape [1,2] exceeds src shape [1,1]"));
  REQUIRE_THROWS_WITH(scatter_add(x, 1, i64({0, 0, 0}, {3, 1}), zeros({3, 1})),
                      Catch::Contains("scatter_add: index shape [3,1] exceeds x shape [2,4] outside dim 1"));
  REQUIRE_THROWS_WITH(scatter_add(x, 1, i64({0}, {1, 1}), zeros({1, 1}, {.dtype = DType::Float64})),
                      Catch::Contains("scatter_add: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(scatter_add(x, 1, i64({0}, {1}), zeros({1, 1})),
                      Catch::Contains("scatter_add: x [2,4], index [1] and src [1,1] must have the same number of dims"));

  REQUIRE_THROWS_WITH(concat({}, 0), Catch::Contains("concat: expected at least one tensor"));
  REQUIRE_THROWS_WITH(concat({x, zeros({2, 3})}, 0), Catch::Contains("concat: shapes [2,4] and [2,3] differ outside dim 0"));
  REQUIRE_THROWS_WITH(concat({x, zeros({2})}, 0), Catch::Contains("concat: shapes [2,4] and [2] differ outside dim 0"));
  REQUIRE_THROWS_WITH(concat({x, zeros({2, 4}, {.dtype = DType::Float64})}, 0),
                      Catch::Contains("concat: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(concat({x, x}, 2), Catch::Contains("concat: dim 2 out of range"));
  REQUIRE_THROWS_WITH(concat({zeros({}), zeros({})}, 0), Catch::Contains("concat: expected a tensor with at least 1 dim"));
  REQUIRE_THROWS_WITH(stack({x, zeros({2, 3})}, 0), Catch::Contains("stack: shapes [2,4] and [2,3] differ"));
  REQUIRE_THROWS_WITH(stack({}, 0), Catch::Contains("stack: expected at least one tensor"));
  REQUIRE_THROWS_WITH(stack({x, x}, 3), Catch::Contains("stack: dim 3 out of range"));
  REQUIRE_THROWS_WITH(stack({x, zeros({2, 4}, {.dtype = DType::Int64})}, 0),
                      Catch::Contains("stack: dtypes float32 and int64 do not match"));
  REQUIRE_THROWS_WITH(split(x, {1, 2}, 1), Catch::Contains("split: sizes [1,2] sum to 3 but dim 1 of [2,4] has size 4"));
  REQUIRE_THROWS_WITH(split(x, {-1, 5}, 1), Catch::Contains("split: negative size -1 in [-1,5]"));
  REQUIRE_THROWS_WITH(chunk(x, 0, 0), Catch::Contains("chunk: chunks must be positive, got 0"));
  if (has_device(DeviceType::CUDA)) {
    const Tensor dev = copy_to_device(x, Device::cuda());
    REQUIRE_THROWS_WITH(concat({x, dev}, 0), Catch::Contains("concat: tensors on cpu and cuda:0"));
    REQUIRE_THROWS_WITH(gather(dev, 1, i64({0}, {1, 1})), Catch::Contains("gather: tensors on cuda:0 and cpu"));
  }
}
