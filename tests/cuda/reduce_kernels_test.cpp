// CUDA reduce kernels (kernels/cuda/reduce.cu) on the emulated device: shapes larger than the op
// harness runs (a million-element sum, [257, 4099] over each dim, reductions long enough to be
// split across blocks) against the CPU reference; the sum of squares; column_sum at odd shapes and
// layouts; max and argmax with ties and NaNs; and bit-identical results under the emulator's
// forward, reverse and random thread schedules (the kernels promise a fixed summation order and
// use no atomics).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/factory.h"
#include "cuda_emu/emu_profile.hpp"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "support/common.h"
#include "support/emulated_device.h"

using namespace define;
using test::check_emu_close;
using test::kernel_test_device;
using test::to_test_device;

namespace {

using Dims = std::vector<std::int64_t>;

using define::test::values;

// The transpose of a 2-d tensor, as a view.
Tensor transposed(const Tensor& t) {
  return t.as_strided({t.shape()[1], t.shape()[0]}, {t.strides()[1], t.strides()[0]}, t.offset());
}

// Runs f with the CPU reference for CPU tensors.
template <typename F>
auto reference(F&& f) {
  kernels::CpuBackendGuard ref(kernels::Backend::Ref);
  return f();
}

// Same values bit for bit (NaNs included).
bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// A [rows, cols] float tensor of small integers (0..levels-1: ties everywhere) with NaN at the
// given flat positions.
Tensor ties_with_nans(std::int64_t rows, std::int64_t cols, int levels, const std::vector<std::int64_t>& nans,
                      DType dtype = DType::Float32) {
  Generator gen(5);
  const Tensor ints = rand_int({rows, cols}, levels, {.dtype = DType::Int64}, gen);
  std::vector<double> v = kernels::cast(ints, DType::Float64).to_vector<double>();
  for (std::int64_t i : nans) v[i] = NAN;
  return kernels::cast(from_vector<double>(v, {rows, cols}), dtype);
}

}  // namespace

// The kernels accumulate in compensated float (double for float64): against the double-accumulating
// reference nearly all the error left is the final rounding, so these use 1e-6, ten times tighter than
// the harness.
TEST_CASE("reduce kernels: large sums match the reference", "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  Generator gen(21);
  struct Case {
    std::string name;
    Shape shape;
    Dims dims;
    bool with_mean = false;
  };
  const std::vector<Case> cases = {
      {"1000003 all", {1000003}, {}, true},
      {"257x4099 dim0", {257, 4099}, {0}},
      {"257x4099 dim1", {257, 4099}, {1}},
      {"257x4099 all", {257, 4099}, {0, 1}},
      {"3x100003 dim1 (rows split across blocks)", {3, 100003}, {1}, true},
      {"100003x3 dim0 (columns split across blocks)", {100003, 3}, {0}, true},
      {"7x1000x33 dims 0,2 (interleaved)", {7, 1000, 33}, {0, 2}, true},
      // Columns over two reduced dims that do not merge (relative attention's bias gradients): the
      // walk's step (8 rows) carries over the inner dim (150) now and then, or spans it (3) each time.
      {"6x5x150x64 dims 0,2 (columns, two reduced dims)", {6, 5, 150, 64}, {0, 2}, true},
      {"200x4x3x64 dims 0,2 (columns, a step past the inner dim)", {200, 4, 3, 64}, {0, 2}, true},
      {"5000x7 dim1 (sub-warp rows)", {5000, 7}, {1}, true},
  };
  for (const Case& c : cases) {
    const Tensor x = rand_uniform(c.shape, -1, 1, {}, gen);
    const Tensor xe = to_test_device(x);
    check_emu_close(kernels::sum(xe, c.dims, false), reference([&] { return kernels::sum(x, c.dims, false); }), 1e-6,
                    1e-6, "sum " + c.name);
    if (c.with_mean)
      check_emu_close(kernels::mean(xe, c.dims, true), reference([&] { return kernels::mean(x, c.dims, true); }), 1e-6,
                      1e-6, "mean " + c.name);
  }
  // Transposed input: the reduced dim of a row sum becomes the strided one.
  const Tensor x = rand_uniform({4099, 257}, -1, 1, {}, gen);
  for (std::int64_t dim : {0, 1}) {
    const Tensor t = transposed(to_test_device(x));
    check_emu_close(kernels::sum(t, {dim}, false), reference([&] { return kernels::sum(transposed(x), {dim}, false); }),
                    1e-6, 1e-6, "sum transposed dim " + std::to_string(dim));
  }
  // Same-sign data, where a float accumulator would drift: all partial sums of 0.1f are exact in
  // double, so the mean equals the reference's bit for bit.
  const Tensor tenths = full({1000003}, 0.1);
  const Tensor got = kernels::mean(to_test_device(tenths), {}, false);
  const Tensor want = reference([&] { return kernels::mean(tenths, {}, false); });
  CHECK(values(got) == values(want));
  // float64.
  const Tensor xd = rand_uniform({129, 1031}, -1, 1, {.dtype = DType::Float64}, gen);
  for (std::int64_t dim : {0, 1})
    check_emu_close(kernels::sum(to_test_device(xd), {dim}, false),
                    reference([&] { return kernels::sum(xd, {dim}, false); }), 1e-12, 1e-12,
                    "float64 sum dim " + std::to_string(dim));
}

// The sum of squares (a gradient norm's) in one read: the same reduction kernels as sum, each
// element squared as it enters the accumulator. Against the reference's float64 sum of squares.
TEST_CASE("reduce kernels: sum_of_squares matches the reference", "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  Generator gen(31);
  const std::vector<std::pair<std::string, Tensor>> cases = {
      {"1000003 (split across blocks)", rand_normal({1000003}, 0, 1, {}, gen)},
      {"257x4099", rand_uniform({257, 4099}, -2, 2, {}, gen)},
      {"7 (one block)", rand_uniform({7}, -1, 1, {}, gen)},
      {"1x1 (one element: the column kernel)", rand_uniform({1, 1}, -1, 1, {}, gen)},
      {"float64 129x1031", rand_uniform({129, 1031}, -1, 1, {.dtype = DType::Float64}, gen)},
  };
  for (const auto& named : cases) {
    const std::string& name = named.first;  // (captured below: not a structured binding, for clang before 16)
    const Tensor& x = named.second;
    const double tol = x.dtype() == DType::Float64 ? 1e-12 : 1e-6;
    const Tensor got = kernels::sum_of_squares(to_test_device(x));
    CHECK(got.shape() == Shape{});
    const Tensor want = reference([&] { return kernels::sum_of_squares(x); });
    const double g = values(got)[0], w = values(want)[0];
    INFO(name << ": got " << g << ", reference " << w);
    CHECK(std::abs(g - w) <= tol * w);
  }
  // A strided (transposed) input and an empty one.
  const Tensor x = rand_uniform({4099, 257}, -1, 1, {}, gen);
  const double strided = values(kernels::sum_of_squares(transposed(to_test_device(x))))[0];
  const double want = values(reference([&] { return kernels::sum_of_squares(transposed(x)); }))[0];
  CHECK(std::abs(strided - want) <= 1e-6 * want);
  CHECK(values(kernels::sum_of_squares(to_test_device(zeros({0, 3}))))[0] == 0);
}

// float32 sums accumulate in float with compensation (kernels/cuda/float_sum.cuh), not in double.
// Adversarial input: 1% of the elements are +-2^26 (cancelling exactly), the rest in [0, 1). A
// running float sum that holds a 2^26 has an ulp of 8, so a plain float accumulator rounds away
// most of every small term it adds while it holds one; the compensated sum keeps them. The bound is
// relative to the float64 sum of the same float32 values.
TEST_CASE("reduce kernels: float32 sums of mixed magnitudes stay accurate", "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  const std::int64_t n = 1048583;  // 2^20 + 7
  Generator gen(24);
  std::vector<float> v = rand_uniform({n}, 0, 1, {}, gen).to_vector<float>();
  const float big = 67108864.0f;  // 2^26
  std::int64_t bigs = 0;
  for (std::int64_t i = 17; i + 100 < n; i += 100) v[i] = (bigs++ % 2 == 0) ? big : -big;
  if (bigs % 2 == 1) v[17] = 0.5f;  // an even count: the bigs cancel
  const Tensor x = from_vector<float>(v, {n});
  const Tensor xe = to_test_device(x);
  // Relative error of the emulated device's float32 sum against the float64 sum of the same values.
  auto rel_err = [](const Tensor& got, const Tensor& x64, const std::vector<std::int64_t>& dims) {
    const std::vector<double> g = values(got);
    const std::vector<double> r = values(reference([&] { return kernels::sum(x64, dims, false); }));
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - r[i]) / std::abs(r[i]));
    return worst;
  };
  const Tensor x64 = kernels::cast(x, DType::Float64);
  // One output (rows layout, split across blocks), rows of 2^17 elements, and columns.
  const double all = rel_err(kernels::sum(xe, {}, false), x64, {});
  CHECK(all < 1e-6);
  const Tensor rows = xe.as_strided({8, 131072}, {131072, 1}, 0);
  const double row = rel_err(kernels::sum(rows, {1}, false), x64.as_strided({8, 131072}, {131072, 1}, 0), {1});
  CHECK(row < 1e-6);
  const Tensor cols = xe.as_strided({131072, 8}, {8, 1}, 0);
  const double col = rel_err(kernels::sum(cols, {0}, false), x64.as_strided({131072, 8}, {8, 1}, 0), {0});
  CHECK(col < 1e-6);
}

TEST_CASE("reduce kernels: column_sum at odd shapes and layouts", "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  Generator gen(22);
  for (const Shape& s :
       std::vector<Shape>{{1, 1}, {1, 33}, {31, 1}, {33, 257}, {257, 31}, {1000, 3}, {3, 1000}, {4099, 257}, {0, 5}}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const Tensor x = rand_uniform(s, -1, 1, {.dtype = dtype}, gen);
      INFO("shape " << shape_str(s) << " " << dtype_name(dtype));
      check_emu_close(kernels::column_sum(to_test_device(x)), reference([&] { return kernels::column_sum(x); }), 1e-6,
                      1e-6, "column_sum");
    }
  }
  // Non-contiguous: a transposed matrix, and every other column of a wider one (as linear's
  // backward may hand it a strided gradient).
  const Tensor base = rand_uniform({257, 66}, -1, 1, {}, gen);
  const Tensor base_emu = to_test_device(base);
  check_emu_close(kernels::column_sum(transposed(base_emu)),
                  reference([&] { return kernels::column_sum(transposed(base)); }), 1e-6, 1e-6,
                  "column_sum transposed");
  check_emu_close(kernels::column_sum(base_emu.as_strided({257, 33}, {66, 2}, 1)), reference([&] {
                    return kernels::column_sum(base.as_strided({257, 33}, {66, 2}, 1));
                  }),
                  1e-6, 1e-6, "column_sum stride-2 columns");
  // No rows: zeros.
  CHECK(values(kernels::column_sum(to_test_device(zeros({0, 3})))) == std::vector<double>{0, 0, 0});
}

// float32 and 16-bit sums read x in pieces where its layout allows (kernels/cuda/reduce.cu, pieces_fit):
// the reduce kernels are instantiated with the piece's element count as their last template argument
// (rows ", 4>", 16 bytes of float32, or ", 2>", 4 bytes of 16-bit values; columns ", 2>", 8 bytes of
// float32 or 4 of 16-bit values), 1 for the element walk. Each case names the path it must take and is
// checked against the reference: rows with a tail after the last whole piece, rows split across blocks
// (chunks of whole pieces), columns split across blocks, two reduced dims that coalesce and two that do
// not (walked by TwoDimWalk), and what must take the element walk (float64, unaligned, odd strides).
TEST_CASE("reduce kernels: sums in pieces where the layout allows", "[cuda][reduce][family:reduce]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(25);
  // The template argument of the first launch's kernel: the elements a piece (1: the element walk).
  const auto piece_of = [](const std::function<Tensor()>& f, Tensor& result) {
#if !defined(__SANITIZE_ADDRESS__)
    ::cuda_emu::profile_start();
    result = f();
    const std::vector<::cuda_emu::KernelProfile> launches = ::cuda_emu::profile_stop();
    REQUIRE_FALSE(launches.empty());
    const std::string& name = launches.front().kernel;
    const std::size_t comma = name.rfind(", ");
    REQUIRE(comma != std::string::npos);
    return std::stoi(name.substr(comma + 2));
#else
    result = f();
    return -1;  // the sanitizer builds do not profile
#endif
  };
  // A [rows, cols] view with row stride `stride` (>= cols), `shift` elements past an aligned buffer.
  const auto view = [&](const Tensor& dense, std::int64_t stride, std::int64_t shift) {
    const std::int64_t rows = dense.shape()[0], cols = dense.shape()[1];
    Tensor buffer = zeros({rows * stride + shift}, {dense.dtype(), kernel_test_device()});
    Tensor v = buffer.as_strided({rows, cols}, {stride, 1}, shift);
    kernels::copy_into(v, to_test_device(dense));
    return v;
  };
  struct Case {
    std::string name;
    Shape shape;
    Dims dims;
    DType dtype = DType::Float32;
    std::int64_t stride = 0;  // 2-d only: a row stride other than the width
    std::int64_t shift = 0;   // 2-d only: elements past a 16-byte boundary
    int piece = 4;            // the path it must take
  };
  const std::vector<Case> cases = {
      {"rows 257x4100", {257, 4100}, {1}},
      {"rows split across blocks 3x100004", {3, 100004}, {1}},
      {"one row of 1000003 (a tail of 3)", {1000003}, {}},
      {"rows of 1030 at stride 1032 (a tail of 2 a row)", {64, 1030}, {1}, DType::Float32, 1032},
      {"columns 1000x1024", {1000, 1024}, {0}, DType::Float32, 0, 0, 2},
      {"columns split across blocks 100003x8", {100003, 8}, {0}, DType::Float32, 0, 0, 2},
      {"columns, two reduced dims 7x1000x36", {7, 1000, 36}, {0, 1}, DType::Float32, 0, 0, 2},
      // Two reduced dims that do not merge (a bias sum over the batch and time dims of [B, H, T, d]),
      // split across blocks or not, float32 and 16-bit.
      {"columns over batch and time 6x4x100x36", {6, 4, 100, 36}, {0, 2}, DType::Float32, 0, 0, 2},
      {"columns over batch and time split across blocks 64x2x700x8", {64, 2, 700, 8}, {0, 2}, DType::Float32, 0, 0, 2},
      {"bfloat16 columns over batch and time 5x3x77x16", {5, 3, 77, 16}, {0, 2}, DType::BFloat16, 0, 0, 2},
      // 16-bit columns (a bias gradient under mixed precision) in pieces of 2 values, split or not.
      {"float16 columns 1000x72", {1000, 72}, {0}, DType::Float16, 0, 0, 2},
      {"bfloat16 columns split across blocks 100003x8", {100003, 8}, {0}, DType::BFloat16, 0, 0, 2},
      // 16-bit rows in pieces of 2 values, with a tail and split across blocks; an odd row length
      // (every other row off a piece's boundary) takes the element walk.
      {"float16 rows 1000x72", {1000, 72}, {1}, DType::Float16, 0, 0, 2},
      {"one bfloat16 row of 100001 (a tail of 1), split across blocks", {100001}, {}, DType::BFloat16, 0, 0, 2},
      {"float16 rows of an odd length 1000x71", {1000, 71}, {1}, DType::Float16, 0, 0, 1},
      // The float64 piece kernels spilled registers: the element walk.
      {"float64 rows 129x1032", {129, 1032}, {1}, DType::Float64, 0, 0, 1},
      {"float64 columns 129x1032", {129, 1032}, {0}, DType::Float64, 0, 0, 1},
      {"bfloat16 columns of an odd count 1000x71", {1000, 71}, {0}, DType::BFloat16, 0, 0, 1},
      {"unaligned rows (one element off)", {257, 4100}, {1}, DType::Float32, 4100, 1, 1},
      {"unaligned columns", {1000, 1024}, {0}, DType::Float32, 1024, 3, 1},
      {"rows at an odd stride", {64, 1028}, {1}, DType::Float32, 1029, 0, 1},
      {"columns of an odd count", {1000, 1029}, {0}, DType::Float32, 0, 0, 1},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const bool sixteen = c.dtype == DType::Float16 || c.dtype == DType::BFloat16;
    const Tensor x = kernels::cast(rand_uniform(c.shape, sixteen ? 0.0 : -1.0, 1, {}, gen), c.dtype);
    const Tensor xe = c.stride != 0 ? view(x, c.stride, c.shift) : to_test_device(x);
    Tensor got;
    const int piece = piece_of([&] { return kernels::sum(xe, c.dims, false); }, got);
    if (piece >= 0) CHECK(piece == c.piece);
    const Tensor want = reference([&] { return kernels::sum(x, c.dims, false); });
    const double tol = c.dtype == DType::Float64    ? 1e-12
                       : c.dtype == DType::Float16  ? 0.0009765625
                       : c.dtype == DType::BFloat16 ? 0.0078125
                                                    : 1e-6;
    check_emu_close(got, want, sixteen ? 0.0 : tol, tol, c.name);
  }
  // The sum of squares and column_sum (a linear layer's bias gradient) take the same path.
  const Tensor x = rand_uniform({4096, 256}, -1, 1, {}, gen);
  const Tensor xe = to_test_device(x);
  Tensor got;
  const int squares_piece = piece_of([&] { return kernels::sum_of_squares(xe); }, got);
  CHECK((squares_piece == 4 || squares_piece == -1));  // -1: the sanitizer builds do not profile
  const double g = values(got)[0], w = values(reference([&] { return kernels::sum_of_squares(x); }))[0];
  CHECK(std::abs(g - w) <= 1e-6 * w);
  const int column_piece = piece_of([&] { return kernels::column_sum(xe); }, got);
  CHECK((column_piece == 2 || column_piece == -1));
  check_emu_close(got, reference([&] { return kernels::column_sum(x); }), 1e-6, 1e-6, "column_sum in pieces");
}

TEST_CASE("reduce kernels: max and argmax with ties and NaNs match the reference", "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  // float32 at [257, 4099], float64 at [129, 1031]. NaNs: two in column 20 (rows 5 and 9: the
  // first wins), one in row 100.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::int64_t rows = dtype == DType::Float32 ? 257 : 129, cols = dtype == DType::Float32 ? 4099 : 1031;
    const Tensor x = ties_with_nans(rows, cols, 7, {5 * cols + 20, 9 * cols + 20, 100 * cols + 1000}, dtype);
    const Tensor xe = to_test_device(x);
    for (std::int64_t dim : {0, 1}) {
      INFO(dtype_name(dtype) << " dim " << dim);
      const auto [v, i] = kernels::max(xe, dim, false);
      const auto [rv, ri] = reference([&] { return kernels::max(x, dim, false); });
      CHECK(bitwise_equal(values(v), values(rv)));
      CHECK(values(i) == values(ri));
      CHECK(values(kernels::argmax(transposed(xe), 1 - dim, true)) ==
            values(reference([&] { return kernels::argmax(transposed(x), 1 - dim, true); })));
    }
  }
  // One long line (split into many lanes): the maximum appears three times, the first wins.
  std::vector<double> line(1000003, -1.0);
  for (std::int64_t i : {700001, 12345, 999999}) line[i] = 2.0;
  const Tensor l = from_vector<double>(line, {1000003});
  CHECK(values(kernels::argmax(to_test_device(l), 0, false)) == std::vector<double>{12345});
}

TEST_CASE("reduce kernels: max backward scatters like the reference", "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  Generator gen(23);
  const Tensor x = rand_uniform({33, 5, 257}, -1, 1, {}, gen);
  for (std::int64_t dim : {0, 1, 2}) {
    for (bool keepdim : {false, true}) {
      // (Not structured bindings: idx is captured below, which clang before 16 cannot do with one.)
      const std::pair<Tensor, Tensor> max_result = reference([&] { return kernels::max(x, dim, keepdim); });
      const Tensor &v = max_result.first, &idx = max_result.second;
      const Tensor grad = rand_uniform(v.shape(), -1, 1, {}, gen);
      INFO("dim " << dim << " keepdim " << keepdim);
      const Tensor got = kernels::max_backward(to_test_device(grad), to_test_device(idx), x.shape(), dim, keepdim);
      const Tensor want = reference([&] { return kernels::max_backward(grad, idx, x.shape(), dim, keepdim); });
      CHECK(values(got) == values(want));
    }
  }
}

// A reduction split across blocks finishes in the launch that splits it (kernels/cuda/reduce.cu,
// finish_split, on the tickets of kernels/cuda/last_block.cuh and last_block.cu): one launch whose grid
// has several chunks a group (blockIdx.y), the last block of each group combining their partials, and
// the reference's result. Every layout that splits, twice over in opposite orders: the cases differ in
// split and group counts, so a ticket that a launch left off zero would make the wrong block finish the
// next one (before the other chunks' partials are in).
TEST_CASE("reduce kernels: a split reduction finishes in one launch", "[cuda][reduce][family:reduce]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(26);
  const Tensor line = rand_uniform({1000003}, -1, 1, {}, gen);
  const Tensor rows = rand_uniform({3, 100003}, -1, 1, {}, gen);
  const Tensor cols = rand_uniform({100003, 3}, -1, 1, {}, gen);
  const Tensor heads = rand_uniform({64, 4, 150, 64}, -1, 1, {}, gen);
  const Tensor ties = ties_with_nans(50000, 5, 7, {});
  struct Case {
    std::string name;
    const Tensor* x;
    std::function<Tensor(const Tensor&)> op;
  };
  const std::vector<Case> cases = {
      {"mean of all", &line, [](const Tensor& t) { return kernels::mean(t, {}, false); }},
      {"sum of rows", &rows, [](const Tensor& t) { return kernels::sum(t, {1}, false); }},
      {"sum of columns", &cols, [](const Tensor& t) { return kernels::sum(t, {0}, false); }},
      {"sum over batch and time", &heads,
       [](const Tensor& t) {
         return kernels::sum(t, {0, 2}, false);
       }},
      {"argmax of a line", &line, [](const Tensor& t) { return kernels::argmax(t, 0, false); }},
      {"max of columns", &ties, [](const Tensor& t) { return kernels::max(t, 0, false).first; }},
  };
  for (int round = 0; round < 2; ++round) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[round == 0 ? k : cases.size() - 1 - k];
      INFO(c.name << ", round " << round);
      const Tensor x = to_test_device(*c.x);
      const std::uint64_t before = kernels::emu_kernel_launches();
#if !defined(__SANITIZE_ADDRESS__)
      ::cuda_emu::profile_start();
#endif
      const Tensor got = c.op(x);
      CHECK(kernels::emu_kernel_launches() - before == 1);
#if !defined(__SANITIZE_ADDRESS__)
      const std::vector<::cuda_emu::KernelProfile> launches = ::cuda_emu::profile_stop();
      REQUIRE(launches.size() == 1);
      CHECK(launches[0].grid.y > 1);  // split: several chunks a group
#endif
      check_emu_close(got, reference([&] { return c.op(*c.x); }), 1e-6, 1e-6, c.name);
    }
  }
}

TEST_CASE("reduce kernels: bit-identical under forward, reverse and random schedules",
          "[cuda][reduce][family:reduce]") {
  kernels::register_devices();
  Generator gen(24);
  const Tensor rows = to_test_device(rand_uniform({33, 2051}, -1, 1, {}, gen));
  const Tensor cols = to_test_device(rand_uniform({513, 257}, -1, 1, {}, gen));
  const Tensor long_line = to_test_device(rand_uniform({100003}, -1, 1, {}, gen));
  const Tensor ties = to_test_device(ties_with_nans(257, 131, 3, {40 * 131 + 7, 41 * 131 + 7}));
  const Tensor grad = to_test_device(rand_uniform({1, 131}, -1, 1, {}, gen));
  const Tensor pieces = to_test_device(rand_uniform({1024, 520}, -1, 1, {}, gen));  // the 16-byte path
  // Every kernel and layout: rows with several warps per output, sub-warp rows, columns, both
  // split across blocks, max in both layouts, column_sum, max backward.
  const std::vector<std::pair<std::string, std::function<Tensor()>>> ops = {
      {"sum rows", [&] { return kernels::sum(rows, {1}, false); }},
      {"sum sub-warp rows",
       [&] {
         return kernels::sum(rows.as_strided({33 * 2051 / 7, 7}, {7, 1}, 0), {1}, false);
       }},
      {"sum columns (split)", [&] { return kernels::sum(cols, {0}, false); }},
      {"mean all (split rows)", [&] { return kernels::mean(long_line, {}, false); }},
      {"sum_of_squares (split rows)", [&] { return kernels::sum_of_squares(long_line); }},
      {"mean interleaved",
       [&] {
         return kernels::mean(cols.as_strided({3, 171, 257}, {171 * 257, 257, 1}, 0), {0, 2}, false);
       }},
      {"column_sum", [&] { return kernels::column_sum(cols); }},
      {"sum rows in pieces", [&] { return kernels::sum(pieces, {1}, false); }},
      {"sum columns in pieces (split)", [&] { return kernels::sum(pieces, {0}, false); }},
      {"sum over batch and time in pieces (split, two reduced dims)",
       [&] {
         return kernels::sum(pieces.as_strided({8, 4, 260, 64}, {4 * 260 * 64, 260 * 64, 64, 1}, 0), {0, 2}, false);
       }},
      {"max rows", [&] { return kernels::max(ties, 1, false).first; }},
      {"argmax rows", [&] { return kernels::argmax(ties, 1, false); }},
      {"max columns", [&] { return kernels::max(ties, 0, false).first; }},
      {"argmax columns", [&] { return kernels::argmax(ties, 0, true); }},
      {"argmax long line", [&] { return kernels::argmax(long_line, 0, false); }},
      {"max backward",
       [&] { return kernels::max_backward(grad, kernels::argmax(ties, 0, true), ties.shape(), 0, true); }},
  };
  for (const auto& [name, op] : ops) {
    std::vector<double> forward;
    {
      kernels::EmuScheduleGuard s("forward");
      forward = values(op());
    }
    for (const std::string schedule : {"reverse", "random:1", "race:4242"}) {
      kernels::EmuScheduleGuard s(schedule);
      INFO(name << " under " << schedule);
      CHECK(bitwise_equal(values(op()), forward));
      CHECK(bitwise_equal(values(op()), forward));  // and again: run to run
    }
  }
}

// 16-bit inputs are read by the kernels themselves (as many launches as float32: no cast around
// them), reduced in float and rounded once: the reference's result (exact upcast, float64 sum, one
// rounding) to within one rounding of the format. The sum of squares is a float32 statistic.
TEST_CASE("reduce kernels: 16-bit sums, column sums, maxima and sums of squares run natively",
          "[cuda][reduce][family:reduce][float16]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(21);
  const Tensor x32 = rand_uniform({1000, 70}, 0.0, 2.0, {}, gen);  // positive: no cancellation in the sums
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    const double eps = dt == DType::Float16 ? 0.0009765625 : 0.0078125;
    const Tensor x = kernels::cast(x32, dt);
    const Tensor on_device = to_test_device(x), on_device32 = to_test_device(x32);
    const std::vector<std::function<Tensor(const Tensor&)>> ops = {
        [](const Tensor& t) { return kernels::sum(t, {1}, false); },
        [](const Tensor& t) { return kernels::mean(t, {0}, false); },
        [](const Tensor& t) { return kernels::column_sum(t); },
        [](const Tensor& t) { return kernels::max(t, 1, false).first; },
        [](const Tensor& t) { return kernels::sum_of_squares(t); },
    };
    const char* names[] = {"sum over dim 1", "mean over dim 0", "column_sum", "max over dim 1", "sum_of_squares"};
    for (std::size_t i = 0; i < ops.size(); ++i) {
      INFO(names[i]);
      const std::uint64_t before32 = kernels::emu_kernel_launches();
      (void)ops[i](on_device32);
      const std::uint64_t launches32 = kernels::emu_kernel_launches() - before32;
      const std::uint64_t before = kernels::emu_kernel_launches();
      const Tensor got = ops[i](on_device);
      CHECK(kernels::emu_kernel_launches() - before == launches32);
      CHECK(got.dtype() == (i == 4 ? DType::Float32 : dt));
      const Tensor want = reference([&] { return ops[i](x); });
      REQUIRE(want.dtype() == got.dtype());
      // float32 results (the sum of squares) carry float32's accuracy; 16-bit ones one rounding.
      const double tol = i == 4 ? 1e-6 : eps;
      check_emu_close(got, want, 0.0, tol, names[i]);
    }
  }
}
