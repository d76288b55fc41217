// DeLighT blocks (spec §4.2), block-wise scaling (§4.3) and the G rule (§4.1): the spec's
// examples, parameter counts from the §4.2 formula, the forward against a reference written with
// plain ops ([B, T, d] layout, explicit softmax), causality, padding, float64 gradient checks and
// the emulated device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "nn/delight_block.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_close;
using define::test::check_gradients;
using define::test::random_leaf;
using define::test::randomise;
using define::test::values;
using define::test::with_parameters;

namespace {

using Ints = std::vector<std::int64_t>;

// A tiny block: d_m = 8 (d_o = 4, FFN 8 -> 2 -> 8), DExTra depth 3, w = 2, G = 2.
DelightBlockConfig tiny(bool pre_norm, bool cross = true) {
  return {.d_m = 8, .depth = 3, .width_mult = 2.0, .max_groups = 2, .pre_norm = pre_norm, .cross_attention = cross};
}

// ---- reference forward with plain ops, batch-first [B, T, d].
Tensor lin(const Module& m, const std::string& name, const Tensor& x) {
  return add(matmul(x, transpose(m.parameter(name + ".weight"), 0, 1)), m.parameter(name + ".bias"));
}
Tensor ln(const Module& m, const std::string& name, const Tensor& x) {
  const Tensor mu = mean(x, {-1}, true);
  const Tensor var = mean(mul(sub(x, mu), sub(x, mu)), {-1}, true);
  return add(mul(div(sub(x, mu), sqrt(add(var, 1e-5))), m.parameter(name + ".weight")), m.parameter(name + ".bias"));
}
// softmax(q k^T / sqrt(d) + mask) v, masked scores set to -1e300 (mask [Tq, Tk] or [B, 1, Tk]).
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  Tensor s = mul(matmul(q, transpose(k, 1, 2)), 1.0 / std::sqrt(double(q.size(2))));
  if (mask.defined()) s = masked_fill(s, mask, -1e300);
  return matmul(softmax(s, -1), v);
}
Tensor ref_block(const DelightBlock& b, const Tensor& x_tbd, const Tensor& enc_sbd, const Tensor& causal,
                 const Tensor& enc_mask) {
  const bool pre = b.config().pre_norm;
  const auto norm_in = [&](const char* n, const Tensor& t) { return pre ? ln(b, n, t) : t; };
  const auto norm_out = [&](const char* n, const Tensor& t) { return pre ? t : ln(b, n, t); };
  const Tensor x = transpose(x_tbd, 0, 1);  // [B, T, d]
  Tensor h = b.dextra().forward(norm_in("self_attn_layer_norm", x));
  const std::vector<Tensor> qkv = split(lin(b, "self_attn.qkv_proj", h), {4, 4, 4}, -1);
  h = lin(b, "self_attn.out_proj", attend(qkv[0], qkv[1], qkv[2], causal));
  Tensor y = norm_out("self_attn_layer_norm", add(x, h));
  if (enc_sbd.defined()) {
    const Tensor q = lin(b, "encoder_attn.q_proj", norm_in("encoder_attn_layer_norm", y));
    const std::vector<Tensor> kv = split(lin(b, "encoder_attn.kv_proj", transpose(enc_sbd, 0, 1)), {4, 4}, -1);
    y = norm_out("encoder_attn_layer_norm", add(y, lin(b, "encoder_attn.out_proj", attend(q, kv[0], kv[1], enc_mask))));
  }
  h = lin(b, "fc2", silu(lin(b, "fc1", norm_in("final_layer_norm", y))));
  return transpose(norm_out("final_layer_norm", add(y, h)), 0, 1);
}

Tensor causal_mask(std::int64_t t) {
  std::vector<double> m(t * t);
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t j = 0; j < t; ++j) m[i * t + j] = j > i ? 1 : 0;
  return from_vector(m, {t, t});
}

}  // namespace

TEST_CASE("delight: block-wise scaling examples of §4.3", "[nn][delight]") {
  const BlockScaling s = block_wise_scaling(4, 8, 2.0, 8);
  CHECK(s.depths == Ints{4, 4, 5, 5, 6, 6, 7, 8});
  CHECK(s.widths == std::vector<double>{2.0, 2.143, 2.286, 2.429, 2.571, 2.714, 2.857, 3.0});
  // N_min 4, N_max 12, B 12: widths 2 + 2b/11 rounded to 3 decimals (steps of 0.182).
  const BlockScaling lm = block_wise_scaling(4, 12, 2.0, 12);
  CHECK(lm.depths == Ints{4, 4, 5, 6, 6, 7, 8, 9, 9, 10, 11, 12});
  CHECK(lm.widths ==
        std::vector<double>{2.0, 2.182, 2.364, 2.545, 2.727, 2.909, 3.091, 3.273, 3.455, 3.636, 3.818, 4.0});
  // Issue #8's IWSLT reading (3/9, w = 1, B = 9) and the uniform case N_min == N_max.
  CHECK(block_wise_scaling(3, 9, 1.0, 9).depths == Ints{3, 3, 4, 5, 6, 6, 7, 8, 9});
  const BlockScaling u = block_wise_scaling(5, 5, 2.0, 3);
  CHECK(u.depths == Ints{5, 5, 5});
  CHECK(u.widths == std::vector<double>{2.0, 2.0, 2.0});
  CHECK(block_wise_scaling(4, 8, 2.0, 1).depths == Ints{4});
  REQUIRE_THROWS_WITH(block_wise_scaling(8, 4, 2.0, 8), Contains("block_wise_scaling: depths must satisfy 1 <= N_min <= N_max, got N_min = 8, N_max = 4"));
  REQUIRE_THROWS_WITH(block_wise_scaling(4, 8, 2.0, 0), Contains("B = 0 must be at least 1"));
}

TEST_CASE("delight: the G rule of §4.1", "[nn][delight]") {
  CHECK(dextra_max_groups(128, DExTraGroupRule::Released) == 4);
  CHECK(dextra_max_groups(256, DExTraGroupRule::Released) == 8);
  CHECK(dextra_max_groups(384, DExTraGroupRule::Released) == 16);  // the paper's ceil(d_m / 32) would say 12
  CHECK(dextra_max_groups(512, DExTraGroupRule::Released) == 16);
  CHECK(dextra_max_groups(640, DExTraGroupRule::Released) == 32);  // paper: 20
  CHECK(dextra_max_groups(1024, DExTraGroupRule::Released) == 32);
  CHECK(dextra_max_groups(32, DExTraGroupRule::Released) == 1);
  REQUIRE_THROWS_WITH(dextra_max_groups(16, DExTraGroupRule::Released), Contains("dextra_max_groups: d_m = 16 is below 32"));
}

TEST_CASE("delight: block parameter counts and names at d_m = 512 (§2.4 block 0, §4.2)", "[nn][delight]") {
  const std::int64_t d = 512, o = d / 2, f = d / 4;
  const DelightBlockConfig c{.d_m = 512, .depth = 4, .width_mult = 2.0};  // G from the rule: 16
  const DelightEncoderBlock enc(c);
  CHECK(enc.dextra().config().max_groups == 16);
  CHECK(enc.dextra().num_parameters() == 923'136);  // spec §2.4 table
  // §4.2: stacked qkv d_o -> 3 d_o, out d_o -> d_m, two LayerNorms, FFN d_m -> d_m/4 -> d_m.
  const std::int64_t self_attn = (3 * o * o + 3 * o) + (o * d + d), ffn = (d * f + f) + (f * d + d), norms = 2 * 2 * d;
  CHECK(enc.num_parameters() == 923'136 + self_attn + ffn + norms);
  CHECK(enc.num_parameters() == 1'385'856);
  // Decoder: plus q d_m -> d_o, kv d_m -> 2 d_o, out d_o -> d_m and a third LayerNorm.
  const DelightDecoderBlock dec(c);
  const std::int64_t cross = (d * o + o) + (d * 2 * o + 2 * o) + (o * d + d) + 2 * d;
  CHECK(dec.num_parameters() == enc.num_parameters() + cross);
  CHECK(dec.num_parameters() == 1'912'448);
  DelightBlockConfig lm = c;
  lm.cross_attention = false;
  CHECK(DelightDecoderBlock(lm).num_parameters() == enc.num_parameters());

  const std::vector<std::string> keys = DelightDecoderBlock(tiny(false)).named_parameters().keys();
  for (const char* name : {"dextra.input_layer.weight", "dextra.glts.2.weight", "dextra.glts.1.norm.bias",
                           "dextra.output_layer.norm.weight", "self_attn.qkv_proj.weight", "self_attn.qkv_proj.bias",
                           "self_attn.out_proj.weight", "self_attn_layer_norm.weight", "encoder_attn.q_proj.weight",
                           "encoder_attn.kv_proj.bias", "encoder_attn.out_proj.weight", "encoder_attn_layer_norm.bias",
                           "fc1.weight", "fc2.bias", "final_layer_norm.weight"}) {
    INFO(name);
    CHECK(std::find(keys.begin(), keys.end(), name) != keys.end());
  }
  const DelightDecoderBlock small(tiny(false));
  CHECK(small.parameter("self_attn.qkv_proj.weight").shape() == Shape{12, 4});
  CHECK(small.parameter("encoder_attn.kv_proj.weight").shape() == Shape{8, 8});
  CHECK(small.parameter("fc1.weight").shape() == Shape{2, 8});
}

TEST_CASE("delight: block forward equals a plain-op reference", "[nn][delight]") {
  Generator gen(31);
  const TensorOptions f64{.dtype = DType::Float64};
  const Tensor x = rand_uniform({4, 2, 8}, -1, 1, f64, gen), enc = rand_uniform({3, 2, 8}, -1, 1, f64, gen);
  // Sequence 1's last source position is padding.
  const Tensor pad = from_vector(std::vector<std::int64_t>{0, 0, 0, 0, 0, 1}, Shape{2, 3});
  const Tensor pad_b1t = reshape(pad, {2, 1, 3});
  for (bool pre : {false, true}) {
    INFO("pre_norm " << pre);
    DelightEncoderBlock e(tiny(pre), gen);
    e.to(DType::Float64);
    randomise(e, gen);
    check_close(e.forward(enc, pad), ref_block(e, enc, Tensor(), pad_b1t, Tensor()), 1e-12, 0);
    DelightDecoderBlock d(tiny(pre), gen);
    d.to(DType::Float64);
    randomise(d, gen);
    check_close(d.forward(x, enc, pad), ref_block(d, x, enc, causal_mask(4), pad_b1t), 1e-12, 0);
    DelightDecoderBlock lm(tiny(pre, false), gen);
    lm.to(DType::Float64);
    randomise(lm, gen);
    check_close(lm.forward(x), ref_block(lm, x, Tensor(), causal_mask(4), Tensor()), 1e-12, 0);
  }
}

TEST_CASE("delight: the decoder block is causal and padded keys are ignored", "[nn][delight]") {
  Generator gen(5);
  DelightDecoderBlock d(tiny(true), gen);
  DelightEncoderBlock e(tiny(false), gen);
  randomise(d, gen);
  randomise(e, gen);
  Tensor x = rand_uniform({5, 2, 8}, -1, 1, {}, gen);
  const Tensor enc = rand_uniform({3, 2, 8}, -1, 1, {}, gen);
  // Source position 1 of sequence 0 is padding.
  const Tensor pad = from_vector(std::vector<std::int64_t>{0, 1, 0, 0, 0, 0}, Shape{2, 3});
  const std::vector<double> before = values(d.forward(x, enc, pad));
  // Change positions t >= 3: outputs at t < 3 are unchanged, later ones change.
  {
    NoGradGuard ng;
    copy_(narrow(x, 0, 3, 2), rand_uniform({2, 2, 8}, -1, 1, {}, gen));
  }
  const std::vector<double> after = values(d.forward(x, enc, pad));
  const std::size_t cut = 3 * 2 * 8;
  CHECK(std::vector<double>(before.begin(), before.begin() + cut) == std::vector<double>(after.begin(), after.begin() + cut));
  CHECK(std::vector<double>(before.begin() + cut, before.end()) != std::vector<double>(after.begin() + cut, after.end()));
  // A padded source position (t = 1, b = 0) does not reach the decoder nor the encoder's other
  // positions.
  Tensor enc2 = clone(enc);
  {
    NoGradGuard ng;
    copy_(select(select(enc2, 0, 1), 0, 0), rand_uniform({8}, 5, 6, {}, gen));
  }
  CHECK(values(d.forward(x, enc2, pad)) == values(d.forward(x, enc, pad)));
  const std::vector<double> e1 = values(e.forward(enc, pad)), e2 = values(e.forward(enc2, pad));
  for (std::int64_t t : {0, 2})
    for (std::int64_t j = 0; j < 8; ++j) CHECK(e1[(t * 2 + 0) * 8 + j] == e2[(t * 2 + 0) * 8 + j]);
}

TEST_CASE("delight: block configuration errors", "[nn][delight]") {
  DelightBlockConfig c = tiny(false);
  c.ffn_reduction = 3;
  REQUIRE_THROWS_WITH(DelightEncoderBlock(c), Contains("DelightEncoderBlock: d_m = 8 is not divisible by ffn_reduction = 3"));
  c = tiny(false);
  c.d_m = 7;
  REQUIRE_THROWS_WITH(DelightDecoderBlock(c), Contains("DelightDecoderBlock: d_m = 7 must be positive and even"));
  const DelightDecoderBlock d(tiny(false)), lm(tiny(false, false));
  const Tensor x = zeros({3, 2, 8});
  REQUIRE_THROWS_WITH(d.forward(x), Contains("attends to an encoder output, but none was given"));
  REQUIRE_THROWS_WITH(lm.forward(x, x), Contains("has no cross-attention, but an encoder output was given"));
  REQUIRE_THROWS_WITH(d.forward(zeros({3, 8})), Contains("expected input [T, B, 8], got [3,8]"));
  REQUIRE_THROWS_WITH(d.forward(x, zeros({3, 1, 8})), Contains("SingleHeadAttention: batch sizes differ"));
}

TEST_CASE("delight: float64 gradient checks of the encoder and decoder blocks", "[nn][delight]") {
  Generator gen(17);
  const Tensor pad = from_vector(std::vector<std::int64_t>{0, 0, 0, 0, 0, 1}, Shape{2, 3});
  const auto with_dropout = [](DelightBlockConfig c) {
    c.dropout = 0.1, c.attention_dropout = 0.2, c.activation_dropout = 0.1, c.ffn_dropout = 0.1, c.dextra_dropout = 0.1;
    return c;
  };
  SECTION("encoder block, post-norm, every dropout on") {
    DelightEncoderBlock e(with_dropout(tiny(false)), gen);
    e.to(DType::Float64);
    randomise(e, gen);
    Generator dg(3);
    e.set_generator(dg);
    const Tensor x = random_leaf({3, 2, 8}, gen);
    const auto wrt = with_parameters(e, {{"x", x}});
    check_gradients([&] { dg.set_state({3, 0}); return e.forward(x, pad); }, wrt);
  }
  SECTION("decoder block, pre-norm, cross-attention, every dropout on") {
    DelightDecoderBlock d(with_dropout(tiny(true)), gen);
    d.to(DType::Float64);
    randomise(d, gen);
    Generator dg(4);
    d.set_generator(dg);
    const Tensor x = random_leaf({4, 2, 8}, gen);
    const Tensor enc = random_leaf({3, 2, 8}, gen);
    const auto wrt = with_parameters(d, {{"x", x}, {"enc", enc}});
    check_gradients([&] { dg.set_state({4, 0}); return d.forward(x, enc, pad); }, wrt);
  }
}

TEST_CASE("delight: blocks on the emulated device match the CPU", "[nn][delight]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(8);
  DelightBlockConfig c{.d_m = 32, .depth = 4, .width_mult = 2.0, .max_groups = 4, .attention_dropout = 0.1, .dextra_dropout = 0.1};
  DelightEncoderBlock e(c, gen);
  DelightDecoderBlock d(c, gen);
  randomise(e, gen);
  randomise(d, gen);
  Generator dg(3);
  e.set_generator(dg);
  d.set_generator(dg);
  const Tensor x = rand_uniform({5, 2, 32}, -1, 1, {}, gen), src = rand_uniform({4, 2, 32}, -1, 1, {}, gen);
  const Tensor pad = from_vector(std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 1}, Shape{2, 4});
  const auto run = [&](Device dev) {
    dg.set_state({3, 0});  // the same Philox masks on both devices
    const Tensor s = copy_to_device(src, dev), p = copy_to_device(pad, dev);
    const Tensor enc = e.forward(s, p);
    return std::pair{values(enc), values(d.forward(copy_to_device(x, dev), enc, p))};
  };
  const auto cpu = run(Device::cpu());
  e.to(Device::emu());
  d.to(Device::emu());
  const auto emu = run(Device::emu());
  CHECK(define::test::compare(emu.first, cpu.first, 1e-5, 1e-5).max_share <= 1.0);
  CHECK(define::test::compare(emu.second, cpu.second, 1e-5, 1e-5).max_share <= 1.0);
}
