// scaled_dot_product_attention (the fused attention family, kernels/attention.h): harness cases in
// every mode (odd sizes, causal with Tq != Tk, padding with fully masked rows, non-contiguous
// q/k/v, dropout, rows long enough for the CUDA block-per-row path), equivalence with the
// composite of generic ops it replaces (dropout mask included), the Philox contract of the
// dropout mask, the generator offsets it draws, and named errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/attention.h"
#include "kernels/backend.h"
#include "kernels/dropout.h"

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

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv].
std::vector<InputSpec> qkv(std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk, std::int64_t d,
                           std::int64_t dv, bool non_contiguous = false) {
  return {spec({b, h, tq, d}, non_contiguous), spec({b, h, tk, d}, non_contiguous),
          spec({b, h, tk, dv}, non_contiguous)};
}

// A [B, Tk] int32 padding mask: mask[b][j] = pattern(b, j).
Tensor padding(std::int64_t b, std::int64_t tk, const std::function<bool(std::int64_t, std::int64_t)>& pattern) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(b * tk));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < tk; ++j) m[static_cast<std::size_t>(i * tk + j)] = pattern(i, j) ? 1 : 0;
  return from_vector(m, Shape{b, tk});
}

// Batch 0 pads every third key from key 1, batch 1 pads all keys (a fully masked row), further
// batches pad their last b keys.
Tensor mixed_padding(std::int64_t b, std::int64_t tk) {
  return padding(b, tk, [tk](std::int64_t i, std::int64_t j) {
    if (i == 0) return j % 3 == 1;
    if (i == 1) return true;
    return j >= tk - i;
  });
}

struct Setup {
  Tensor pad{};
  bool causal = false;
  double dropout = 0.0;
  double scale = 0.0;
  std::uint64_t seed = 11;
};

// Each evaluation builds a fresh generator, so finite differences see the same dropout mask.
Tensor attend(V in, const Setup& s) {
  Generator gen(s.seed);
  AttentionOptions o{.key_padding_mask = s.pad, .causal = s.causal, .scale = s.scale, .dropout = s.dropout,
                     .generator = &gen};
  return scaled_dot_product_attention(in[0], in[1], in[2], o);
}

OpCase attention_case(std::string name, std::vector<InputSpec> inputs, Setup setup, bool gradcheck = true) {
  OpCase c{.name = "attention/" + std::move(name), .inputs = std::move(inputs),
           .forward = [setup](V in) { return attend(in, setup); }};
  c.gradcheck = gradcheck;
  return c;
}

using define::test::values;

// What the fused op replaces, in generic differentiable ops: scores = scale * q k^T, masked_fill
// with the lowest finite value (a fully masked row stays finite), softmax, masked_fill 0, dropout,
// matmul with v.
Tensor attention_by_generic_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad, bool causal,
                                double p, Generator& gen) {
  const std::int64_t tq = q.size(2), tk = k.size(2);
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), 1.0 / std::sqrt(double(q.size(3))));
  std::vector<Tensor> masks;
  if (pad.defined()) masks.push_back(reshape(pad, {pad.size(0), 1, 1, tk}));
  if (causal) masks.push_back(padding(tq, tk, [tq, tk](std::int64_t i, std::int64_t j) { return j > i + (tk - tq); }));
  for (const Tensor& m : masks) scores = masked_fill(scores, m, -1e300);
  Tensor probs = softmax(scores, -1);
  for (const Tensor& m : masks) probs = masked_fill(probs, m, 0.0);
  return matmul(dropout(contiguous(probs), p, true, gen), v);
}

}  // namespace

TEST_CASE("ops: attention", "[ops][harness][attention][family:attention]") {
  define::test::run_op_cases({
      attention_case("B1_H1_T1_d1", qkv(1, 1, 1, 1, 1, 1), {}),
      attention_case("B2_H3_Tq5_Tk7_d4_dv3", qkv(2, 3, 5, 7, 4, 3), {}),
      attention_case("scale_0.7", qkv(1, 2, 3, 4, 5, 2), {.scale = 0.7}),
      attention_case("causal_T6", qkv(1, 2, 6, 6, 3, 2), {.causal = true}),
      attention_case("causal_Tq3_Tk7", qkv(2, 1, 3, 7, 4, 3), {.causal = true}),
      // Tq > Tk: the first Tq - Tk queries see no key at all and give zeros.
      attention_case("causal_Tq7_Tk3", qkv(1, 2, 7, 3, 2, 2), {.causal = true}),
      attention_case("padding_fully_masked_row", qkv(3, 2, 4, 5, 3, 2), {.pad = mixed_padding(3, 5)}),
      attention_case("padding_and_causal_Tq4_Tk6", qkv(3, 1, 4, 6, 3, 3), {.pad = mixed_padding(3, 6), .causal = true}),
      attention_case("non_contiguous", qkv(2, 2, 3, 5, 4, 3, true), {.pad = mixed_padding(2, 5), .causal = true}),
  });
}

// Odd sizes for the row kernels (partial warps and blocks, rows just past the warp limit where the
// CUDA path switches to a block per row), and dropout: the same mask on every backend.
TEST_CASE("ops: attention odd sizes and long rows", "[ops][harness][attention][family:attention]") {
  define::test::run_op_cases({
      attention_case("T31_d33", qkv(1, 1, 31, 31, 33, 2), {.causal = true}, false),
      attention_case("Tq33_Tk31_padded", qkv(2, 1, 33, 31, 5, 3), {.pad = mixed_padding(2, 31)}, false),
      attention_case("Tq2_Tk257", qkv(1, 2, 2, 257, 3, 2), {}, true),
      attention_case("Tq9_Tk257_causal_padded", qkv(3, 2, 9, 257, 8, 5), {.pad = mixed_padding(3, 257), .causal = true},
                     false),
      attention_case("Tq3_Tk1031_block_rows", qkv(2, 1, 3, 1031, 4, 3), {.pad = mixed_padding(2, 1031)}, false),
      attention_case("Tq5_Tk1100_causal_block_rows", qkv(1, 1, 5, 1100, 4, 2), {.causal = true}, false),
      attention_case("non_contiguous_Tk33", qkv(2, 3, 7, 33, 6, 5, true), {.pad = mixed_padding(2, 33)}, false),
  });
}

TEST_CASE("ops: attention dropout", "[ops][harness][attention][family:attention]") {
  define::test::run_op_cases({
      attention_case("dropout0.3", qkv(1, 2, 3, 5, 4, 3), {.dropout = 0.3}),
      attention_case("dropout0.5_padded_causal", qkv(3, 1, 4, 6, 3, 2),
                     {.pad = mixed_padding(3, 6), .causal = true, .dropout = 0.5}),
      attention_case("dropout1_all_dropped", qkv(1, 1, 2, 3, 2, 2), {.dropout = 1.0}),
      attention_case("dropout0.2_T33", qkv(2, 2, 33, 33, 8, 4), {.causal = true, .dropout = 0.2, .seed = 5}, false),
      attention_case("dropout0.1_Tk257_non_contiguous", qkv(1, 3, 5, 257, 4, 3, true),
                     {.pad = mixed_padding(1, 257), .dropout = 0.1}, false),
      attention_case("dropout0.4_Tk1031_block_rows", qkv(2, 1, 3, 1031, 4, 2),
                     {.pad = mixed_padding(2, 1031), .causal = true, .dropout = 0.4}, false),
  });
}

TEST_CASE("attention: fused op equals the composite of generic ops, dropout mask included",
          "[ops][attention][family:attention]") {
  const TensorOptions f64{.dtype = DType::Float64};
  for (const bool causal : {false, true}) {
    for (const double p : {0.0, 0.25}) {
      Generator data(3);
      Tensor q = rand_normal({3, 2, 6, 5}, 0, 1, f64, data).set_requires_grad();
      Tensor k = rand_normal({3, 2, 9, 5}, 0, 1, f64, data).set_requires_grad();
      Tensor v = rand_normal({3, 2, 9, 4}, 0, 1, f64, data).set_requires_grad();
      const Tensor up = rand_normal({3, 2, 6, 4}, 0, 1, f64, data);
      const Tensor pad = mixed_padding(3, 9);
      Generator g1(77), g2(77);
      const Tensor fused = scaled_dot_product_attention(
          q, k, v, {.key_padding_mask = pad, .causal = causal, .dropout = p, .generator = &g1});
      const Tensor generic = attention_by_generic_ops(q, k, v, pad, causal, p, g2);
      INFO("causal " << causal << ", dropout " << p);
      CHECK(g1.state().offset == g2.state().offset);  // the same words drawn from the stream
      const auto a = values(fused), b = values(generic);
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-13));
      const std::vector<Tensor> ga = grad(fused, {q, k, v}, up), gb = grad(generic, {q, k, v}, up);
      for (std::size_t t = 0; t < 3; ++t) {
        const auto x = values(ga[t]), y = values(gb[t]);
        for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).margin(1e-12));
      }
    }
  }
}

// The dropped probabilities are exactly dropout_apply(P, p, seed, offset): the contract of
// kernels/dropout.h on the [B, H, Tq, Tk] tensor, on the reference and the fast path alike.
TEST_CASE("attention: dropout follows the dropout family's Philox contract", "[ops][attention][family:attention]") {
  Generator data(8);
  const Tensor scores = rand_uniform({2, 3, 5, 37}, -2, 2, {}, data);
  const kernels::AttentionMasking m{.key_padding_mask = mixed_padding(2, 37), .causal = true, .dropout = 0.3,
                                    .seed = 0x1234567890ull, .offset = 40};
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    const kernels::AttentionProbs r = kernels::attention_softmax(scores, m);
    const Tensor expected = kernels::dropout_apply(r.probs, m.dropout, m.seed, m.offset);
    CHECK(values(r.dropped) == values(expected));
    // The backward kernel rebuilds the same D from P.
    const kernels::AttentionSoftmaxGrad g = kernels::attention_softmax_backward(r.probs, ones_like(r.probs), m, 1.0);
    CHECK(values(g.dropped) == values(expected));
  }
}

TEST_CASE("attention: dropout draws B*H*Tq*Tk words, only while training", "[ops][attention][family:attention]") {
  const Tensor q = rand_uniform({2, 3, 5, 4}, -1, 1), k = rand_uniform({2, 3, 7, 4}, -1, 1);
  const Tensor v = rand_uniform({2, 3, 7, 2}, -1, 1);
  Generator gen(1);
  scaled_dot_product_attention(q, k, v, {.key_padding_mask = {}, .dropout = 0.1, .generator = &gen});
  CHECK(gen.state().offset == 2 * 3 * 5 * 7 + 2);  // 210 words, rounded up to whole Philox blocks
  const Tensor eval = scaled_dot_product_attention(
      q, k, v, {.key_padding_mask = {}, .dropout = 0.1, .training = false, .generator = &gen});
  CHECK(gen.state().offset == 212);
  CHECK(values(eval) == values(scaled_dot_product_attention(q, k, v)));
}

TEST_CASE("attention: a fully masked query row gives zeros and no NaN gradient", "[ops][attention][family:attention]") {
  const TensorOptions f64{.dtype = DType::Float64};
  Tensor q = rand_normal({2, 1, 3, 4}, 0, 1, f64).set_requires_grad();
  Tensor k = rand_normal({2, 1, 5, 4}, 0, 1, f64).set_requires_grad();
  Tensor v = rand_normal({2, 1, 5, 3}, 0, 1, f64).set_requires_grad();
  const Tensor pad = padding(2, 5, [](std::int64_t b, std::int64_t) { return b == 0; });
  const Tensor y = scaled_dot_product_attention(q, k, v, {.key_padding_mask = pad});
  for (double x : values(select(y, 0, 0))) CHECK(x == 0.0);
  for (double x : values(select(y, 0, 1))) CHECK(x != 0.0);
  const std::vector<Tensor> g = grad(sum(y), {q, k, v});
  for (const Tensor& t : g)
    for (double x : values(select(t, 0, 0))) CHECK(x == 0.0);
}

TEST_CASE("attention: errors name the operands", "[ops][attention][family:attention]") {
  const Tensor q = zeros({2, 3, 4, 5}), k = zeros({2, 3, 6, 5}), v = zeros({2, 3, 6, 7});
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, zeros({2, 3, 6, 4}), v), Contains("shapes do not match"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, zeros({2, 3, 5, 7})), Contains("v [2,3,5,7]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(zeros({3, 4, 5}), k, v), Contains("must all be 4-d"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.key_padding_mask = zeros({2, 5})}),
                    Contains("key_padding_mask [2,5] must be [B, Tk] = [2,6]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.key_padding_mask = {}, .dropout = 1.5}), Contains("dropout 1.5 is outside"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, zeros({2, 3, 6, 7}, {.dtype = DType::Float64})),
                    Contains("dtypes"));
}
