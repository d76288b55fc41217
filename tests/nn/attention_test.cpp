// Attention layers: MultiheadAttention, sinusoidal positions (nn/attention.h) and the Transformer
// encoder / decoder layers (nn/transformer.h). Exact parameter counts (computed here from the
// layer formulas), fairseq's initialisation bounds, the heads checked against a per-head
// computation in generic ops, float64 gradient checks (with dropout, masks, pre- and post-norm),
// the causal and padding masks blocking information bit for bit, the emulated device against the
// CPU, sinusoidal values against the formula, and named errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_close;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::random_leaf;
using define::test::randomise;
using define::test::values;
using define::test::with_parameters;

namespace {

const TensorOptions kF64{.dtype = DType::Float64};

Tensor padding(std::vector<std::int32_t> values, std::int64_t batch) {
  const auto n = static_cast<std::int64_t>(values.size());
  return from_vector(values, Shape{batch, n / batch});
}

// [B, T, E] -> rows t < `until` of every batch, as host doubles.
std::vector<double> prefix(const Tensor& x, std::int64_t until) { return values(narrow(x, 1, 0, until)); }

std::int64_t linear_count(std::int64_t in, std::int64_t out) { return in * out + out; }

}  // namespace

TEST_CASE("attention layers: exact parameter counts and names", "[nn][attention]") {
  Generator gen(1);
  const std::int64_t e = 512, f = 2048;
  const std::int64_t mha = 4 * linear_count(e, e);  // q, k, v, out projections
  CHECK(mha == 1050624);
  const std::int64_t norm = 2 * e;
  const std::int64_t encoder = mha + norm + linear_count(e, f) + linear_count(f, e) + norm;
  const std::int64_t decoder = encoder + mha + norm;
  CHECK(encoder == 3152384);
  CHECK(decoder == 4204032);

  MultiheadAttention attn(512, 8, {}, gen);
  CHECK(attn.num_parameters() == 1050624);
  CHECK(attn.named_parameters().keys() ==
        std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                                 "v_proj.bias", "out_proj.weight", "out_proj.bias"});
  CHECK(MultiheadAttention(512, 8, {.bias = false}, gen).num_parameters() == 4 * 512 * 512);
  CHECK(MultiheadAttention(64, 4, {.kdim = 32, .vdim = 48}, gen).num_parameters() ==
        linear_count(64, 64) + linear_count(32, 64) + linear_count(48, 64) + linear_count(64, 64));

  const TransformerLayerConfig cfg{.d_model = 512, .heads = 8, .ffn_dim = 2048};
  TransformerEncoderLayer enc(cfg, gen);
  CHECK(enc.num_parameters() == 3152384);
  CHECK(enc.named_parameters().keys() ==
        std::vector<std::string>{"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                                 "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias", "self_attn_layer_norm.weight",
                                 "self_attn_layer_norm.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                 "final_layer_norm.weight", "final_layer_norm.bias"});
  TransformerDecoderLayer dec(cfg, gen);
  CHECK(dec.num_parameters() == 4204032);
  CHECK(dec.has_parameter("encoder_attn.k_proj.weight"));
  CHECK(dec.has_parameter("encoder_attn_layer_norm.bias"));
  // Cross-attention over a narrower encoder: its k and v projections read 256 wide.
  TransformerLayerConfig narrow_enc = cfg;
  narrow_enc.encoder_dim = 256;
  CHECK(TransformerDecoderLayer(narrow_enc, gen).num_parameters() == 4204032 - 2 * (512 - 256) * 512);
}

TEST_CASE("attention layers: fairseq initialisation bounds", "[nn][attention]") {
  Generator gen(2);
  const std::int64_t e = 64;
  MultiheadAttention attn(e, 4, {}, gen);
  // q, k, v: Xavier with gain 1/sqrt(2) = the bound of a fused [3E, E] in-projection; out: Xavier.
  const double qkv_bound = std::sqrt(6.0 / (e + 3 * e)), out_bound = std::sqrt(6.0 / (2 * e));
  for (const auto* p : {&attn.q_proj(), &attn.k_proj(), &attn.v_proj()}) {
    CHECK(max_abs((*p)->weight()) <= qkv_bound);
    CHECK(max_abs((*p)->weight()) > 0.9 * qkv_bound);
    CHECK(max_abs((*p)->bias()) == 0.0);
  }
  CHECK(max_abs(attn.out_proj()->weight()) <= out_bound);
  CHECK(max_abs(attn.out_proj()->weight()) > 0.9 * out_bound);
}

TEST_CASE("attention layers: heads equal a per-head computation in generic ops", "[nn][attention]") {
  Generator gen(3);
  const std::int64_t e = 12, h = 3, hd = 4;
  MultiheadAttention attn(e, h, {.kdim = 5, .vdim = 7}, gen);
  attn.to(DType::Float64);
  randomise(attn, gen);
  const Tensor query = rand_uniform({2, 3, e}, -1, 1, kF64, gen);
  const Tensor key = rand_uniform({2, 4, 5}, -1, 1, kF64, gen), value = rand_uniform({2, 4, 7}, -1, 1, kF64, gen);
  const Tensor got = attn.forward(query, key, value);
  const Tensor q = attn.q_proj()->forward(query), k = attn.k_proj()->forward(key), v = attn.v_proj()->forward(value);
  std::vector<Tensor> heads;
  for (std::int64_t i = 0; i < h; ++i) {
    const Tensor qi = narrow(q, 2, i * hd, hd), ki = narrow(k, 2, i * hd, hd), vi = narrow(v, 2, i * hd, hd);
    heads.push_back(matmul(softmax(mul(matmul(qi, transpose(ki, 1, 2)), 1.0 / std::sqrt(double(hd))), -1), vi));
  }
  const std::vector<double> want = values(attn.out_proj()->forward(concat(heads, 2)));
  const std::vector<double> have = values(got);
  check_close(have, want, 1e-13, 0);
}

TEST_CASE("attention layers: float64 gradient checks", "[nn][attention]") {
  Generator gen(4), dg(7);
  SECTION("MultiheadAttention with kdim, vdim, padding, causal and attention dropout") {
    MultiheadAttention attn(6, 2, {.dropout = 0.3, .kdim = 5, .vdim = 3}, gen);
    attn.to(DType::Float64);
    randomise(attn, gen);
    attn.set_generator(dg);
    const Tensor query = random_leaf({2, 3, 6}, gen);
    const Tensor key = random_leaf({2, 4, 5}, gen);
    const Tensor value = random_leaf({2, 4, 3}, gen);
    const Tensor pad = padding({0, 1, 0, 0, 0, 0, 1, 1}, 2);
    check_gradients(
        [&] {
          dg.set_state({5, 0});
          return attn.forward(query, key, value, pad, true);
        },
        with_parameters(attn, {{"query", query}, {"key", key}, {"value", value}}));
  }
  for (const bool pre : {false, true}) {
    const TransformerLayerConfig cfg{.d_model = 4, .heads = 2, .ffn_dim = 6, .dropout = 0.2, .attention_dropout = 0.1,
                                     .activation_dropout = 0.25, .normalize_before = pre};
    DYNAMIC_SECTION("TransformerEncoderLayer " << (pre ? "pre-norm" : "post-norm")) {
      TransformerEncoderLayer layer(cfg, gen);
      layer.to(DType::Float64);
      randomise(layer, gen);
      layer.set_generator(dg);
      const Tensor x = random_leaf({2, 3, 4}, gen);
      const Tensor pad = padding({0, 0, 1, 0, 0, 0}, 2);
      check_gradients(
          [&] {
            dg.set_state({9, 0});
            return layer.forward(x, pad);
          },
          with_parameters(layer, {{"x", x}}));
    }
    DYNAMIC_SECTION("TransformerDecoderLayer " << (pre ? "pre-norm" : "post-norm") << ", gelu") {
      TransformerLayerConfig c = cfg;
      c.activation = Activation::Gelu;
      c.encoder_dim = 6;
      TransformerDecoderLayer layer(c, gen);
      layer.to(DType::Float64);
      randomise(layer, gen);
      layer.set_generator(dg);
      const Tensor x = random_leaf({2, 3, 4}, gen);
      const Tensor enc = random_leaf({2, 2, 6}, gen);
      const Tensor enc_pad = padding({0, 1, 0, 0}, 2);
      check_gradients(
          [&] {
            dg.set_state({9, 0});
            return layer.forward(x, enc, enc_pad);
          },
          with_parameters(layer, {{"x", x}, {"encoder_out", enc}}));
    }
  }
}

TEST_CASE("attention layers: the causal mask blocks the future bit for bit", "[nn][attention]") {
  Generator gen(5);
  const TransformerLayerConfig cfg{.d_model = 16, .heads = 4, .ffn_dim = 24};
  TransformerDecoderLayer layer(cfg, gen);
  randomise(layer, gen);
  layer.eval();
  MultiheadAttention attn(16, 4, {}, gen);
  const Tensor x = rand_uniform({2, 7, 16}, -1, 1, {}, gen), enc = rand_uniform({2, 5, 16}, -1, 1, {}, gen);
  const std::vector<double> before = prefix(layer.forward(x, enc), 4);
  const std::vector<double> attn_before = prefix(attn.forward(x, x, x, Tensor(), true), 4);
  // Change tokens 4..6: outputs 0..3 must not move at all.
  Tensor changed = clone(x);
  copy_(narrow(changed, 1, 4, 3), rand_uniform({2, 3, 16}, -5, 5, {}, gen));
  CHECK(prefix(layer.forward(changed, enc), 4) == before);
  CHECK(prefix(attn.forward(changed, changed, changed, Tensor(), true), 4) == attn_before);
  // And without the mask they do move (the test can tell).
  CHECK(prefix(attn.forward(changed, changed, changed), 4) != prefix(attn.forward(x, x, x), 4));
}

TEST_CASE("attention layers: padded keys do not reach any output", "[nn][attention]") {
  Generator gen(6);
  TransformerEncoderLayer enc_layer({.d_model = 8, .heads = 2, .ffn_dim = 12}, gen);
  TransformerDecoderLayer dec_layer({.d_model = 8, .heads = 2, .ffn_dim = 12}, gen);
  randomise(enc_layer, gen);
  randomise(dec_layer, gen);
  enc_layer.eval();
  dec_layer.eval();
  const Tensor x = rand_uniform({2, 5, 8}, -1, 1, {}, gen);
  // Batch 0 pads its last two positions, batch 1 its first.
  const Tensor pad = padding({0, 0, 0, 1, 1, 1, 0, 0, 0, 0}, 2);
  Tensor changed = clone(x);
  copy_(narrow(select(changed, 0, 0), 0, 3, 2), rand_uniform({2, 8}, -5, 5, {}, gen));
  copy_(narrow(select(changed, 0, 1), 0, 0, 1), rand_uniform({1, 8}, -5, 5, {}, gen));
  // Encoder: unpadded positions are unchanged (padded positions' own outputs may change).
  const Tensor a = enc_layer.forward(x, pad), b = enc_layer.forward(changed, pad);
  CHECK(values(narrow(select(a, 0, 0), 0, 0, 3)) == values(narrow(select(b, 0, 0), 0, 0, 3)));
  CHECK(values(narrow(select(a, 0, 1), 0, 1, 4)) == values(narrow(select(b, 0, 1), 0, 1, 4)));
  // Decoder cross-attention: the padded encoder positions are invisible to every target position.
  const Tensor tgt = rand_uniform({2, 3, 8}, -1, 1, {}, gen);
  CHECK(values(dec_layer.forward(tgt, x, pad)) == values(dec_layer.forward(tgt, changed, pad)));
  CHECK(values(dec_layer.forward(tgt, x)) != values(dec_layer.forward(tgt, changed)));
}

TEST_CASE("attention layers: the emulated device matches the CPU, dropout masks included", "[nn][attention]") {
  REQUIRE(kernels::register_devices().emu);
  for (const bool pre : {false, true}) {
    INFO("normalize_before " << pre);
    Generator gen(10), dg(3);
    const TransformerLayerConfig cfg{.d_model = 16, .heads = 4, .ffn_dim = 20, .dropout = 0.2,
                                     .attention_dropout = 0.3, .activation_dropout = 0.1, .normalize_before = pre};
    TransformerEncoderLayer enc(cfg, gen);
    TransformerDecoderLayer dec(cfg, gen);
    randomise(enc, gen);
    randomise(dec, gen);
    enc.set_generator(dg);
    dec.set_generator(dg);
    const Tensor x = rand_uniform({2, 6, 16}, -1, 1, {}, gen), tgt = rand_uniform({2, 5, 16}, -1, 1, {}, gen);
    const Tensor pad = padding({0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}, 2);
    const auto run = [&](Device d) {
      dg.set_state({3, 0});
      const Tensor memory = enc.forward(copy_to_device(x, d), copy_to_device(pad, d));
      const Tensor out = dec.forward(copy_to_device(tgt, d), memory, copy_to_device(pad, d));
      CHECK(out.device() == d);
      return std::pair{values(memory), values(out)};
    };
    const auto cpu = run(Device::cpu());
    enc.to(Device::emu());
    dec.to(Device::emu());
    const auto emu = run(Device::emu());
    CHECK(define::test::compare(emu.first, cpu.first, 1e-5, 1e-5).max_share <= 1.0);
    CHECK(define::test::compare(emu.second, cpu.second, 1e-5, 1e-5).max_share <= 1.0);
  }
}

TEST_CASE("attention layers: sinusoidal positions against the formula", "[nn][attention]") {
  for (const std::int64_t dim : {std::int64_t{8}, std::int64_t{7}, std::int64_t{2}}) {
    const std::int64_t half = dim / 2, length = 5, offset = 3;
    const std::vector<double> got = values(sinusoidal_positions(length, dim, offset, kF64));
    REQUIRE(got.size() == static_cast<std::size_t>(length * dim));
    for (std::int64_t t = 0; t < length; ++t) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double w = half > 1 ? std::pow(10000.0, -double(i) / double(half - 1)) : 1.0;
        const double angle = double(t + offset) * w;
        INFO("dim " << dim << ", position " << t + offset << ", frequency " << i);
        CHECK(got[static_cast<std::size_t>(t * dim + i)] == Approx(std::sin(angle)).margin(1e-12));
        CHECK(got[static_cast<std::size_t>(t * dim + half + i)] == Approx(std::cos(angle)).margin(1e-12));
      }
      if (dim % 2 == 1) CHECK(got[static_cast<std::size_t>(t * dim + dim - 1)] == 0.0);
    }
  }
  // Position 0 is [0 ... 0, 1 ... 1]; float32 by default.
  const Tensor p0 = sinusoidal_positions(1, 6);
  CHECK(p0.dtype() == DType::Float32);
  CHECK(values(p0) == std::vector<double>{0, 0, 0, 1, 1, 1});
  // The module adds the positions to each sequence of the batch.
  SinusoidalPositions pos(6);
  CHECK(pos.num_parameters() == 0);
  const Tensor x = rand_uniform({2, 4, 6}, -1, 1, kF64);
  const std::vector<double> y = values(pos.forward(x, 2)), xs = values(x);
  const std::vector<double> table = values(sinusoidal_positions(4, 6, 2, kF64));
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == xs[i] + table[i % table.size()]);
}

TEST_CASE("attention layers: errors name the layer and the values", "[nn][attention]") {
  CHECK_THROWS_WITH(MultiheadAttention(10, 4), Contains("MultiheadAttention: embed_dim 10 is not divisible by num_heads 4"));
  CHECK_THROWS_WITH(MultiheadAttention(8, 2, {.dropout = 2.0}), Contains("dropout probability 2"));
  MultiheadAttention attn(8, 2);
  const Tensor x = zeros({2, 3, 8});
  CHECK_THROWS_WITH(attn.forward(zeros({2, 3, 7}), x, x), Contains("query must be [B, T, 8], got [2,3,7]"));
  CHECK_THROWS_WITH(attn.forward(x, x, zeros({2, 4, 8})), Contains("same length"));
  CHECK_THROWS_WITH(attn.forward(x, x, x, zeros({2, 4})), Contains("key_padding_mask must be [B, Tk] = [2,3]"));
  CHECK_THROWS_WITH(TransformerEncoderLayer({.d_model = 6, .heads = 4}),
                    Contains("TransformerEncoderLayer: d_model 6 is not divisible by heads 4"));
  CHECK_THROWS_WITH(TransformerDecoderLayer({.d_model = 8, .heads = 2, .attention_dropout = -0.1}),
                    Contains("TransformerDecoderLayer: attention_dropout -0.1 is outside [0, 1]"));
  CHECK_THROWS_WITH(sinusoidal_positions(4, 1), Contains("dim must be at least 2, got 1"));
}
