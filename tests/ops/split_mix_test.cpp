// split_mix / channel_shuffle: harness cases (every mode; both are permutations, so cpu and emu
// are compared with the reference EXACTLY), equivalence with the generic ops they replace
// (chunk + interleaved concat, reshape/transpose for the shuffle), the spec's worked example,
// integer dtypes, and named errors.
#include <catch2/catch.hpp>

#include <cstring>

#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/split_mix.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;

namespace {

using V = const std::vector<Tensor>&;

// Any difference fails: allowed error 1e-300 (no float32 or float64 difference is that small,
// and a zero error is 0% of it).
constexpr double kExact = 1e-300;

InputSpec mat(Shape s, bool non_contiguous = false, bool grad = true) {
  InputSpec spec;
  spec.shape = std::move(s);
  spec.non_contiguous = non_contiguous;
  spec.grad = grad;
  return spec;
}

// An exact harness case of split_mix(x, y, g, s). Finite differences only for small outputs
// (the full Jacobian of a [257, 32] output is 8224^2 entries).
OpCase mix_case(std::string name, InputSpec x, InputSpec y, std::int64_t g, std::int64_t s, bool gradcheck = true) {
  OpCase c{.name = "split_mix/" + std::move(name), .inputs = {std::move(x), std::move(y)},
           .forward = [g, s](V in) { return split_mix(in[0], in[1], g, s); }};
  c.atol = kExact;
  c.rtol = 0;
  c.gradcheck = gradcheck;
  return c;
}

OpCase shuffle_case(std::string name, InputSpec y, std::int64_t s, bool gradcheck = true) {
  OpCase c{.name = "channel_shuffle/" + std::move(name), .inputs = {std::move(y)},
           .forward = [s](V in) { return channel_shuffle(in[0], s); }};
  c.atol = kExact;
  c.rtol = 0;
  c.gradcheck = gradcheck;
  return c;
}

// What split_mix replaces, in generic differentiable ops: the transpose shuffle as
// reshape [.., s, q/s] -> transpose -> reshape [.., q], then chunk both inputs into g pieces and
// concat them interleaved, input chunk first.
Tensor shuffle_by_generic_ops(const Tensor& y, std::int64_t s) {
  if (s <= 1) return y;
  Shape split = y.shape();
  const std::int64_t q = split.back();
  split.back() = s;
  split.push_back(q / s);
  return reshape(transpose(reshape(y, split), -1, -2), y.shape());
}

Tensor mix_by_generic_ops(const Tensor& x, const Tensor& y, std::int64_t g, std::int64_t s) {
  const std::vector<Tensor> xs = chunk(x, g, -1), zs = chunk(shuffle_by_generic_ops(y, s), g, -1);
  std::vector<Tensor> pieces;
  for (std::int64_t c = 0; c < g; ++c) {
    pieces.push_back(xs[c]);
    pieces.push_back(zs[c]);
  }
  return concat(pieces, -1);
}

using define::test::values;

// The bytes of a tensor's elements (contiguous CPU copy), for bitwise comparison.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = copy_to_device(kernels::contiguous(t), Device::cpu());
  std::vector<unsigned char> out(static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("ops: split_mix", "[ops][harness][split_mix][family:split_mix]") {
  define::test::run_op_cases({
      mix_case("g1_p3_q5_T1", mat({1, 3}), mat({1, 5}), 1, 0),
      mix_case("g1_p3_q5_shuffle5_T31", mat({31, 3}), mat({31, 5}), 1, 5),
      mix_case("g2_p6_q10_T31", mat({31, 6}), mat({31, 10}), 2, 0),
      mix_case("g2_p6_q10_shuffle2_T31", mat({31, 6}), mat({31, 10}), 2, 2),
      mix_case("g2_p6_q10_shuffle5_T1", mat({1, 6}), mat({1, 10}), 2, 5),
      mix_case("g4_p12_q20_T1", mat({1, 12}), mat({1, 20}), 4, 0),
      mix_case("g4_p12_q20_shuffle4_T31", mat({31, 12}), mat({31, 20}), 4, 4),
      mix_case("g4_p12_q20_T257", mat({257, 12}), mat({257, 20}), 4, 0, false),
      mix_case("g4_p12_q20_shuffle2_T257", mat({257, 12}), mat({257, 20}), 4, 2, false),
      mix_case("g4_p12_q20_shuffle10_T257", mat({257, 12}), mat({257, 20}), 4, 10, false),
      mix_case("g1_p3_q5_shuffle5_T257", mat({257, 3}), mat({257, 5}), 1, 5, false),
      mix_case("g2_p6_q10_shuffle2_T257", mat({257, 6}), mat({257, 10}), 2, 2, false),
      mix_case("g4_p4_q12_shuffle3", mat({5, 4}), mat({5, 12}), 4, 3),
      mix_case("shuffle_1_is_none", mat({3, 4}), mat({3, 8}), 2, 1),
      // Chunks of whole shuffle rows (s divides q/g): the CPU path's unrolled transposes, s = 2..16.
      mix_case("g2_p6_q20_shuffle2_T31", mat({31, 6}), mat({31, 20}), 2, 2),
      mix_case("g4_p12_q48_shuffle4_T257", mat({257, 12}), mat({257, 48}), 4, 4, false),
      mix_case("g2_p6_q48_shuffle8_T31", mat({31, 6}), mat({31, 48}), 2, 8, false),
      mix_case("g1_p3_q48_shuffle16_T7", mat({7, 3}), mat({7, 48}), 1, 16),
      mix_case("g2_p6_q12_shuffle3_T5", mat({5, 6}), mat({5, 12}), 2, 3),
  });
}

TEST_CASE("ops: split_mix 3-d, 1-d and non-contiguous inputs", "[ops][harness][split_mix][family:split_mix]") {
  define::test::run_op_cases({
      mix_case("3d_g2_shuffle5", mat({2, 3, 6}), mat({2, 3, 10}), 2, 5),
      mix_case("3d_g4_T2x31", mat({2, 31, 12}), mat({2, 31, 20}), 4, 0, false),
      mix_case("3d_g4_shuffle4_T2x31", mat({2, 31, 12}), mat({2, 31, 20}), 4, 4, false),
      mix_case("1d_g4_shuffle2", mat({12}), mat({20}), 4, 2),
      // 2-d non-contiguous: transposed storage (row stride 1, column stride T), viewed in place.
      mix_case("nc_g4_shuffle2_T31", mat({31, 12}, true), mat({31, 20}, true), 4, 2, false),
      mix_case("nc_x_only_g2_T31", mat({31, 6}, true), mat({31, 10}), 2, 0, false),
      mix_case("nc_y_only_g2_shuffle5_T7", mat({7, 6}), mat({7, 10}, true), 2, 5),
      // 3-d non-contiguous: the rows do not collapse to one stride (a contiguous copy first).
      mix_case("nc_3d_g4_shuffle4", mat({2, 5, 12}, true), mat({2, 5, 20}, true), 4, 4),
      // 1-d non-contiguous: stride 2.
      mix_case("nc_1d_g4_shuffle5", mat({12}, true), mat({20}, true), 4, 5),
      mix_case("3d_g2_p6_q16_shuffle4", mat({2, 3, 6}), mat({2, 3, 16}), 2, 4),
      mix_case("nc_g2_p6_q16_shuffle4_T9", mat({9, 6}, true), mat({9, 16}, true), 2, 4),
      // Only one input differentiable.
      mix_case("y_no_grad", mat({3, 6}), mat({3, 10}, false, false), 2, 2),
      mix_case("x_no_grad", mat({3, 6}, false, false), mat({3, 10}), 2, 2),
      // Wide rows: output width 256 and 320, rows spanning several 256-thread blocks unevenly.
      mix_case("g8_p96_q160_shuffle8_T33", mat({33, 96}), mat({33, 160}), 8, 8, false),
      mix_case("g8_p24_q296_shuffle4_T257", mat({257, 24}), mat({257, 296}), 8, 4, false),
  });
}

TEST_CASE("ops: channel_shuffle", "[ops][harness][split_mix][family:split_mix]") {
  define::test::run_op_cases({
      shuffle_case("s2_q8_T1", mat({1, 8}), 2),
      shuffle_case("s4_q20_T31", mat({31, 20}), 4),
      shuffle_case("s5_q20_T257", mat({257, 20}), 5, false),
      shuffle_case("s1_copy", mat({3, 6}), 1),
      shuffle_case("s_equals_q", mat({4, 6}), 6),
      shuffle_case("3d_s2", mat({2, 3, 8}), 2),
      shuffle_case("nc_s3_T31", mat({31, 6}, true), 3, false),
      shuffle_case("nc_3d_s4", mat({2, 3, 8}, true), 4),
      shuffle_case("s8_q48_T31", mat({31, 48}), 8, false),
      shuffle_case("s16_q32_T5", mat({5, 32}), 16),
  });
}

TEST_CASE("split_mix: the spec's worked example", "[split_mix][family:split_mix]") {
  // [a0 a1 a2 a3 | b0 b1 b2 b3] -> [a0 b0 a1 b1 a2 b2 a3 b3], a_i = i, b_i = 4 + i.
  const Tensor y = arange(8);
  const std::vector<double> shuffled = {0, 4, 1, 5, 2, 6, 3, 7};
  // x = [10 11 | 12 13], g = 2: [x^1, z^1, x^2, z^2].
  const Tensor x = from_vector<float>({10, 11, 12, 13});
  const std::vector<double> mixed = {10, 11, 0, 4, 1, 5, 12, 13, 2, 6, 3, 7};
  const std::vector<double> mixed_unshuffled = {10, 11, 0, 1, 2, 3, 12, 13, 4, 5, 6, 7};
  REQUIRE(kernels::register_devices().emu);
  for (Device d : {Device::cpu(), Device::emu()}) {
    for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
      kernels::CpuBackendGuard guard(backend);
      INFO("device " << d.str() << ", backend " << static_cast<int>(backend));
      const Tensor yd = copy_to_device(y, d), xd = copy_to_device(x, d);
      CHECK(values(channel_shuffle(yd, 2)) == shuffled);
      CHECK(values(split_mix(xd, yd, 2, 2)) == mixed);
      CHECK(values(split_mix(xd, yd, 2, 0)) == mixed_unshuffled);
      CHECK(values(split_mix(xd, yd, 1, 0)) == std::vector<double>{10, 11, 12, 13, 0, 1, 2, 3, 4, 5, 6, 7});
      // The inverse of a shuffle with s groups is the shuffle with q / s groups.
      CHECK(values(channel_shuffle(channel_shuffle(yd, 2), 4)) == values(y));
    }
  }
  CHECK(values(shuffle_by_generic_ops(y, 2)) == shuffled);
  CHECK(values(mix_by_generic_ops(x, y, 2, 2)) == mixed);
}

TEST_CASE("split_mix: equals chunk + interleaved concat (+ reshape/transpose shuffle), forward and backward",
          "[split_mix][family:split_mix]") {
  REQUIRE(kernels::register_devices().emu);
  struct Shape4 {
    Shape lead;
    std::int64_t p, q, g, s;
  };
  const std::vector<Shape4> shapes = {
      {{1}, 3, 5, 1, 0},   {{31}, 3, 5, 1, 5},  {{31}, 6, 10, 2, 0},  {{31}, 6, 10, 2, 2},
      {{257}, 12, 20, 4, 0}, {{257}, 12, 20, 4, 2}, {{257}, 12, 20, 4, 4}, {{2, 7}, 12, 20, 4, 5},
      {{4}, 24, 40, 8, 8}, {{3}, 0, 8, 1, 2},   {{3}, 8, 0, 2, 0},    {{31}, 6, 20, 2, 2},
      {{9}, 12, 48, 4, 4}, {{5}, 6, 48, 2, 8},  {{3}, 3, 48, 1, 16},  {{2, 3}, 6, 16, 2, 4},
  };
  for (const Shape4& sh : shapes) {
    Shape xs = sh.lead, ys = sh.lead;
    xs.push_back(sh.p);
    ys.push_back(sh.q);
    Shape os = sh.lead;
    os.push_back(sh.p + sh.q);
    for (DType dtype : {DType::Float32, DType::Float64}) {
      for (Device d : {Device::cpu(), Device::emu()}) {
        INFO("x " << shape_str(xs) << ", y " << shape_str(ys) << ", g " << sh.g << ", s " << sh.s << ", "
                  << dtype_name(dtype) << " on " << d.str());
        Generator gen(11);
        Tensor x = copy_to_device(rand_uniform(xs, -1, 1, {dtype}, gen), d);
        Tensor y = copy_to_device(rand_uniform(ys, -1, 1, {dtype}, gen), d);
        const Tensor up = copy_to_device(rand_uniform(os, -1, 1, {dtype}, gen), d);
        x.set_requires_grad();
        y.set_requires_grad();
        const Tensor fused = split_mix(x, y, sh.g, sh.s);
        const std::vector<Tensor> fused_grads = grad(fused, {x, y}, up);
        const Tensor generic = mix_by_generic_ops(x, y, sh.g, sh.s);
        const std::vector<Tensor> generic_grads = grad(generic, {x, y}, up);
        CHECK(fused.shape() == os);
        CHECK(bytes_of(fused) == bytes_of(generic));
        CHECK(bytes_of(fused_grads[0]) == bytes_of(generic_grads[0]));
        CHECK(bytes_of(fused_grads[1]) == bytes_of(generic_grads[1]));
      }
    }
  }
}

TEST_CASE("split_mix: integer dtypes on every backend", "[split_mix][family:split_mix]") {
  REQUIRE(kernels::register_devices().emu);
  for (DType dtype : {DType::Int32, DType::Int64}) {
    INFO(dtype_name(dtype));
    const Tensor x = rand_int({9, 12}, 1000, {.dtype = dtype}), y = rand_int({9, 20}, 1000, {.dtype = dtype});
    Tensor ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = kernels::split_mix(x, y, 4, 5);
    }
    CHECK(bytes_of(kernels::split_mix(x, y, 4, 5)) == bytes_of(ref));
    CHECK(bytes_of(kernels::split_mix(copy_to_device(x, Device::emu()), copy_to_device(y, Device::emu()), 4, 5)) ==
          bytes_of(ref));
    const kernels::SplitMixGrads back = kernels::split_mix_backward(ref, 12, 4, 5);
    CHECK(bytes_of(back.grad_x) == bytes_of(x));
    CHECK(bytes_of(back.grad_y) == bytes_of(y));
  }
}

TEST_CASE("split_mix: empty inputs", "[split_mix][family:split_mix]") {
  CHECK(split_mix(zeros({0, 4}), zeros({0, 8}), 2, 2).shape() == Shape{0, 12});
  CHECK(split_mix(zeros({3, 0}), zeros({3, 0}), 4, 0).shape() == Shape{3, 0});
  CHECK(channel_shuffle(zeros({2, 0, 6}), 3).shape() == Shape{2, 0, 6});
  Tensor x = zeros({0, 4});
  x.set_requires_grad();
  Tensor y = split_mix(x, zeros({0, 8}), 2, 2);
  backward(y, zeros({0, 12}));
  CHECK(x.grad().shape() == Shape{0, 4});
}

TEST_CASE("split_mix: bad input raises named errors", "[split_mix][family:split_mix]") {
  using Catch::Contains;
  const Tensor x = ones({2, 30}), y = ones({2, 8});
  REQUIRE_THROWS_WITH(split_mix(x, y, 4), Contains("split_mix: width 30 of x is not divisible by 4 groups"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({2, 6}), 4),
                      Contains("split_mix: width 6 of y is not divisible by 4 groups"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({2, 12}), 4, 8),
                      Contains("split_mix: width 12 of y is not divisible by 8 shuffle groups"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({3, 8}), 4),
                      Contains("split_mix: leading dims of x [2,8] and y [3,8] do not match"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 3, 8}), ones({6, 8}), 4),
                      Contains("split_mix: leading dims of x [2,3,8] and y [6,8] do not match"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({2, 8}, {.dtype = DType::Float64}), 4),
                      Contains("split_mix: dtypes float32 and float64 do not match"));
  REQUIRE(kernels::register_devices().emu);
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({2, 8}, {.device = Device::emu()}), 4),
                      Contains("split_mix: tensors on cpu and emu:0"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({2, 8}), 0), Contains("split_mix: groups must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(split_mix(ones({2, 8}), ones({2, 8}), 2, -1), Contains("split_mix: shuffle_groups must be"));
  REQUIRE_THROWS_WITH(split_mix(scalar_tensor(1), ones({2, 8}), 1),
                      Contains("split_mix: x must have at least 1 dim (the feature dim), got a 0-d tensor"));
  REQUIRE_THROWS_WITH(channel_shuffle(ones({2, 10}), 4),
                      Contains("channel_shuffle: width 10 of y is not divisible by 4 shuffle groups"));
  REQUIRE_THROWS_WITH(channel_shuffle(ones({2, 8}), 0), Contains("channel_shuffle: shuffle_groups must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(kernels::split_mix_backward(ones({2, 8}), 9, 1, 0),
                      Contains("split_mix_backward: x width 9 does not fit in grad_out [2,8]"));
}
