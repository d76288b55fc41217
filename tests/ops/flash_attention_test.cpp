// flash_attention (the flash-attention family, kernels/flash_attention.h): harness cases in every
// mode (the float64 gradient check of the op included; odd sizes, causal with Tq != Tk, padding with
// fully masked rows, non-contiguous q/k/v, dropout, head dims of every CUDA tile configuration, the
// decode case), the row log-sum-exp against the reference, equality with the unfused
// scaled_dot_product_attention (dropout mask and generator offsets included), and named errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/attention_call.h"
#include "autograd/ops.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/flash_attention.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;
using define::test::InputSpec;
using define::test::OpCase;

namespace {

using V = const std::vector<Tensor>&;
using define::test::values;

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

Tensor padding(std::int64_t b, std::int64_t tk, const std::function<bool(std::int64_t, std::int64_t)>& pattern) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(b * tk));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < tk; ++j) m[static_cast<std::size_t>(i * tk + j)] = pattern(i, j) ? 1 : 0;
  return from_vector(m, Shape{b, tk});
}

// Batch 0 pads every third key from key 1, batch 1 pads all keys (fully masked rows), further
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

AttentionOptions options(const Setup& s, Generator& gen) {
  return {.key_padding_mask = s.pad, .causal = s.causal, .scale = s.scale, .dropout = s.dropout, .generator = &gen};
}

// Each evaluation builds a fresh generator, so finite differences see the same dropout mask.
Tensor attend(V in, const Setup& s) {
  Generator gen(s.seed);
  return flash_attention(in[0], in[1], in[2], options(s, gen));
}

OpCase flash_case(std::string name, std::vector<InputSpec> inputs, Setup setup, bool gradcheck = true) {
  OpCase c{.name = "flash_attention/" + std::move(name), .inputs = std::move(inputs), .forward = [setup](V in) {
             return attend(in, setup);
           }};
  c.gradcheck = gradcheck;
  return c;
}

// The row log-sum-exp of the kernels' forward (no gradient): -inf for fully masked rows.
OpCase lse_case(std::string name, std::vector<InputSpec> inputs, Setup setup) {
  OpCase c{.name = "flash_attention_lse/" + std::move(name), .inputs = std::move(inputs), .forward = [setup](V in) {
             const double scale = setup.scale != 0.0 ? setup.scale : 1.0 / std::sqrt(double(in[0].size(3)));
             const kernels::AttentionMasking m{
                 .key_padding_mask = setup.pad, .causal = setup.causal, .dropout = setup.dropout, .seed = setup.seed};
             return kernels::flash_attention_forward(detach(in[0]), detach(in[1]), detach(in[2]), m, scale).lse;
           }};
  c.gradcheck = false;
  c.expect_nonfinite = true;
  return c;
}

}  // namespace

TEST_CASE("ops: flash_attention", "[ops][harness][flash_attention][family:flash_attention]") {
  define::test::run_op_cases({
      flash_case("B1_H1_T1_d1", qkv(1, 1, 1, 1, 1, 1), {}),
      flash_case("B2_H3_Tq5_Tk7_d4_dv3", qkv(2, 3, 5, 7, 4, 3), {}),
      flash_case("scale_0.7", qkv(1, 2, 3, 4, 5, 2), {.scale = 0.7}),
      flash_case("causal_T6", qkv(1, 2, 6, 6, 3, 2), {.causal = true}),
      // A memory: Tk > Tq, the queries are the last Tq positions.
      flash_case("causal_Tq3_Tk7", qkv(2, 1, 3, 7, 4, 3), {.causal = true}),
      // Tq > Tk: the first Tq - Tk queries see no key at all and give zeros.
      flash_case("causal_Tq7_Tk3", qkv(1, 2, 7, 3, 2, 2), {.causal = true}),
      flash_case("padding_fully_masked_row", qkv(3, 2, 4, 5, 3, 2), {.pad = mixed_padding(3, 5)}),
      flash_case("padding_and_causal_Tq4_Tk6", qkv(3, 1, 4, 6, 3, 3), {.pad = mixed_padding(3, 6), .causal = true}),
      flash_case("non_contiguous", qkv(2, 2, 3, 5, 4, 3, true), {.pad = mixed_padding(2, 5), .causal = true}),
      flash_case("decode_Tq1_Tk9_padded", qkv(3, 2, 1, 9, 4, 3), {.pad = mixed_padding(3, 9)}),
  });
}

TEST_CASE("ops: flash_attention dropout", "[ops][harness][flash_attention][family:flash_attention]") {
  define::test::run_op_cases({
      flash_case("dropout0.3", qkv(1, 2, 3, 5, 4, 3), {.dropout = 0.3}),
      flash_case("dropout0.5_padded_causal", qkv(3, 1, 4, 6, 3, 2),
                 {.pad = mixed_padding(3, 6), .causal = true, .dropout = 0.5}),
      flash_case("dropout1_all_dropped", qkv(1, 1, 2, 3, 2, 2), {.dropout = 1.0}),
      flash_case("dropout0.2_T67_causal", qkv(2, 2, 67, 67, 8, 4), {.causal = true, .dropout = 0.2, .seed = 5}, false),
      flash_case("dropout0.1_Tk90_non_contiguous", qkv(1, 3, 5, 90, 4, 3, true),
                 {.pad = mixed_padding(1, 90), .dropout = 0.1}, false),
  });
}

// Sizes past one tile of every CUDA configuration (largest head dim 32, 64, 128), partial tiles,
// the decode case against a long cache, d != dv.
TEST_CASE("ops: flash_attention tiles and head dims", "[ops][harness][flash_attention][family:flash_attention]") {
  define::test::run_op_cases({
      flash_case("Tq70_Tk75_d32_causal", qkv(1, 2, 70, 75, 32, 32), {.causal = true}, false),
      flash_case("Tq40_Tk90_d41_memory_causal", qkv(2, 1, 40, 90, 41, 41),
                 {.pad = mixed_padding(2, 90), .causal = true}, false),
      flash_case("Tq33_Tk20_d64_dv17", qkv(1, 2, 33, 20, 64, 17), {.causal = true}, false),
      flash_case("Tq18_Tk35_d128_dv100", qkv(1, 1, 18, 35, 128, 100), {}, false),
      flash_case("decode_Tq1_Tk300_d64", qkv(2, 2, 1, 300, 64, 64), {.pad = mixed_padding(2, 300)}, false),
  });
}

TEST_CASE("ops: flash_attention row log-sum-exp", "[ops][harness][flash_attention][family:flash_attention]") {
  define::test::run_op_cases({
      lse_case("padding_fully_masked_row", qkv(3, 2, 4, 5, 3, 2), {.pad = mixed_padding(3, 5)}),
      lse_case("causal_Tq7_Tk3", qkv(1, 2, 7, 3, 2, 2), {.causal = true}),
      lse_case("Tq70_Tk75_d41_causal_dropout", qkv(1, 2, 70, 75, 41, 8), {.causal = true, .dropout = 0.3}),
  });
}

// The op is scaled_dot_product_attention computed another way: the same outputs and gradients, the
// same dropout mask (both draw B*H*Tq*Tk words from the generator, so it is left where the
// unfused op leaves it), on the reference and the CPU backend.
TEST_CASE("flash_attention: equals scaled_dot_product_attention, dropout mask included",
          "[ops][flash_attention][family:flash_attention]") {
  const TensorOptions f64{.dtype = DType::Float64};
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    for (const bool causal : {false, true}) {
      for (const double p : {0.0, 0.25}) {
        Generator data(3);
        Tensor q = rand_normal({3, 2, 6, 5}, 0, 1, f64, data).set_requires_grad();
        Tensor k = rand_normal({3, 2, 9, 5}, 0, 1, f64, data).set_requires_grad();
        Tensor v = rand_normal({3, 2, 9, 4}, 0, 1, f64, data).set_requires_grad();
        const Tensor up = rand_normal({3, 2, 6, 4}, 0, 1, f64, data);
        const Setup s{.pad = mixed_padding(3, 9), .causal = causal, .dropout = p};
        Generator g1(77), g2(77);
        const Tensor flash = flash_attention(q, k, v, options(s, g1));
        const Tensor unfused = scaled_dot_product_attention(q, k, v, options(s, g2));
        INFO("backend " << (backend == kernels::Backend::Ref ? "ref" : "cpu") << ", causal " << causal << ", dropout "
                        << p);
        CHECK(g1.state().offset == g2.state().offset);
        const auto a = values(flash), b = values(unfused);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-13));
        const std::vector<Tensor> ga = grad(flash, {q, k, v}, up), gb = grad(unfused, {q, k, v}, up);
        for (std::size_t t = 0; t < 3; ++t) {
          const auto x = values(ga[t]), y = values(gb[t]);
          for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).margin(1e-12));
        }
      }
    }
  }
}

// Auto picks the fused kernels on a GPU (here the emulated one) where their tiles hold the head
// dims, up to 128, and the unfused path past that (DeLighT's single head of d_m / 2 from d_m = 384) and
// on the CPU.
TEST_CASE("flash_attention: auto takes the fused kernels for heads up to 128 wide",
          "[ops][flash_attention][family:flash_attention]") {
  REQUIRE(kernels::register_devices().emu);
  const AttentionKernel saved = default_attention_kernel();
  set_default_attention_kernel(AttentionKernel::Auto);
  const auto pick = [](std::int64_t d, std::int64_t dv, Device device) {
    const Tensor q = zeros({1, 1, 2, d}, {.device = device}), v = zeros({1, 1, 3, dv}, {.device = device});
    return detail::resolve_attention_kernel(AttentionKernel::Auto, q, v);
  };
  CHECK(pick(64, 64, Device::emu()) == AttentionKernel::Fused);
  CHECK(pick(128, 128, Device::emu()) == AttentionKernel::Fused);
  CHECK(pick(192, 192, Device::emu()) == AttentionKernel::Unfused);
  CHECK(pick(64, 129, Device::emu()) == AttentionKernel::Unfused);
  CHECK(pick(512, 512, Device::emu()) == AttentionKernel::Unfused);
  CHECK(pick(64, 64, Device::cpu()) == AttentionKernel::Unfused);
  CHECK(detail::resolve_attention_kernel(AttentionKernel::Fused, zeros({1, 1, 2, 512}), zeros({1, 1, 3, 512})) ==
        AttentionKernel::Fused);  // asked for: the kernels' entry point names the head dim it cannot take
  set_default_attention_kernel(saved);
}

TEST_CASE("flash_attention: a fully masked query row gives zeros, lse -inf and no gradient",
          "[ops][flash_attention][family:flash_attention]") {
  const TensorOptions f64{.dtype = DType::Float64};
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    Tensor q = rand_normal({2, 1, 3, 4}, 0, 1, f64).set_requires_grad();
    Tensor k = rand_normal({2, 1, 5, 4}, 0, 1, f64).set_requires_grad();
    Tensor v = rand_normal({2, 1, 5, 3}, 0, 1, f64).set_requires_grad();
    const Tensor pad = padding(2, 5, [](std::int64_t b, std::int64_t) { return b == 0; });
    const Tensor y = flash_attention(q, k, v, {.key_padding_mask = pad});
    for (double x : values(select(y, 0, 0))) CHECK(x == 0.0);
    for (double x : values(select(y, 0, 1))) CHECK(x != 0.0);
    const Tensor lse =
        kernels::flash_attention_forward(detach(q), detach(k), detach(v), {.key_padding_mask = pad}, 0.5).lse;
    CHECK(lse.dtype() == DType::Float64);
    for (double x : values(select(lse, 0, 0))) CHECK(x == -std::numeric_limits<double>::infinity());
    for (double x : values(select(lse, 0, 1))) CHECK(std::isfinite(x));
    const std::vector<Tensor> g = grad(sum(y), {q, k, v});
    for (const Tensor& t : g)
      for (double x : values(select(t, 0, 0))) CHECK(x == 0.0);
  }
}

TEST_CASE("flash_attention: no keys at all, and 16-bit inputs", "[ops][flash_attention][family:flash_attention]") {
  // Tk = 0: every row is fully masked.
  const kernels::FlashAttentionOutput empty_keys =
      kernels::flash_attention_forward(ones({1, 2, 3, 4}), zeros({1, 2, 0, 4}), zeros({1, 2, 0, 5}), {}, 0.5);
  CHECK(empty_keys.out.shape() == Shape{1, 2, 3, 5});
  for (double x : values(empty_keys.out)) CHECK(x == 0.0);
  for (double x : values(empty_keys.lse)) CHECK(x == -std::numeric_limits<double>::infinity());
  // 16-bit q, k, v: computed widened, out in their dtype, lse float32.
  const Tensor q = kernels::cast(rand_uniform({1, 2, 3, 4}, -1, 1), DType::BFloat16);
  const kernels::FlashAttentionOutput r = kernels::flash_attention_forward(q, q, q, {.causal = true}, 0.5);
  CHECK(r.out.dtype() == DType::BFloat16);
  CHECK(r.lse.dtype() == DType::Float32);
}

TEST_CASE("flash_attention: errors name the operands", "[ops][flash_attention][family:flash_attention]") {
  const Tensor q = zeros({2, 3, 4, 5}), k = zeros({2, 3, 6, 5}), v = zeros({2, 3, 6, 7});
  CHECK_THROWS_WITH(flash_attention(q, zeros({2, 3, 6, 4}), v), Contains("shapes do not match"));
  CHECK_THROWS_WITH(flash_attention(q, k, zeros({2, 3, 5, 7})), Contains("v [2,3,5,7]"));
  CHECK_THROWS_WITH(flash_attention(zeros({3, 4, 5}), k, v), Contains("must all be 4-d"));
  CHECK_THROWS_WITH(flash_attention(q, k, v, {.key_padding_mask = zeros({2, 5})}),
                    Contains("key_padding_mask [2,5] must be [B, Tk] = [2,6]"));
  CHECK_THROWS_WITH(flash_attention(q, k, v, {.key_padding_mask = {}, .dropout = 1.5}),
                    Contains("dropout 1.5 is outside"));
  CHECK_THROWS_WITH(flash_attention(q, k, zeros({2, 3, 6, 7}, {.dtype = DType::Float64})), Contains("dtypes"));
  const kernels::FlashAttentionOutput f = kernels::flash_attention_forward(q, k, v, {}, 1.0);
  CHECK_THROWS_WITH(kernels::flash_attention_backward(zeros({2, 3, 4, 7}), q, k, v, f.out, zeros({2, 3, 5}), {}, 1.0,
                                                      true, true, true),
                    Contains("lse [2,3,5] must be [B, H, Tq] = [2,3,4]"));
  CHECK_THROWS_WITH(kernels::flash_attention_forward(q, k, v, {}, INFINITY), Contains("scale inf is not finite"));
}
