// relative_attention (the fused Transformer-XL family, kernels/rel_attention.h): harness cases in
// every mode (memory Tq < Tk and none Tq == Tk, windows, dropout, odd sizes, non-contiguous
// inputs, rows long enough for the CUDA block-per-row path), an independent float64 evaluation of
// the header's formula by plain loops (against the reference, CPU and emulated-CUDA paths), an
// empty query or batch, equivalence with the composite of generic ops it replaces
// (bench/rel_attention_composite.h; dropout mask included), the Philox contract of the dropout
// mask, the generator offsets it draws, partial gradient requests, and named errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "bench/rel_attention_composite.h"
#include "core/philox.h"
#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/devices.h"
#include "kernels/dropout.h"
#include "kernels/rel_attention.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;
using Catch::Contains;

namespace {

using V = const std::vector<Tensor>&;

InputSpec spec(Shape shape, bool non_contiguous = false) {
  InputSpec s;
  s.shape = std::move(shape);
  s.non_contiguous = non_contiguous;
  return s;
}

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv], r [H, Tk, d], u and w [H, d].
std::vector<InputSpec> inputs(std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk, std::int64_t d,
                              std::int64_t dv, bool non_contiguous = false) {
  return {spec({b, h, tq, d}, non_contiguous), spec({b, h, tk, d}, non_contiguous),
          spec({b, h, tk, dv}, non_contiguous), spec({h, tk, d}, non_contiguous),
          spec({h, d}, non_contiguous),         spec({h, d}, non_contiguous)};
}

struct Setup {
  std::int64_t window = 0;
  double dropout = 0.0;
  double scale = 0.0;
  std::uint64_t seed = 11;
};

// Each evaluation builds a fresh generator, so finite differences see the same dropout mask.
Tensor rel_attend(V in, const Setup& s) {
  Generator gen(s.seed);
  return relative_attention(in[0], in[1], in[2], in[3], in[4], in[5],
                            {.window = s.window, .scale = s.scale, .dropout = s.dropout, .generator = &gen});
}

OpCase rel_case(std::string name, std::vector<InputSpec> in, Setup setup, bool gradcheck = true) {
  OpCase c{.name = "rel_attention/" + std::move(name), .inputs = std::move(in),
           .forward = [setup](V x) { return rel_attend(x, setup); }};
  c.gradcheck = gradcheck;
  return c;
}

using define::test::values;

struct Inputs {
  Tensor q, k, v, r, u, w;
  std::vector<Tensor> all() const { return {q, k, v, r, u, w}; }
};

Inputs random_inputs(std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk, std::int64_t d, std::int64_t dv,
                     std::uint64_t seed, bool requires_grad) {
  const TensorOptions f64{.dtype = DType::Float64};
  Generator g(seed);
  Inputs in{rand_normal({b, h, tq, d}, 0, 1, f64, g), rand_normal({b, h, tk, d}, 0, 1, f64, g),
            rand_normal({b, h, tk, dv}, 0, 1, f64, g), rand_normal({h, tk, d}, 0, 1, f64, g),
            rand_normal({h, d}, 0, 1, f64, g),         rand_normal({h, d}, 0, 1, f64, g)};
  if (requires_grad)
    for (Tensor* t : {&in.q, &in.k, &in.v, &in.r, &in.u, &in.w}) t->set_requires_grad();
  return in;
}

// The header's formula (autograd/rel_attention.h) by plain loops in double, straight from the
// inputs: no kernel, no GEMM, no shift trick. Dropout: element e of [B, H, Tq, Tk] is kept iff
// u32_to_unit_float(random_u32(seed, offset, e)) >= p, kept ones scaled by 1 / (1 - p).
std::vector<double> rel_attention_by_formula(const Inputs& in, std::int64_t window, double scale, double p,
                                             std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t nb = in.q.size(0), nh = in.q.size(1), tq = in.q.size(2), d = in.q.size(3);
  const std::int64_t tk = in.k.size(2), dv = in.v.size(3), mem = tk - tq;
  const auto q = values(in.q), k = values(in.k), v = values(in.v), r = values(in.r), u = values(in.u),
             w = values(in.w);
  const auto at = [](const std::vector<double>& x, std::int64_t i) { return x[static_cast<std::size_t>(i)]; };
  std::vector<double> out(static_cast<std::size_t>(nb * nh * tq * dv), 0.0);
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t h = 0; h < nh; ++h)
      for (std::int64_t i = 0; i < tq; ++i) {
        std::vector<double> s(static_cast<std::size_t>(tk), 0.0);
        std::vector<bool> visible(static_cast<std::size_t>(tk));
        double max = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < tk; ++j) {
          const std::int64_t dist = i + mem - j;
          visible[static_cast<std::size_t>(j)] = dist >= 0 && (window == 0 || dist < window);
          if (!visible[static_cast<std::size_t>(j)]) continue;
          double content = 0, position = 0;
          for (std::int64_t c = 0; c < d; ++c) {
            const double qc = at(q, ((b * nh + h) * tq + i) * d + c);
            content += (qc + at(u, h * d + c)) * at(k, ((b * nh + h) * tk + j) * d + c);
            position += (qc + at(w, h * d + c)) * at(r, (h * tk + (tk - 1 - dist)) * d + c);
          }
          s[static_cast<std::size_t>(j)] = scale * (content + position);
          max = std::max(max, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (std::int64_t j = 0; j < tk; ++j)
          if (visible[static_cast<std::size_t>(j)]) sum += std::exp(s[static_cast<std::size_t>(j)] - max);
        for (std::int64_t j = 0; j < tk; ++j) {
          if (!visible[static_cast<std::size_t>(j)]) continue;
          double prob = std::exp(s[static_cast<std::size_t>(j)] - max) / sum;
          if (p > 0) {
            const auto e = static_cast<std::uint64_t>(((b * nh + h) * tq + i) * tk + j);
            prob = philox::u32_to_unit_float(philox::random_u32(seed, offset, e)) >= p ? prob / (1 - p) : 0.0;
          }
          for (std::int64_t c = 0; c < dv; ++c)
            out[static_cast<std::size_t>(((b * nh + h) * tq + i) * dv + c)] +=
                prob * at(v, ((b * nh + h) * tk + j) * dv + c);
        }
      }
  return out;
}

}  // namespace

TEST_CASE("ops: rel_attention", "[ops][harness][rel_attention][family:rel_attention]") {
  define::test::run_op_cases({
      rel_case("B1_H1_T1_d1", inputs(1, 1, 1, 1, 1, 1), {}),
      rel_case("memory_B2_H3_Tq4_Tk7_d5_dv3", inputs(2, 3, 4, 7, 5, 3), {}),
      rel_case("no_memory_T6", inputs(2, 2, 6, 6, 3, 2), {}),
      rel_case("scale_0.7_Tq3_Tk5", inputs(1, 2, 3, 5, 4, 2), {.scale = 0.7}),
      rel_case("window3_Tq5_Tk9", inputs(2, 2, 5, 9, 3, 2), {.window = 3}),
      // A window of 1 leaves only the key at distance 0: P is one-hot.
      rel_case("window1_Tq3_Tk6", inputs(1, 2, 3, 6, 2, 2), {.window = 1}),
      rel_case("window_past_Tk", inputs(1, 1, 4, 6, 3, 2), {.window = 50}),
      rel_case("non_contiguous_window4", inputs(2, 2, 5, 8, 4, 3, true), {.window = 4}),
  });
}

// Odd sizes for the row kernels (partial warps and blocks; rows past the warp limit, where the
// CUDA path switches to a block per row), and dropout: the same mask on every backend.
TEST_CASE("ops: rel_attention odd sizes and long rows", "[ops][harness][rel_attention][family:rel_attention]") {
  define::test::run_op_cases({
      rel_case("Tq31_Tk33_d33", inputs(1, 1, 31, 33, 33, 2), {}, false),
      rel_case("Tq33_Tk33_window17", inputs(2, 1, 33, 33, 5, 3), {.window = 17}, false),
      rel_case("Tq2_Tk257", inputs(1, 2, 2, 257, 3, 2), {}, true),
      rel_case("Tq9_Tk257_window100", inputs(2, 2, 9, 257, 8, 5), {.window = 100}, false),
      rel_case("Tq3_Tk1031_block_rows", inputs(2, 1, 3, 1031, 4, 3), {}, false),
      rel_case("Tq5_Tk1100_window1050_block_rows", inputs(1, 1, 5, 1100, 4, 2), {.window = 1050}, false),
      rel_case("non_contiguous_Tk33", inputs(2, 3, 7, 33, 6, 5, true), {.window = 20}, false),
  });
}

TEST_CASE("ops: rel_attention dropout", "[ops][harness][rel_attention][family:rel_attention]") {
  define::test::run_op_cases({
      rel_case("dropout0.3", inputs(1, 2, 3, 5, 4, 3), {.dropout = 0.3}),
      rel_case("dropout0.5_window2", inputs(2, 1, 4, 7, 3, 2), {.window = 2, .dropout = 0.5}),
      rel_case("dropout1_all_dropped", inputs(1, 1, 2, 3, 2, 2), {.dropout = 1.0}),
      rel_case("dropout0.2_T33", inputs(2, 2, 33, 33, 8, 4), {.dropout = 0.2, .seed = 5}, false),
      rel_case("dropout0.1_Tk257_non_contiguous", inputs(1, 3, 5, 257, 4, 3, true), {.dropout = 0.1}, false),
      rel_case("dropout0.4_Tk1031_block_rows", inputs(2, 1, 3, 1031, 4, 2), {.window = 900, .dropout = 0.4}, false),
  });
}

TEST_CASE("rel_attention: equals the header's formula evaluated by plain loops",
          "[ops][rel_attention][family:rel_attention]") {
  REQUIRE(kernels::register_devices().emu);
  struct Config {
    std::int64_t b, h, tq, tk, d, dv, window;
    double scale, p;
  };
  for (const Config& c : {Config{2, 3, 4, 9, 5, 3, 0, 0.0, 0.0}, Config{1, 2, 6, 6, 4, 2, 0, 0.3, 0.0},
                         Config{2, 2, 5, 12, 3, 4, 4, 0.0, 0.0}, Config{3, 1, 7, 10, 6, 2, 5, 0.0, 0.35},
                         Config{1, 2, 3, 40, 2, 3, 0, 1.3, 0.2}}) {
    const Inputs in = random_inputs(c.b, c.h, c.tq, c.tk, c.d, c.dv, 21, false);
    const std::uint64_t seed = 99;
    Generator twin(seed);  // the offset the op will reserve from a fresh Generator(seed)
    const std::uint64_t offset = c.p > 0 ? twin.reserve(static_cast<std::uint64_t>(c.b * c.h * c.tq * c.tk)) : 0;
    const double scale = c.scale != 0 ? c.scale : 1 / std::sqrt(double(c.d));
    const std::vector<double> expected = rel_attention_by_formula(in, c.window, scale, c.p, seed, offset);
    // The reference and fast CPU paths, and the CUDA kernels on the emulated device.
    for (const char* path : {"ref", "cpu", "emu"}) {
      kernels::CpuBackendGuard guard(path[0] == 'r' ? kernels::Backend::Ref : kernels::Backend::Cpu);
      const Device device = path[0] == 'e' ? Device::emu() : Device::cpu();
      std::vector<Tensor> x;
      for (const Tensor& t : in.all()) x.push_back(to_device(t, device));
      Generator g(seed);
      const std::vector<double> got = values(relative_attention(
          x[0], x[1], x[2], x[3], x[4], x[5], {.window = c.window, .scale = c.scale, .dropout = c.p, .generator = &g}));
      INFO("B" << c.b << " H" << c.h << " Tq" << c.tq << " Tk" << c.tk << " window " << c.window << " p " << c.p
               << " on " << path);
      REQUIRE(got.size() == expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-12));
    }
  }
}

TEST_CASE("rel_attention: fused op equals the composite of generic ops, dropout mask included",
          "[ops][rel_attention][family:rel_attention]") {
  for (const std::int64_t window : {std::int64_t{0}, std::int64_t{4}}) {
    for (const double p : {0.0, 0.25}) {
      for (const std::int64_t tq : {std::int64_t{6}, std::int64_t{9}}) {  // memory of 3, and none
        const std::int64_t tk = 9, d = 5;
        const Inputs in = random_inputs(3, 2, tq, tk, d, 4, 3, true);
        Generator data(4);
        const Tensor up = rand_normal({3, 2, tq, 4}, 0, 1, {.dtype = DType::Float64}, data);
        Generator g1(77), g2(77);
        const Tensor fused =
            relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, {.window = window, .dropout = p, .generator = &g1});
        const Tensor generic = bench::rel_attention_by_generic_ops(
            in.q, in.k, in.v, in.r, in.u, in.w, bench::rel_attention_hidden_keys(tq, tk, window),
            1 / std::sqrt(double(d)), p, g2);
        INFO("window " << window << ", dropout " << p << ", Tq " << tq);
        CHECK(g1.state().offset == g2.state().offset);  // the same words drawn from the stream
        const auto a = values(fused), b = values(generic);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-13));
        const std::vector<Tensor> ga = grad(fused, in.all(), up), gb = grad(generic, in.all(), up);
        const char* names[] = {"q", "k", "v", "r", "u", "w"};
        for (std::size_t t = 0; t < 6; ++t) {
          INFO("grad " << names[t]);
          const auto x = values(ga[t]), y = values(gb[t]);
          REQUIRE(x.size() == y.size());
          for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).margin(1e-12));
        }
      }
    }
  }
}

// An op whose inputs only partly require grad computes only those gradients (the backward reads
// BackwardArgs::needs), with the values of the full computation.
TEST_CASE("rel_attention: partial gradient requests", "[ops][rel_attention][family:rel_attention]") {
  const Inputs in = random_inputs(2, 2, 4, 7, 3, 2, 8, true);
  const auto run = [](const std::vector<Tensor>& x) {
    Generator g(3);
    return relative_attention(x[0], x[1], x[2], x[3], x[4], x[5], {.window = 3, .dropout = 0.2, .generator = &g});
  };
  const std::vector<Tensor> full = grad(sum(run(in.all())), in.all());
  const std::vector<std::vector<std::size_t>> subsets{{0}, {1}, {2}, {3}, {4}, {5}, {3, 5}, {0, 4}, {1, 2}};
  for (const std::vector<std::size_t>& subset : subsets) {
    std::vector<Tensor> x;  // the same values; only the inputs of the subset require grad
    for (const Tensor& t : in.all()) x.push_back(detach(t));
    std::vector<Tensor> wrt;
    for (std::size_t t : subset) wrt.push_back(x[t].set_requires_grad());
    const std::vector<Tensor> g = grad(sum(run(x)), wrt);
    for (std::size_t i = 0; i < subset.size(); ++i) {
      INFO("input " << subset[i] << " of a subset of " << subset.size());
      CHECK(values(g[i]) == values(full[subset[i]]));
    }
  }
}

// The dropped probabilities are exactly dropout_apply(P, p, seed, offset): the contract of
// kernels/dropout.h on the [B, H, Tq, Tk] tensor, on the reference and the fast path alike.
TEST_CASE("rel_attention: dropout follows the dropout family's Philox contract",
          "[ops][rel_attention][family:rel_attention]") {
  Generator data(8);
  const Tensor ac = rand_uniform({2, 3, 5, 37}, -2, 2, {}, data), bd = rand_uniform({2, 3, 5, 37}, -2, 2, {}, data);
  const kernels::RelAttentionParams params{.window = 20, .scale = 0.8, .dropout = 0.3, .seed = 0x1234567890ull,
                                           .offset = 40};
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    const kernels::AttentionProbs r = kernels::rel_attention_softmax(ac, bd, params);
    CHECK(values(r.dropped) == values(kernels::dropout_apply(r.probs, params.dropout, params.seed, params.offset)));
  }
}

TEST_CASE("rel_attention: dropout draws B*H*Tq*Tk words, only while training",
          "[ops][rel_attention][family:rel_attention]") {
  const Tensor q = rand_uniform({2, 3, 5, 4}, -1, 1), k = rand_uniform({2, 3, 7, 4}, -1, 1);
  const Tensor v = rand_uniform({2, 3, 7, 2}, -1, 1), r = rand_uniform({3, 7, 4}, -1, 1);
  const Tensor u = rand_uniform({3, 4}, -1, 1), w = rand_uniform({3, 4}, -1, 1);
  Generator gen(1);
  relative_attention(q, k, v, r, u, w, {.dropout = 0.1, .generator = &gen});
  CHECK(gen.state().offset == 2 * 3 * 5 * 7 + 2);  // 210 words, rounded up to whole Philox blocks
  const Tensor eval = relative_attention(q, k, v, r, u, w, {.dropout = 0.1, .training = false, .generator = &gen});
  CHECK(gen.state().offset == 212);
  CHECK(values(eval) == values(relative_attention(q, k, v, r, u, w)));
}

TEST_CASE("rel_attention: errors name the operands", "[ops][rel_attention][family:rel_attention]") {
  const Tensor q = zeros({2, 3, 4, 5}), k = zeros({2, 3, 6, 5}), v = zeros({2, 3, 6, 7});
  const Tensor r = zeros({3, 6, 5}), u = zeros({3, 5}), w = zeros({3, 5});
  CHECK_THROWS_WITH(relative_attention(q, k, v, zeros({3, 5, 5}), u, w),
                    Contains("shapes do not match") && Contains("r [3,5,5] [H, Tk, d]"));
  CHECK_THROWS_WITH(relative_attention(q, k, v, r, zeros({2, 5}), w), Contains("u [2,5] and w [3,5] [H, d]"));
  CHECK_THROWS_WITH(relative_attention(q, k, zeros({2, 3, 5, 7}), r, u, w), Contains("v [2,3,5,7]"));
  CHECK_THROWS_WITH(relative_attention(q, k, v, r, zeros({15}), w), Contains("ranks do not match"));
  CHECK_THROWS_WITH(relative_attention(zeros({2, 3, 8, 5}), k, v, r, u, w),
                    Contains("k [2,3,6,5] has fewer keys than q [2,3,8,5] has queries"));
  CHECK_THROWS_WITH(relative_attention(q, k, v, r, u, w, {.window = -1}), Contains("window -1 is negative"));
  CHECK_THROWS_WITH(relative_attention(q, k, v, r, u, w, {.dropout = 1.5}), Contains("dropout 1.5 is outside"));
  CHECK_THROWS_WITH(relative_attention(q, k, v, r, u, zeros({3, 5}, {.dtype = DType::Float64})), Contains("dtypes"));
}

// Tq == 0 (memory only) and B == 0: empty outputs, and the gradients of what has elements are zero.
TEST_CASE("rel_attention: no queries or no batch", "[ops][rel_attention][family:rel_attention]") {
  for (const auto& [b, tq] : {std::pair<std::int64_t, std::int64_t>{2, 0}, {0, 3}}) {
    const Inputs in = random_inputs(b, 2, tq, 5, 3, 4, 1, true);
    const Tensor y = relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, {.dropout = 0.2});
    CHECK(y.shape() == Shape{b, 2, tq, 4});
    const std::vector<Tensor> g = grad(sum(y), in.all());
    const std::vector<Tensor> all = in.all();
    for (std::size_t t = 0; t < 6; ++t) {
      CHECK(g[t].shape() == all[t].shape());
      for (double x : values(g[t])) CHECK(x == 0.0);
    }
  }
}
