// The CUDA elementwise kernels (kernels/cuda/elementwise.cu) on the emulated device, against the
// CPU reference (kernels/ref/elementwise.cpp): every UnaryOp and BinaryOp on a large broadcast,
// strided operand set, the grid-stride loop past the grid cap, many non-mergeable dims, in-place
// use, and exact results for integer comparisons, where and masked_fill. The op harness
// (tests/ops/elementwise_test.cpp, mode emu) covers the small shapes and the backward passes.
// The kernels use no shared memory, barriers or warp intrinsics, so the emulator's schedule
// cannot change their results and is not varied here.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "core/float16.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/elementwise.h"
#include "kernels/index.h"
#include "support/common.h"
#include "support/emulated_device.h"

using namespace define;
using kernels::BinaryOp;
using kernels::UnaryOp;
using test::kernel_test_device;
using test::check_emu_close;
using test::to_test_device;

namespace {

using test::check_identical;
using test::to_cpu;

// Runs f on the reference CPU path.
Tensor reference(const std::function<Tensor()>& f) { return test::on_cpu_backend(kernels::Backend::Ref, f); }

struct UnaryCase {
  UnaryOp op;
  double p0 = 0, p1 = 0;
  bool positive = false;  // input drawn from [0.5, 2] (log, sqrt, fractional powers)
};

struct BinaryCase {
  BinaryOp op;
  double p0 = 0, p1 = 0;
  bool positive_a = false, positive_b = false;
};

const std::vector<UnaryCase>& all_unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {UnaryOp::Neg}, {UnaryOp::Exp}, {UnaryOp::Log, 0, 0, true}, {UnaryOp::Sqrt, 0, 0, true},
      {UnaryOp::Abs}, {UnaryOp::Tanh}, {UnaryOp::Sigmoid}, {UnaryOp::Relu}, {UnaryOp::Gelu}, {UnaryOp::Silu},
      {UnaryOp::AddScalar, 1.5}, {UnaryOp::MulScalar, -3.0}, {UnaryOp::RSubScalar, 2.0},
      {UnaryOp::RDivScalar, 3.0, 0, true},
      // PowScalar: the general case and the CPU path's special cases 2, 1 and 0.5.
      {UnaryOp::PowScalar, 2.5, 0, true}, {UnaryOp::PowScalar, -1.5, 0, true}, {UnaryOp::PowScalar, 2.0},
      {UnaryOp::PowScalar, 1.0}, {UnaryOp::PowScalar, 0.5, 0, true}, {UnaryOp::PowScalar, 3.0},
      {UnaryOp::Clamp, -0.5, 0.25},
      {UnaryOp::EqScalar, 0.5}, {UnaryOp::NeScalar, 0.5}, {UnaryOp::LtScalar, 0.25}, {UnaryOp::LeScalar, 0.25},
      {UnaryOp::GtScalar, -0.1}, {UnaryOp::GeScalar, -0.1},
  };
  return cases;
}

const std::vector<BinaryCase>& all_binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {BinaryOp::Add}, {BinaryOp::Sub}, {BinaryOp::Mul}, {BinaryOp::Div, 0, 0, false, true},
      {BinaryOp::Maximum}, {BinaryOp::Minimum}, {BinaryOp::Pow, 0, 0, true, false},
      {BinaryOp::AddScaled, -0.5}, {BinaryOp::AddScaled, 1.0},
      {BinaryOp::Eq}, {BinaryOp::Ne}, {BinaryOp::Lt}, {BinaryOp::Le}, {BinaryOp::Gt}, {BinaryOp::Ge},
      {BinaryOp::MaxWeight}, {BinaryOp::ReluBackward}, {BinaryOp::GeluBackward}, {BinaryOp::SiluBackward},
      {BinaryOp::SigmoidBackward}, {BinaryOp::TanhBackward}, {BinaryOp::SqrtBackward, 0, 0, false, true},
      {BinaryOp::AbsBackward}, {BinaryOp::ClampBackward, -0.5, 0.25},
      {BinaryOp::PowScalarBackward, 2.5, 0, false, true}, {BinaryOp::PowScalarBackward, 2.0},
      {BinaryOp::PowScalarBackward, 0.0},
  };
  return cases;
}

std::string describe(const char* name, double p0, double p1, DType dt) {
  return std::string(name) + "(p0=" + std::to_string(p0) + ", p1=" + std::to_string(p1) + ") " + std::string(dtype_name(dt));
}

// Values on a coarse grid (multiples of 1/8 in [-2, 2]) so that comparisons and maximum see
// many exact ties between the broadcast operands.
Tensor grid_values(const Shape& shape, DType dt, Generator& gen) {
  return kernels::cast(mul(kernels::cast(rand_int(shape, 33, {.dtype = DType::Int64}, gen), DType::Float64) - 16.0, 0.125), dt);
}

}  // namespace

// Every op: float32 on a large case, float64 (tight tolerance: same formulas in double) on a smaller
// one that also puts the broadcast operand first.
TEST_CASE("cuda elementwise: every op on broadcast strided operands vs reference",
          "[cuda][elementwise][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(11);
  struct Config {
    DType dtype;
    std::int64_t rows, cols;
    double tol;
    bool both_orders;
  };
  // float32: a is [320, 313] (100,160 elements), the transpose of a contiguous [313, 320], so not
  // flat; the row [313] is broadcast over its rows.
  for (const Config cfg : {Config{DType::Float32, 320, 313, 1e-5, false}, Config{DType::Float64, 67, 33, 1e-12, true}}) {
    const DType dt = cfg.dtype;
    const double tol = cfg.tol;
    const Tensor a_base = grid_values({cfg.cols, cfg.rows}, dt, gen);
    const Tensor a_pos_base = kernels::cast(rand_uniform({cfg.cols, cfg.rows}, 0.5, 2.0, {}, gen), dt);
    const Tensor b = grid_values({cfg.cols}, dt, gen);
    const Tensor b_pos = kernels::cast(rand_uniform({cfg.cols}, 0.5, 2.0, {}, gen), dt);
    const Tensor a = transpose(a_base, 0, 1), a_pos = transpose(a_pos_base, 0, 1);
    const Tensor ea = transpose(to_test_device(a_base), 0, 1), ea_pos = transpose(to_test_device(a_pos_base), 0, 1);
    const Tensor eb = to_test_device(b), eb_pos = to_test_device(b_pos);
    REQUIRE_FALSE(ea.is_contiguous());

    for (const UnaryCase& c : all_unary_cases()) {
      const Tensor& x = c.positive ? a_pos : a;
      const Tensor& ex = c.positive ? ea_pos : ea;
      const Tensor ref = reference([&] { return kernels::unary(c.op, x, c.p0, c.p1); });
      check_emu_close(kernels::unary(c.op, ex, c.p0, c.p1), ref, tol, tol,
                      describe(kernels::op_name(c.op), c.p0, c.p1, dt));
    }
    for (const BinaryCase& c : all_binary_cases()) {
      const std::string what = describe(kernels::op_name(c.op), c.p0, c.p1, dt);
      {
        const Tensor& x = c.positive_a ? a_pos : a;
        const Tensor& ex = c.positive_a ? ea_pos : ea;
        const Tensor& y = c.positive_b ? b_pos : b;
        const Tensor& ey = c.positive_b ? eb_pos : eb;
        check_emu_close(kernels::binary(c.op, ex, ey, c.p0, c.p1),
                        reference([&] { return kernels::binary(c.op, x, y, c.p0, c.p1); }), tol, tol,
                        what + " [a, row]");
      }
      if (cfg.both_orders) {  // the broadcast operand first: the other stride pattern
        const Tensor& x = c.positive_a ? b_pos : b;
        const Tensor& ex = c.positive_a ? eb_pos : eb;
        const Tensor& y = c.positive_b ? a_pos : a;
        const Tensor& ey = c.positive_b ? ea_pos : ea;
        check_emu_close(kernels::binary(c.op, ex, ey, c.p0, c.p1),
                        reference([&] { return kernels::binary(c.op, x, y, c.p0, c.p1); }), tol, tol,
                        what + " [row, a]");
      }
    }
  }
}

TEST_CASE("cuda elementwise: odd flat sizes and the grid-stride loop past the grid cap",
          "[cuda][elementwise][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(12);
  // 4096 blocks of 256 threads cover 1,048,576 elements; the last size makes every thread loop.
  for (const std::int64_t n : {1, 31, 33, 255, 257, 4097, 1048576 + 333}) {
    const Tensor a = rand_uniform({n}, -2, 2, {}, gen), b = rand_uniform({n}, -2, 2, {}, gen);
    const Tensor ea = to_test_device(a), eb = to_test_device(b);
    const std::string size = "n=" + std::to_string(n);
    check_emu_close(kernels::binary(BinaryOp::GeluBackward, ea, eb),
                    reference([&] { return kernels::binary(BinaryOp::GeluBackward, a, b); }), 1e-5, 1e-5,
                    size + " gelu backward");
    check_emu_close(kernels::unary(UnaryOp::Silu, ea), reference([&] { return kernels::unary(UnaryOp::Silu, a); }),
                    1e-5, 1e-5, size + " silu");
    check_identical(kernels::where(kernels::unary(UnaryOp::GtScalar, ea, 0.0), ea, eb),
                    reference([&] { return kernels::where(kernels::unary(UnaryOp::GtScalar, a, 0.0), a, b); }),
                    size + " where");
  }
}

TEST_CASE("cuda elementwise: many non-mergeable dims", "[cuda][elementwise][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(13);
  // A permuted 5-d tensor (no two dims merge) plus a broadcast operand with size-1 dims.
  const Tensor base = rand_uniform({3, 4, 5, 6, 7}, -2, 2, {}, gen);
  const Tensor other = rand_uniform({6, 1, 5, 1}, -2, 2, {}, gen);
  const Tensor x = permute(base, {4, 2, 0, 3, 1});  // [7, 5, 3, 6, 4]
  const Tensor y = permute(other, {2, 1, 0, 3});    // [5, 1, 6, 1], broadcast to x's last 4 dims
  const Tensor ex = permute(to_test_device(base), {4, 2, 0, 3, 1});
  const Tensor ey = permute(to_test_device(other), {2, 1, 0, 3});
  REQUIRE(ex.shape() == Shape{7, 5, 3, 6, 4});
  check_emu_close(kernels::binary(BinaryOp::Mul, ex, ey),
                  reference([&] { return kernels::binary(BinaryOp::Mul, x, y); }), 1e-6, 1e-6, "mul");
  check_identical(kernels::binary(BinaryOp::Maximum, ey, ex),
                  reference([&] { return kernels::binary(BinaryOp::Maximum, y, x); }), "maximum");
  check_emu_close(kernels::unary(UnaryOp::Tanh, ex), reference([&] { return kernels::unary(UnaryOp::Tanh, x); }), 1e-5,
                  1e-5, "tanh");
  const Tensor mask = kernels::unary(UnaryOp::LtScalar, y, 0.0);
  const Tensor emask = kernels::unary(UnaryOp::LtScalar, ey, 0.0);
  check_identical(kernels::masked_fill(ex, emask, -7.5), reference([&] { return kernels::masked_fill(x, mask, -7.5); }),
                  "masked_fill");
  check_identical(kernels::where(emask, ey, ex), reference([&] { return kernels::where(mask, y, x); }), "where");
}

TEST_CASE("cuda elementwise: integer comparisons are exact", "[cuda][elementwise][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(14);
  const std::vector<std::pair<BinaryOp, UnaryOp>> ops = {
      {BinaryOp::Eq, UnaryOp::EqScalar}, {BinaryOp::Ne, UnaryOp::NeScalar}, {BinaryOp::Lt, UnaryOp::LtScalar},
      {BinaryOp::Le, UnaryOp::LeScalar}, {BinaryOp::Gt, UnaryOp::GtScalar}, {BinaryOp::Ge, UnaryOp::GeScalar}};
  for (const DType dt : {DType::Int32, DType::Int64}) {
    // Small values, so ties are frequent; a [37, 41] block against a strided [41] row and a [37, 1] column.
    const Tensor a = kernels::cast(rand_int({37, 41}, 5, {.dtype = DType::Int64}, gen), dt);
    const Tensor row_base = kernels::cast(rand_int({82}, 5, {.dtype = DType::Int64}, gen), dt);
    const Tensor row = row_base.as_strided({41}, {2}, 0);
    const Tensor col = kernels::cast(rand_int({37, 1}, 5, {.dtype = DType::Int64}, gen), dt);
    const Tensor ea = to_test_device(a), erow = to_test_device(row_base).as_strided({41}, {2}, 0),
                 ecol = to_test_device(col);
    for (const auto& op_pair : ops) {
      const BinaryOp bop = op_pair.first;  // (captured below: not a structured binding, for clang before 16)
      const UnaryOp uop = op_pair.second;
      const std::string name = std::string(kernels::op_name(bop)) + " " + std::string(dtype_name(dt));
      const Tensor r1 = kernels::binary(bop, ea, erow);
      CHECK(r1.dtype() == dt);
      check_identical(r1, reference([&] { return kernels::binary(bop, a, row); }), name + " [a, row]");
      check_identical(kernels::binary(bop, ecol, erow), reference([&] { return kernels::binary(bop, col, row); }),
                      name + " [col, row]");
      // Scalars that are not integers compare in double: x < 2.5 is not x < 2.
      for (const double s : {2.0, 2.5, -0.5, 4.0}) {
        check_identical(kernels::unary(uop, ea, s), reference([&] { return kernels::unary(uop, a, s); }),
                        name + " scalar " + std::to_string(s));
      }
    }
  }
  // Values beyond float precision: a float32 scalar would round 16777217 to 16777216.
  const Tensor big = from_vector<std::int32_t>({16777216, 16777217, 16777218});
  CHECK(to_cpu(kernels::unary(UnaryOp::EqScalar, to_test_device(big), 16777217.0)).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{0, 1, 0});
  const Tensor i64 = from_vector<std::int64_t>({-3, 0, 7});
  CHECK(to_cpu(kernels::unary(UnaryOp::LtScalar, to_test_device(i64), -2.5)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 0, 0});
}

TEST_CASE("cuda elementwise: where and masked_fill are exact for every dtype pair",
          "[cuda][elementwise][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(15);
  // The kernels move values by their size (the 16-bit formats share one kernel, float32 and int32 another).
  const std::vector<DType> dtypes = {DType::Float32, DType::Float64, DType::Int32,
                                     DType::Int64,   DType::Float16, DType::BFloat16};
  // A [11, 1] condition/mask broadcast against [11, 13] values: floats mix 0, -0.0 (false), NaN and
  // a denormal-sized value (true); integers mix 0 with positive and negative values.
  const std::vector<double> float_cond = {0, 1, -0.0, 0.5, std::nan(""), -2, 0, 2, 0, 0, 1e-30};
  const std::vector<double> int_cond = {0, 1, 0, 3, -1, -2, 0, 2, 0, 0, 1};
  for (const DType cd : dtypes) {
    const Tensor cond = kernels::cast(from_vector<double>(is_integral(cd) ? int_cond : float_cond, {11, 1}), cd);
    const Tensor econd = to_test_device(cond);
    for (const DType vd : dtypes) {
      const std::string what = std::string("cond ") + std::string(dtype_name(cd)) + ", values " + std::string(dtype_name(vd));
      // x: a non-contiguous [11, 13] (transpose of [13, 11]); y: a [13] row.
      const Tensor x_base = kernels::cast(kernels::cast(rand_int({13, 11}, 1000, {.dtype = DType::Int64}, gen), DType::Float64) - 500.0, vd);
      const Tensor y = kernels::cast(kernels::cast(rand_int({13}, 1000, {.dtype = DType::Int64}, gen), DType::Float64) - 500.0, vd);
      const Tensor x = transpose(x_base, 0, 1), ex = transpose(to_test_device(x_base), 0, 1), ey = to_test_device(y);
      check_identical(kernels::where(econd, ex, ey), reference([&] { return kernels::where(cond, x, y); }),
                      what + " where(cond, x, row)");
      check_identical(kernels::where(econd, ey, ex), reference([&] { return kernels::where(cond, y, x); }),
                      what + " where(cond, row, x)");
      const double value = is_integral(vd) ? -7.0 : -7.25;
      check_identical(kernels::masked_fill(ex, econd, value), reference([&] { return kernels::masked_fill(x, cond, value); }),
                      what + " masked_fill");
    }
  }
}

TEST_CASE("cuda elementwise: in place on strided views", "[cuda][elementwise][inplace][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(16);
  const Tensor base = rand_uniform({33, 31}, -2, 2, {}, gen);
  const Tensor row = rand_uniform({33}, -2, 2, {}, gen);
  const Tensor mask = kernels::cast(rand_int({31, 1}, 2, {.dtype = DType::Int64}, gen), DType::Int32);
  // Expected values: the same sequence out of place on the reference path.
  const Tensor expected = reference([&] {
    Tensor t = transpose(base, 0, 1);  // [31, 33]
    t = kernels::binary(BinaryOp::AddScaled, t, row, -0.5);
    t = kernels::unary(UnaryOp::Gelu, t);
    t = kernels::binary(BinaryOp::Mul, t, t);
    return kernels::masked_fill(t, mask, 3.0);
  });
  // On the device, each step writes into the transposed view of `ebase` itself.
  const Tensor ebase = to_test_device(base);
  const Tensor view = transpose(ebase, 0, 1);
  const Tensor erow = to_test_device(row);
  kernels::binary_into(BinaryOp::AddScaled, view, view, erow, -0.5);
  kernels::unary_into(UnaryOp::Gelu, view, view);
  kernels::binary_into(BinaryOp::Mul, view, view, view);
  kernels::masked_fill_into(view, view, to_test_device(mask), 3.0);
  check_emu_close(view, expected, 1e-5, 1e-5, "in-place sequence");
  check_emu_close(ebase, reference([&] { return kernels::contiguous(transpose(expected, 0, 1)); }), 1e-5, 1e-5,
                  "written through to the base");
}

// The per-element kernels index in 32 bits when the tensors allow it and in 64 bits otherwise
// (kernels/cuda/common.cuh). Both paths on the same strided, broadcast operands: the same bits.
TEST_CASE("cuda elementwise: 32-bit and 64-bit index math give the same results",
          "[cuda][elementwise][family:elementwise]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(15);
  const Tensor base = rand_uniform({3, 4, 5, 6, 7}, -2, 2, {}, gen);
  const Tensor other = rand_uniform({6, 1, 5, 1}, -2, 2, {}, gen);
  const Tensor index = rand_int({7, 5, 3, 6, 2}, 4, {.dtype = DType::Int64}, gen);
  const Tensor rows = rand_int({9}, 7, {.dtype = DType::Int32}, gen);
  const Tensor ebase = to_test_device(base), eother = to_test_device(other), eindex = to_test_device(index),
               erows = to_test_device(rows);
  // Every output of the kernels that take the index-width choice, on non-mergeable dims.
  auto outputs = [&] {
    const Tensor x = permute(ebase, {4, 2, 0, 3, 1});  // [7, 5, 3, 6, 4]
    const Tensor y = permute(eother, {2, 1, 0, 3});     // [5, 1, 6, 1]
    const Tensor mask = kernels::unary(UnaryOp::LtScalar, y, 0.0);
    std::vector<Tensor> out = {kernels::binary(BinaryOp::Mul, x, y), kernels::unary(UnaryOp::Tanh, x),
                               kernels::where(mask, y, x), kernels::masked_fill(x, mask, -7.5),
                               kernels::contiguous(x), kernels::gather(x, 4, eindex),
                               kernels::index_select(x, 0, erows)};
    Tensor acc = kernels::contiguous(x);
    kernels::accumulate_into(permute(acc, {1, 0, 2, 3, 4}), permute(x, {1, 0, 2, 3, 4}));
    Tensor filled = kernels::contiguous(x);
    kernels::fill(permute(filled, {3, 1, 0, 2, 4}).as_strided({6, 5, 2, 3, 4}, {4, 72, 360, 24, 1}, 0), 0.25);
    out.push_back(acc);
    out.push_back(filled);
    return out;
  };
  REQUIRE_FALSE(kernels::emu_index64());
  const std::vector<Tensor> narrow = outputs();
  std::vector<Tensor> wide;
  {
    kernels::EmuIndex64Guard force;
    REQUIRE(kernels::emu_index64());
    wide = outputs();
  }
  CHECK_FALSE(kernels::emu_index64());
  REQUIRE(narrow.size() == wide.size());
  for (std::size_t i = 0; i < narrow.size(); ++i) check_identical(narrow[i], wide[i], "output " + std::to_string(i));
  // And both right: the product against the reference.
  const Tensor x = permute(base, {4, 2, 0, 3, 1}), y = permute(other, {2, 1, 0, 3});
  check_emu_close(narrow[0], reference([&] { return kernels::binary(BinaryOp::Mul, x, y); }), 1e-6, 1e-6, "mul");
  check_identical(narrow[5], reference([&] { return kernels::gather(x, 4, index); }), "gather");
}

// A view whose element offsets pass 2^31 needs the 64-bit path: int32 storage of 2^31 + 8 elements
// (8 GiB of address space; only the pages written are ever touched), seen as [2, 8] with a row
// stride of 2^31. Written and read back through that view, then read through a view at offset 2^31
// (small offsets, the 32-bit path) to see the second row landed where it belongs.
TEST_CASE("cuda copy: offsets beyond int32 take the 64-bit path", "[cuda][copy][family:copy]") {
  REQUIRE(kernels::register_devices().emu);
  const std::int64_t far = std::int64_t{1} << 31;
  Tensor big;
  try {
    big = empty({far + 8}, {DType::Int32, kernel_test_device()});
  } catch (const define::Error& e) {
    DEFINE_SKIP_TEST(std::string("no 8 GiB of address space for the emulated device (") + e.what() + ")");
  }
  std::vector<std::int32_t> v(16);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i + 1);
  const Tensor src = to_test_device(from_vector<std::int32_t>(v, {2, 8}));
  const Tensor view = big.as_strided({2, 8}, {far, 1}, 0);
  kernels::copy_into(view, src);
  CHECK(test::to_cpu(kernels::contiguous(view)).to_vector<std::int32_t>() == v);
  const std::vector<std::int32_t> second(v.begin() + 8, v.end());
  CHECK(test::to_cpu(kernels::contiguous(big.as_strided({8}, {1}, far))).to_vector<std::int32_t>() == second);
}

// Flat operands on a 16-byte boundary take the packed kernels (16-byte loads and stores, then the
// tail one by one); the same values one element off that boundary take the per-element kernels.
// Both give the same bits, and the reference's values to within one rounding of the format.
TEST_CASE("cuda elementwise: packed and per-element kernels agree in every float format",
          "[cuda][elementwise][family:elementwise][float16]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(13);
  const std::int64_t n = 1000 + 5;  // 125 packs of 8 16-bit elements and a tail of 5
  for (const DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    const double tol = dt == DType::Float16 ? 0.0009765625 : dt == DType::BFloat16 ? 0.0078125 : 1e-6;
    const Tensor a = kernels::cast(rand_uniform({n + 1}, -2, 2, {}, gen), dt);
    const Tensor b = kernels::cast(rand_uniform({n + 1}, -2, 2, {}, gen), dt);
    const Tensor ea = to_test_device(a), eb = to_test_device(b);
    // One element in: flat but off the boundary (the per-element kernels).
    auto shifted = [&](const Tensor& t) { return t.as_strided({n}, {1}, t.offset() + 1); };
    const Tensor off_a = shifted(ea), off_b = shifted(eb);
    auto fresh_copy = [](const Tensor& t) {  // a new allocation: on the boundary (the packed kernels)
      Tensor out = empty(t.shape(), {t.dtype(), t.device()});
      kernels::copy_into(out, t);
      return out;
    };
    const Tensor on_a = fresh_copy(off_a), on_b = fresh_copy(off_b);
    REQUIRE(reinterpret_cast<std::uintptr_t>(on_a.raw_data()) % 16 == 0);
    REQUIRE(reinterpret_cast<std::uintptr_t>(on_b.raw_data()) % 16 == 0);
    REQUIRE(reinterpret_cast<std::uintptr_t>(off_a.raw_data()) % 16 != 0);
    const std::string name(dtype_name(dt));
    const auto unary_case = [&](const Tensor& x) { return kernels::unary(UnaryOp::Gelu, x); };
    const auto binary_case = [&](const Tensor& x, const Tensor& y) {
      return kernels::binary(BinaryOp::AddScaled, x, y, -0.5);
    };
    check_identical(unary_case(on_a), unary_case(off_a), name + " gelu: packed vs per element");
    check_identical(binary_case(on_a, on_b), binary_case(off_a, off_b), name + " add_scaled: packed vs per element");
    const Tensor cpu_a = shifted(a), cpu_b = shifted(b);
    check_emu_close(unary_case(on_a), reference([&] { return unary_case(cpu_a); }), tol, tol, name + " gelu");
    check_emu_close(binary_case(on_a, on_b), reference([&] { return binary_case(cpu_a, cpu_b); }), tol, tol,
                    name + " add_scaled");
  }
}

// Casts from float64 to float16 / bfloat16 on the GPUs round once: through a float rounded "to odd"
// (kernels/cuda/float16.cuh), never through a float rounded to nearest, which rounds twice and
// turns values just above a tie into ties. Values a hair above and below every kind of tie, the
// largest finite values and the overflow boundaries, subnormals, signed zeros, infinities and NaN,
// against the host's one-step conversion bit for bit; and masked_fill's value, carried into the
// kernel as a float, comes out as the same one rounding.
TEST_CASE("cuda cast: float64 to float16 and bfloat16 rounds once", "[cuda][copy][family:copy][float16]") {
  REQUIRE(kernels::register_devices().emu);
  const auto check_format = [&]<typename T>(T, int mantissa_bits, const std::vector<double>& extremes) {
    std::vector<double> v = extremes;
    for (const int e : {-20, -3, 0, 1, 7, 14})
      for (int k = 0; k < 9; ++k) {
        const double ulp = std::ldexp(1.0, e - mantissa_bits);
        const double tie = std::ldexp(1.0, e) + (k + 0.5) * ulp;
        for (const double off : {0.0, 1e-9, -1e-9, std::ldexp(ulp, -30), -std::ldexp(ulp, -30)})
          for (const double sign : {1.0, -1.0}) v.push_back(sign * (tie + off * std::ldexp(1.0, e)));
      }
    const Tensor x = from_vector(v, {static_cast<std::int64_t>(v.size())});
    const Tensor got = to_cpu(kernels::cast(to_test_device(x), dtype_of_v<T>));
    int double_rounding_cases = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      INFO("value " << v[i]);
      const std::uint16_t want = T(v[i]).bits, have = got.data<T>()[i].bits;
      if (std::isnan(v[i]))
        CHECK(std::isnan(static_cast<float>(got.data<T>()[i])));
      else
        CHECK(have == want);
      double_rounding_cases += T(static_cast<float>(v[i])).bits != want;
    }
    CHECK(double_rounding_cases > 0);  // the values do tell one rounding from two
    const Tensor mask = from_vector(std::vector<std::int32_t>{1}, {1});
    const double fill = 1.0 + std::ldexp(1.0, -mantissa_bits - 1) + 1e-12;  // just above a tie: rounds up
    const Tensor filled = to_cpu(
        kernels::masked_fill(to_test_device(kernels::cast(zeros({1}), dtype_of_v<T>)), to_test_device(mask), fill));
    CHECK(filled.data<T>()[0].bits == T(fill).bits);
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  check_format(Half{}, 10,
               {65504.0, 65519.99, 65520.0, 1e6, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-10, 0.0, -0.0, inf, -inf, nan});
  check_format(BFloat16{}, 7, {3.3895e38, 3.3962e38, 3.4e38, 1e39, 1.2e-38, 9.2e-41, 1e-45, 0.0, -0.0, inf, -inf, nan});
}
