// flash_relative_attention (the fused relative-attention family, kernels/flash_rel_attention.h):
// harness cases in every mode (the float64 gradient check of the op included; no memory, a memory
// longer than the segment, windows (same_length), odd sizes, non-contiguous inputs, dropout, head
// dims of every CUDA tile configuration, the decode case), the row log-sum-exp against the
// reference, equality with the unfused relative_attention (dropout mask and generator offsets
// included) on the reference, CPU and emulated-CUDA paths, 16-bit inputs, causal flash_attention
// as the special case r = u = w = 0, partial gradient requests, empty queries or batch, and named
// errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/flash_rel_attention.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;
using define::test::check_close;
using define::test::InputSpec;
using define::test::OpCase;
using define::test::values;

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
  return {spec({b, h, tq, d}, non_contiguous),  spec({b, h, tk, d}, non_contiguous),
          spec({b, h, tk, dv}, non_contiguous), spec({h, tk, d}, non_contiguous),
          spec({h, d}, non_contiguous),         spec({h, d}, non_contiguous)};
}

struct Setup {
  std::int64_t window = 0;
  double dropout = 0.0;
  double scale = 0.0;
  std::uint64_t seed = 11;
};

RelAttentionOptions options(const Setup& s, Generator& gen, AttentionKernel kernel = AttentionKernel::Auto) {
  return {.window = s.window, .scale = s.scale, .dropout = s.dropout, .generator = &gen, .kernel = kernel};
}

// Each evaluation builds a fresh generator, so finite differences see the same dropout mask.
Tensor attend(V in, const Setup& s) {
  Generator gen(s.seed);
  return flash_relative_attention(in[0], in[1], in[2], in[3], in[4], in[5], options(s, gen));
}

OpCase flash_rel_case(std::string name, std::vector<InputSpec> in, Setup setup, bool gradcheck = true) {
  OpCase c{.name = "flash_rel_attention/" + std::move(name), .inputs = std::move(in), .forward = [setup](V x) {
             return attend(x, setup);
           }};
  c.gradcheck = gradcheck;
  return c;
}

// The row log-sum-exp of the kernels' forward (no gradient; dropout does not change it).
OpCase lse_case(std::string name, std::vector<InputSpec> in, Setup setup) {
  OpCase c{.name = "flash_rel_attention_lse/" + std::move(name), .inputs = std::move(in), .forward = [setup](V x) {
             const double scale = setup.scale != 0.0 ? setup.scale : 1.0 / std::sqrt(double(x[0].size(3)));
             const kernels::RelAttentionParams params{
                 .window = setup.window, .scale = scale, .dropout = setup.dropout, .seed = setup.seed};
             return kernels::flash_rel_attention_forward(detach(x[0]), detach(x[1]), detach(x[2]), detach(x[3]),
                                                         detach(x[4]), detach(x[5]), params)
                 .lse;
           }};
  c.gradcheck = false;
  return c;
}

struct Inputs {
  Tensor q, k, v, r, u, w;
  std::vector<Tensor> all() const { return {q, k, v, r, u, w}; }
};

// Normal inputs of `dtype` on `device`, leaves that require grad when asked.
Inputs random_inputs(std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk, std::int64_t d, std::int64_t dv,
                     std::uint64_t seed, DType dtype = DType::Float64, Device device = Device::cpu(),
                     bool requires_grad = true) {
  const TensorOptions opt{.dtype = dtype};
  Generator g(seed);
  Inputs in{rand_normal({b, h, tq, d}, 0, 1, opt, g),  rand_normal({b, h, tk, d}, 0, 1, opt, g),
            rand_normal({b, h, tk, dv}, 0, 1, opt, g), rand_normal({h, tk, d}, 0, 1, opt, g),
            rand_normal({h, d}, 0, 1, opt, g),         rand_normal({h, d}, 0, 1, opt, g)};
  for (Tensor* t : {&in.q, &in.k, &in.v, &in.r, &in.u, &in.w}) {
    *t = to_device(*t, device);
    if (requires_grad) t->set_requires_grad();
  }
  return in;
}

const char* const kInputNames[] = {"q", "k", "v", "r", "u", "w"};

}  // namespace

TEST_CASE("ops: flash_rel_attention", "[ops][harness][flash_rel_attention][family:flash_rel_attention]") {
  define::test::run_op_cases({
      flash_rel_case("B1_H1_T1_d1", inputs(1, 1, 1, 1, 1, 1), {}),
      flash_rel_case("no_memory_B2_H2_T6_d3_dv2", inputs(2, 2, 6, 6, 3, 2), {}),
      // A memory longer than the segment: the queries are the last 5 of 13 positions.
      flash_rel_case("memory_Tq5_Tk13_d4_dv3", inputs(2, 2, 5, 13, 4, 3), {}),
      flash_rel_case("scale_0.7_Tq3_Tk5", inputs(1, 2, 3, 5, 4, 2), {.scale = 0.7}),
      // same_length: every query sees the same number of keys.
      flash_rel_case("same_length_window4_Tq4_Tk8", inputs(2, 2, 4, 8, 3, 2), {.window = 4}),
      flash_rel_case("window3_Tq5_Tk9", inputs(1, 2, 5, 9, 3, 2), {.window = 3}),
      // A window of 1 leaves only the key at distance 0: P is one-hot.
      flash_rel_case("window1_Tq3_Tk6", inputs(1, 2, 3, 6, 2, 2), {.window = 1}),
      flash_rel_case("window_past_Tk", inputs(1, 1, 4, 6, 3, 2), {.window = 50}),
      flash_rel_case("odd_B3_H1_Tq7_Tk11_d5_dv3", inputs(3, 1, 7, 11, 5, 3), {.window = 6}),
      flash_rel_case("non_contiguous_window4", inputs(2, 2, 5, 8, 4, 3, true), {.window = 4}),
      flash_rel_case("decode_Tq1_Tk9", inputs(3, 2, 1, 9, 4, 3), {}),
      flash_rel_case("decode_Tq1_Tk9_window4", inputs(2, 1, 1, 9, 3, 2), {.window = 4}),
  });
}

TEST_CASE("ops: flash_rel_attention dropout", "[ops][harness][flash_rel_attention][family:flash_rel_attention]") {
  define::test::run_op_cases({
      flash_rel_case("dropout0.3", inputs(1, 2, 3, 5, 4, 3), {.dropout = 0.3}),
      flash_rel_case("dropout0.5_window2", inputs(2, 1, 4, 7, 3, 2), {.window = 2, .dropout = 0.5}),
      flash_rel_case("dropout1_all_dropped", inputs(1, 1, 2, 3, 2, 2), {.dropout = 1.0}),
      flash_rel_case("dropout0.2_Tq21_Tk37_window15", inputs(2, 2, 21, 37, 8, 4),
                     {.window = 15, .dropout = 0.2, .seed = 5}, false),
      flash_rel_case("dropout0.1_Tq5_Tk40_non_contiguous", inputs(1, 3, 5, 40, 4, 3, true), {.dropout = 0.1}, false),
  });
}

// Sizes past one tile of every CUDA configuration (largest head dim 32, 64, 128), partial tiles,
// the decode case against a long memory, d != dv.
TEST_CASE("ops: flash_rel_attention tiles and head dims",
          "[ops][harness][flash_rel_attention][family:flash_rel_attention]") {
  define::test::run_op_cases({
      flash_rel_case("Tq70_Tk75_d8", inputs(1, 1, 70, 75, 8, 8), {}, false),
      flash_rel_case("Tq40_Tk90_d40_dv24_window33", inputs(1, 2, 40, 90, 40, 24), {.window = 33}, false),
      flash_rel_case("Tq33_Tk40_d64_dropout", inputs(1, 1, 33, 40, 64, 64), {.dropout = 0.1, .seed = 3}, false),
      flash_rel_case("Tq18_Tk35_d96_dv128", inputs(1, 1, 18, 35, 96, 128), {}, false),
      flash_rel_case("Tq17_Tk17_d128_dv40_window9", inputs(1, 1, 17, 17, 128, 40), {.window = 9}, false),
      flash_rel_case("decode_Tq1_Tk150_d64_window100", inputs(2, 1, 1, 150, 64, 64), {.window = 100}, false),
  });
}

TEST_CASE("ops: flash_rel_attention row log-sum-exp",
          "[ops][harness][flash_rel_attention][family:flash_rel_attention]") {
  define::test::run_op_cases({
      lse_case("memory_Tq5_Tk13", inputs(2, 2, 5, 13, 4, 3), {}),
      lse_case("window3_Tq5_Tk9", inputs(1, 2, 5, 9, 3, 2), {.window = 3}),
      lse_case("decode_Tq1_Tk9", inputs(3, 2, 1, 9, 4, 3), {.scale = 0.6}),
      lse_case("Tq70_Tk75_d40_window20_dropout", inputs(1, 2, 70, 75, 40, 8), {.window = 20, .dropout = 0.3}),
  });
}

// The op is relative_attention computed another way: the same outputs and gradients, the same
// dropout mask (both draw B*H*Tq*Tk words from the generator, so it is left where the unfused op
// leaves it), on the reference and the CPU backend.
TEST_CASE("flash_rel_attention: equals relative_attention on the CPU backends, dropout mask included",
          "[ops][flash_rel_attention][family:flash_rel_attention]") {
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    for (const std::int64_t window : {std::int64_t{0}, std::int64_t{4}}) {
      for (const double p : {0.0, 0.25}) {
        for (const std::int64_t tq : {std::int64_t{6}, std::int64_t{9}}) {  // memory of 3, and none
          const Inputs in = random_inputs(3, 2, tq, 9, 5, 4, 3);
          Generator data(4);
          const Tensor up = rand_normal({3, 2, tq, 4}, 0, 1, {.dtype = DType::Float64}, data);
          const Setup s{.window = window, .dropout = p};
          Generator g1(77), g2(77);
          const Tensor flash = flash_relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, options(s, g1));
          const Tensor unfused =
              relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, options(s, g2, AttentionKernel::Unfused));
          INFO("backend " << (backend == kernels::Backend::Ref ? "ref" : "cpu") << ", window " << window << ", dropout "
                          << p << ", Tq " << tq);
          CHECK(g1.state().offset == g2.state().offset);
          check_close(values(flash), values(unfused), 1e-13, 0, "out");
          const std::vector<Tensor> ga = grad(flash, in.all(), up), gb = grad(unfused, in.all(), up);
          for (std::size_t t = 0; t < 6; ++t)
            check_close(values(ga[t]), values(gb[t]), 1e-12, 0, std::string("grad ") + kInputNames[t]);
        }
      }
    }
  }
}

// The fused CUDA kernels (on the emulated device) against the unfused ones, float32: outputs,
// gradients, the dropout mask and the generator offsets; and relative_attention's Auto dispatch.
TEST_CASE("flash_rel_attention: equals relative_attention on the emulated device, dropout mask included",
          "[ops][flash_rel_attention][family:flash_rel_attention]") {
  REQUIRE(kernels::register_devices().emu);
  struct Config {
    std::int64_t b, h, tq, tk, d, dv, window;
    double p;
  };
  for (const Config& c : {Config{2, 2, 5, 13, 4, 3, 0, 0.0}, Config{1, 2, 6, 6, 8, 5, 0, 0.3},
                          Config{2, 1, 7, 20, 16, 8, 5, 0.25}, Config{1, 1, 1, 23, 40, 24, 0, 0.4}}) {
    const Inputs in = random_inputs(c.b, c.h, c.tq, c.tk, c.d, c.dv, 5, DType::Float32, Device::emu());
    Generator data(6);
    const Tensor up = to_device(rand_normal({c.b, c.h, c.tq, c.dv}, 0, 1, {}, data), Device::emu());
    const Setup s{.window = c.window, .dropout = c.p};
    Generator g1(91), g2(91);
    const Tensor flash = flash_relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, options(s, g1));
    const Tensor unfused =
        relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, options(s, g2, AttentionKernel::Unfused));
    INFO("B" << c.b << " H" << c.h << " Tq" << c.tq << " Tk" << c.tk << " d" << c.d << " dv" << c.dv << " window "
             << c.window << " p " << c.p);
    CHECK(flash.device() == Device::emu());
    CHECK(g1.state().offset == g2.state().offset);
    check_close(values(flash), values(unfused), 1e-5, 1e-5, "out");
    const std::vector<Tensor> ga = grad(flash, in.all(), up), gb = grad(unfused, in.all(), up);
    for (std::size_t t = 0; t < 6; ++t)
      check_close(values(ga[t]), values(gb[t]), 5e-5, 1e-5, std::string("grad ") + kInputNames[t]);
    if (default_attention_kernel() == AttentionKernel::Auto) {  // Auto on emu float32: the fused kernels
      Generator g3(91);
      CHECK(values(relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, options(s, g3))) == values(flash));
    }
  }
}

// 16-bit inputs are widened exactly, computed in float32 and out rounded once (lse stays float32):
// exactly the float32 result of the widened inputs, rounded; and close to the unfused op's 16-bit
// result.
TEST_CASE("flash_rel_attention: 16-bit inputs on the emulated device",
          "[ops][flash_rel_attention][family:flash_rel_attention]") {
  REQUIRE(kernels::register_devices().emu);
  for (const DType dtype : {DType::Float16, DType::BFloat16}) {
    const double eps = dtype == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
    const Inputs wide = random_inputs(2, 2, 5, 11, 8, 6, 12, DType::Float32, Device::emu(), false);
    std::vector<Tensor> x16, x32;  // the 16-bit inputs, and the same values in float32
    for (const Tensor& t : wide.all()) {
      x16.push_back(to_dtype(t, dtype).set_requires_grad());
      x32.push_back(to_dtype(detach(x16.back()), DType::Float32).set_requires_grad());
    }
    INFO("dtype " << dtype_name(dtype));
    const kernels::RelAttentionParams params{.window = 7, .scale = 0.4, .dropout = 0.2, .seed = 8, .offset = 4};
    const kernels::FlashAttentionOutput f16 = kernels::flash_rel_attention_forward(
        detach(x16[0]), detach(x16[1]), detach(x16[2]), detach(x16[3]), detach(x16[4]), detach(x16[5]), params);
    const kernels::FlashAttentionOutput f32 = kernels::flash_rel_attention_forward(
        detach(x32[0]), detach(x32[1]), detach(x32[2]), detach(x32[3]), detach(x32[4]), detach(x32[5]), params);
    CHECK(f16.out.dtype() == dtype);
    CHECK(f16.lse.dtype() == DType::Float32);
    CHECK(values(f16.out) == values(to_dtype(f32.out, dtype)));
    CHECK(values(f16.lse) == values(f32.lse));

    const Setup s{.window = 7, .dropout = 0.2};
    Generator g1(5), g2(5), g3(5);
    const Tensor flash = flash_relative_attention(x16[0], x16[1], x16[2], x16[3], x16[4], x16[5], options(s, g1));
    const Tensor unfused =
        relative_attention(x16[0], x16[1], x16[2], x16[3], x16[4], x16[5], options(s, g2, AttentionKernel::Unfused));
    const Tensor flash32 = flash_relative_attention(x32[0], x32[1], x32[2], x32[3], x32[4], x32[5], options(s, g3));
    CHECK(flash.dtype() == dtype);
    CHECK(g1.state().offset == g2.state().offset);
    check_close(values(flash), values(unfused), 8 * eps, 8 * eps, "out against the unfused op");
    Generator data(13);
    const Tensor up32 = to_device(rand_normal(flash.shape(), 0, 1, {}, data), Device::emu());
    const Tensor up16 = to_dtype(up32, dtype);
    const std::vector<Tensor> ga = grad(flash, x16, up16), gb = grad(flash32, x32, to_dtype(up16, DType::Float32));
    for (std::size_t t = 0; t < 6; ++t) {
      CHECK(ga[t].dtype() == dtype);
      check_close(values(ga[t]), values(gb[t]), 8 * eps, 8 * eps, std::string("grad ") + kInputNames[t]);
    }
  }
}

// With r, u and w zero the position term and the biases vanish: s_ij = scale * q_i . k_j over the
// keys j <= i + M, which is causal flash_attention (the window off), out, lse and the gradients of
// q, k and v alike, on every backend.
TEST_CASE("flash_rel_attention: with r, u and w zero it is causal flash_attention",
          "[ops][flash_rel_attention][family:flash_rel_attention]") {
  REQUIRE(kernels::register_devices().emu);
  for (const char* path : {"ref", "cpu", "emu"}) {
    kernels::CpuBackendGuard guard(path[0] == 'r' ? kernels::Backend::Ref : kernels::Backend::Cpu);
    const bool emu = path[0] == 'e';
    const DType dtype = emu ? DType::Float32 : DType::Float64;
    const double tol = emu ? 2e-5 : 1e-12;
    Inputs in = random_inputs(2, 3, 4, 10, 5, 3, 17, dtype, emu ? Device::emu() : Device::cpu());
    for (Tensor* t : {&in.r, &in.u, &in.w})
      *t = zeros(t->shape(), {.dtype = dtype, .device = t->device()}).set_requires_grad();
    Generator g1(2), g2(2);
    const Tensor rel = flash_relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, {.dropout = 0.3, .generator = &g1});
    const Tensor plain = flash_attention(in.q, in.k, in.v, {.causal = true, .dropout = 0.3, .generator = &g2});
    INFO("on " << path);
    check_close(values(rel), values(plain), tol, tol, "out");
    const kernels::FlashAttentionOutput rel_fw = kernels::flash_rel_attention_forward(
        detach(in.q), detach(in.k), detach(in.v), in.r, in.u, in.w, {.scale = 0.5});
    const kernels::FlashAttentionOutput plain_fw =
        kernels::flash_attention_forward(detach(in.q), detach(in.k), detach(in.v), {.causal = true}, 0.5);
    CHECK(rel_fw.lse.dtype() == dtype);
    check_close(values(rel_fw.lse), values(plain_fw.lse), tol, tol, "lse");
    Generator data(3);
    const Tensor up = to_device(rand_normal(rel.shape(), 0, 1, {.dtype = dtype}, data), rel.device());
    const std::vector<Tensor> ga = grad(rel, {in.q, in.k, in.v}, up), gb = grad(plain, {in.q, in.k, in.v}, up);
    for (std::size_t t = 0; t < 3; ++t)
      check_close(values(ga[t]), values(gb[t]), tol, tol, std::string("grad ") + kInputNames[t]);
  }
}

// An op whose inputs only partly require grad computes only those gradients (the backends get
// undefined outputs for the rest), with the values of the full computation.
TEST_CASE("flash_rel_attention: partial gradient requests", "[ops][flash_rel_attention][family:flash_rel_attention]") {
  REQUIRE(kernels::register_devices().emu);
  for (const char* path : {"ref", "cpu", "emu"}) {
    kernels::CpuBackendGuard guard(path[0] == 'r' ? kernels::Backend::Ref : kernels::Backend::Cpu);
    const bool emu = path[0] == 'e';
    const Inputs in =
        random_inputs(2, 2, 4, 7, 3, 2, 8, emu ? DType::Float32 : DType::Float64, emu ? Device::emu() : Device::cpu());
    const auto run = [](const std::vector<Tensor>& x) {
      Generator g(3);
      return flash_relative_attention(x[0], x[1], x[2], x[3], x[4], x[5],
                                      {.window = 3, .dropout = 0.2, .generator = &g});
    };
    const std::vector<Tensor> full = grad(sum(run(in.all())), in.all());
    const std::vector<std::vector<std::size_t>> subsets{{0}, {1}, {2}, {3}, {4}, {5}, {3, 5}, {0, 4}, {1, 2}, {4, 5}};
    for (const std::vector<std::size_t>& subset : subsets) {
      std::vector<Tensor> x;  // the same values; only the inputs of the subset require grad
      for (const Tensor& t : in.all()) x.push_back(detach(t));
      std::vector<Tensor> wrt;
      for (std::size_t t : subset) wrt.push_back(x[t].set_requires_grad());
      const std::vector<Tensor> g = grad(sum(run(x)), wrt);
      for (std::size_t i = 0; i < subset.size(); ++i) {
        INFO("on " << path << ": input " << kInputNames[subset[i]] << " of a subset of " << subset.size());
        check_close(values(g[i]), values(full[subset[i]]), emu ? 1e-5 : 1e-14, emu ? 1e-5 : 1e-14);
      }
    }
  }
}

// Tq == 0 (memory only) and B == 0: empty outputs, and the gradients of what has elements are zero.
TEST_CASE("flash_rel_attention: no queries or no batch", "[ops][flash_rel_attention][family:flash_rel_attention]") {
  for (const auto& [b, tq] : {std::pair<std::int64_t, std::int64_t>{2, 0}, {0, 3}}) {
    const Inputs in = random_inputs(b, 2, tq, 5, 3, 4, 1);
    const Tensor y = flash_relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, {.dropout = 0.2});
    CHECK(y.shape() == Shape{b, 2, tq, 4});
    const kernels::FlashAttentionOutput fw = kernels::flash_rel_attention_forward(
        detach(in.q), detach(in.k), detach(in.v), detach(in.r), detach(in.u), detach(in.w), {.scale = 1.0});
    CHECK(fw.lse.shape() == Shape{b, 2, tq});
    const std::vector<Tensor> g = grad(sum(y), in.all());
    const std::vector<Tensor> all = in.all();
    for (std::size_t t = 0; t < 6; ++t) {
      CHECK(g[t].shape() == all[t].shape());
      for (double x : values(g[t])) CHECK(x == 0.0);
    }
  }
}

TEST_CASE("flash_rel_attention: errors name the operands", "[ops][flash_rel_attention][family:flash_rel_attention]") {
  const Tensor q = zeros({2, 3, 4, 5}), k = zeros({2, 3, 6, 5}), v = zeros({2, 3, 6, 7});
  const Tensor r = zeros({3, 6, 5}), u = zeros({3, 5}), w = zeros({3, 5});
  CHECK_THROWS_WITH(flash_relative_attention(q, k, v, zeros({3, 5, 5}), u, w), Contains("flash_rel_attention") &&
                                                                                   Contains("shapes do not match") &&
                                                                                   Contains("r [3,5,5] [H, Tk, d]"));
  CHECK_THROWS_WITH(flash_relative_attention(q, k, v, r, zeros({2, 5}), w), Contains("u [2,5] and w [3,5] [H, d]"));
  CHECK_THROWS_WITH(flash_relative_attention(q, k, zeros({2, 3, 5, 7}), r, u, w), Contains("v [2,3,5,7]"));
  CHECK_THROWS_WITH(flash_relative_attention(q, k, v, r, zeros({15}), w), Contains("ranks do not match"));
  CHECK_THROWS_WITH(flash_relative_attention(zeros({2, 3, 8, 5}), k, v, r, u, w),
                    Contains("k [2,3,6,5] has fewer keys than q [2,3,8,5] has queries"));
  CHECK_THROWS_WITH(flash_relative_attention(q, k, v, r, u, w, {.window = -1}),
                    Contains("flash_rel_attention") && Contains("window -1 is negative"));
  CHECK_THROWS_WITH(flash_relative_attention(q, k, v, r, u, w, {.dropout = 1.5}),
                    Contains("flash_relative_attention") && Contains("dropout 1.5 is outside"));
  CHECK_THROWS_WITH(flash_relative_attention(q, k, v, r, u, zeros({3, 5}, {.dtype = DType::Float64})),
                    Contains("dtypes"));
  CHECK_THROWS_WITH(kernels::flash_rel_attention_forward(q, k, v, r, u, w, {.scale = INFINITY}),
                    Contains("scale inf is not finite"));
  const kernels::FlashAttentionOutput f = kernels::flash_rel_attention_forward(q, k, v, r, u, w, {.scale = 1.0});
  CHECK(f.lse.shape() == Shape{2, 3, 4});
  CHECK_THROWS_WITH(
      kernels::flash_rel_attention_backward(zeros({2, 3, 4, 7}), q, k, v, r, u, w, f.out, zeros({2, 3, 5}), {}, {}),
      Contains("lse [2,3,5] must be [B, H, Tq] = [2,3,4]"));
  CHECK_THROWS_WITH(kernels::flash_rel_attention_backward(zeros({2, 3, 4, 6}), q, k, v, r, u, w, f.out, f.lse, {}, {}),
                    Contains("grad_out [2,3,4,6]"));
}
