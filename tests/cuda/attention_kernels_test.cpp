// CUDA attention row kernels (kernels/cuda/attention.cu) on the emulated device, for what the op
// harness cannot express: bit-identical results under every emulator schedule (warp shuffles,
// shared memory behind barriers, passes that read back their own writes), the whole op at larger
// shapes against the reference, the dropout mask identical to the CPU paths and to the dropout
// family's contract, and the zero rows of fully masked queries.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "harness/op_harness.h"
#include "kernels/attention.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/dropout.h"
#include "support/common.h"
#include "support/emulated_device.h"

using namespace define;
using define::test::check_close;
using define::test::check_identical;
using define::test::on_cpu_backend;
using define::test::run_all_schedules;
using test::kernel_test_device;
using test::to_test_device;

namespace {

void register_emu() {
  static const kernels::DeviceAvailability devices = kernels::register_devices();
  REQUIRE(devices.emu);
}

using define::test::values;

// [B, Tk] int32: batch b pads keys j with (j + b) % 5 == 2, and the last batch pads every key.
Tensor padding(std::int64_t b, std::int64_t tk) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(b * tk));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < tk; ++j)
      m[static_cast<std::size_t>(i * tk + j)] = (i == b - 1 || (j + i) % 5 == 2) ? 1 : 0;
  return from_vector(m, Shape{b, tk});
}

kernels::AttentionMasking masking(const Tensor& pad, bool causal, double p) {
  return {.key_padding_mask = pad, .causal = causal, .dropout = p, .seed = 0xfeedbeef12ull, .offset = 12};
}

// Forward and backward row kernels on emulated scores; probs, dropped, grad_scores and the rebuilt
// D as one list.
std::vector<Tensor> row_kernels(const Tensor& scores, const Tensor& grad, const kernels::AttentionMasking& m) {
  const kernels::AttentionProbs f = kernels::attention_softmax(scores, m);
  const kernels::AttentionSoftmaxGrad b = kernels::attention_softmax_backward(f.probs, grad, m, 0.5);
  return {f.probs, f.dropped, b.grad_scores, b.dropped};
}

void check_schedules(const Shape& shape, bool causal, double p) {
  Generator gen(4);
  const Tensor scores = to_test_device(rand_uniform(shape, -3, 3, {}, gen));
  const Tensor grad = to_test_device(rand_uniform(shape, -1, 1, {}, gen));
  const kernels::AttentionMasking m = masking(to_test_device(padding(shape[0], shape[3])), causal, p);
  for (std::size_t i = 0; i < 4; ++i) {
    run_all_schedules([&] { return row_kernels(scores, grad, m)[i]; },
                      "row kernel output " + std::to_string(i) + " of " + shape_str(shape));
  }
}

}  // namespace

TEST_CASE("attention kernels: bit-identical under every emulator schedule", "[cuda][attention][family:attention]") {
  register_emu();
  check_schedules({2, 2, 5, 70}, true, 0.3);   // one warp per row, partial warps
  check_schedules({2, 1, 3, 45}, false, 0.0);  // no dropout: the plain strided loops
  check_schedules({2, 1, 2, 1500}, true, 0.2);  // one block per row
}

TEST_CASE("attention kernels: the whole op at larger shapes against the reference",
          "[cuda][attention][family:attention]") {
  register_emu();
  struct Shapes {
    std::int64_t b, h, tq, tk, d, dv;
    bool causal;
    double p;
  };
  for (const Shapes s : {Shapes{2, 4, 64, 96, 32, 24, true, 0.1}, Shapes{3, 2, 33, 257, 16, 8, false, 0.0},
                         Shapes{2, 2, 6, 1300, 8, 4, true, 0.25}}) {
    Generator gen(9);
    const Tensor q = rand_uniform({s.b, s.h, s.tq, s.d}, -1, 1, {}, gen);
    const Tensor k = rand_uniform({s.b, s.h, s.tk, s.d}, -1, 1, {}, gen);
    const Tensor v = rand_uniform({s.b, s.h, s.tk, s.dv}, -1, 1, {}, gen);
    const Tensor up = rand_uniform({s.b, s.h, s.tq, s.dv}, -1, 1, {}, gen);
    const kernels::AttentionMasking m = masking(padding(s.b, s.tk), s.causal, s.p);
    const double scale = 1.0 / std::sqrt(double(s.d));
    const std::string what = fmt::format("B{} H{} Tq{} Tk{} d{}", s.b, s.h, s.tq, s.tk, s.d);

    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    const kernels::AttentionOutput ref = kernels::attention_forward(q, k, v, m, scale, true);
    const kernels::AttentionGrads ref_g = kernels::attention_backward(up, q, k, v, ref.probs, m, scale, true, true, true);
    const kernels::AttentionOutput emu =
        kernels::attention_forward(to_test_device(q), to_test_device(k), to_test_device(v), m, scale, true);
    const kernels::AttentionGrads emu_g =
        kernels::attention_backward(to_test_device(up), to_test_device(q), to_test_device(k), to_test_device(v),
                                    emu.probs, m, scale, true, true, true);
    check_close(emu.out, ref.out, 1e-5, 1e-5, what + " out");
    check_close(emu.probs, ref.probs, 1e-5, 1e-5, what + " probs");
    check_close(emu_g.grad_q, ref_g.grad_q, 1e-5, 1e-5, what + " grad_q");
    check_close(emu_g.grad_k, ref_g.grad_k, 1e-5, 1e-5, what + " grad_k");
    check_close(emu_g.grad_v, ref_g.grad_v, 1e-5, 1e-5, what + " grad_v");
  }
}

TEST_CASE("attention kernels: a decoding step, one query over a key / value cache, on every backend",
          "[cuda][attention][family:attention]") {
  // What beam search runs per decoder layer and step (nn::TransformerDecoderLayer::forward_step):
  // Tq = 1 against the cached keys, a padding mask (encoder attention), no causal mask, keys and
  // values read through non-contiguous views as the cache's head split leaves them.
  register_emu();
  for (const std::int64_t tk : {std::int64_t{1}, std::int64_t{7}, std::int64_t{40}, std::int64_t{1100}}) {
    Generator gen(21);
    const Tensor q = rand_uniform({3, 4, 1, 16}, -1, 1, {}, gen);
    const Tensor k_rows = rand_uniform({3, tk, 4, 16}, -1, 1, {}, gen), v_rows = rand_uniform({3, tk, 4, 8}, -1, 1, {}, gen);
    const Tensor k = permute(k_rows, {0, 2, 1, 3}), v = permute(v_rows, {0, 2, 1, 3});
    const Tensor emu_k = permute(to_test_device(k_rows), {0, 2, 1, 3}),
                 emu_v = permute(to_test_device(v_rows), {0, 2, 1, 3});
    const kernels::AttentionMasking m{.key_padding_mask = padding(3, tk)};
    const double scale = 0.25;
    const std::string what = "decoding step over " + std::to_string(tk) + " keys";
    kernels::AttentionOutput ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = kernels::attention_forward(q, k, v, m, scale, false);
    }
    kernels::AttentionOutput cpu;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Cpu);
      cpu = kernels::attention_forward(q, k, v, m, scale, false);
    }
    const kernels::AttentionOutput emu = kernels::attention_forward(to_test_device(q), emu_k, emu_v, m, scale, false);
    check_close(cpu.out, ref.out, 1e-5, 1e-5, what + ", cpu");
    check_close(emu.out, ref.out, 1e-5, 1e-5, what + ", emu");
    run_all_schedules([&] { return kernels::attention_forward(to_test_device(q), emu_k, emu_v, m, scale, false).out; },
                      what);

    // The step equals the last row of a causal pass whose queries end with it.
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    const Tensor all_q = concat({rand_uniform({3, 4, tk - 1, 16}, -1, 1, {}, gen), q}, 2);
    const kernels::AttentionMasking causal{.key_padding_mask = m.key_padding_mask, .causal = true};
    const Tensor full = kernels::attention_forward(all_q, k, v, causal, scale, false).out;
    check_close(ref.out, contiguous(narrow(full, 2, tk - 1, 1)), 1e-6, 1e-5, what + ", last row of the causal pass");
  }
}

TEST_CASE("attention kernels: float64 row kernels against the reference", "[cuda][attention][family:attention]") {
  register_emu();
  for (const std::int64_t tk : {std::int64_t{45}, std::int64_t{1030}}) {
    Generator gen(6);
    const Shape shape{2, 2, 3, tk};
    const TensorOptions f64{.dtype = DType::Float64};
    const Tensor scores = rand_uniform(shape, -3, 3, f64, gen), grad = rand_uniform(shape, -1, 1, f64, gen);
    const kernels::AttentionMasking m = masking(padding(2, tk), true, 0.2);
    const std::vector<Tensor> emu = row_kernels(to_test_device(scores), to_test_device(grad), m);
    std::vector<Tensor> ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = row_kernels(scores, grad, m);
    }
    const char* names[] = {"probs", "dropped", "grad_scores", "rebuilt dropped"};
    for (std::size_t i = 0; i < 4; ++i)
      check_close(emu[i], ref[i], 1e-13, 1e-12, std::string("float64 ") + names[i] + ", Tk " + std::to_string(tk));
  }
}

TEST_CASE("attention kernels: the dropout mask equals the CPU paths' and the dropout contract",
          "[cuda][attention][family:attention]") {
  register_emu();
  for (const std::int64_t tk : {std::int64_t{77}, std::int64_t{1100}}) {
    Generator gen(5);
    const Shape shape{2, 3, 4, tk};
    const Tensor scores = rand_uniform(shape, -2, 2, {}, gen);
    const kernels::AttentionMasking m = masking(padding(2, tk), true, 0.35);
    const kernels::AttentionProbs emu = kernels::attention_softmax(to_test_device(scores), m);
    // The kept pattern (D != 0 where P > 0; masked entries are 0 everywhere) on every backend.
    const auto kept = [](const Tensor& d) {
      std::vector<int> k;
      for (double x : values(d)) k.push_back(x != 0.0);
      return k;
    };
    const auto on = [&](kernels::Backend b) {
      return on_cpu_backend(b, [&] { return kernels::attention_softmax(scores, m).dropped; });
    };
    const std::vector<int> emu_kept = kept(emu.dropped);
    CHECK(emu_kept == kept(on(kernels::Backend::Cpu)));
    CHECK(emu_kept == kept(on(kernels::Backend::Ref)));
    // D is dropout_apply(P) bit for bit, on the emulated device's own dropout kernel too.
    check_identical(emu.dropped, kernels::dropout_apply(emu.probs, m.dropout, m.seed, m.offset),
                    "D == dropout_apply(P), Tk " + std::to_string(tk));
    // And the backward kernel rebuilds the same D.
    const kernels::AttentionSoftmaxGrad g = kernels::attention_softmax_backward(emu.probs, emu.probs, m, 1.0);
    check_identical(g.dropped, emu.dropped, "D rebuilt by the backward kernel, Tk " + std::to_string(tk));
  }
}

TEST_CASE("attention kernels: fully masked rows are exact zeros, forward and backward",
          "[cuda][attention][family:attention]") {
  register_emu();
  // Batch 0 pads every key. In batch 1, query 2's scores are all -inf (only infinite inputs make
  // such a row; it counts as fully masked, as on the CPU paths). Causal or not, both stay zero.
  std::vector<float> s(2 * 1 * 3 * 4, 0.5f);
  for (std::size_t j = 0; j < 4; ++j) s[12 + 2 * 4 + j] = -std::numeric_limits<float>::infinity();
  const Tensor scores = from_vector(s, Shape{2, 1, 3, 4});
  const Tensor pad = from_vector(std::vector<std::int32_t>{1, 1, 1, 1, 0, 0, 0, 0}, Shape{2, 4});
  for (const bool causal : {false, true}) {
    const kernels::AttentionMasking m{.key_padding_mask = pad, .causal = causal};
    const Tensor emu = kernels::attention_softmax(to_test_device(scores), m).probs;
    const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::attention_softmax(scores, m).probs; });
    const Tensor cpu = on_cpu_backend(kernels::Backend::Cpu, [&] { return kernels::attention_softmax(scores, m).probs; });
    const std::vector<double> p = values(emu);
    for (std::size_t i = 0; i < 12; ++i) CHECK(p[i] == 0.0);   // batch 0: all padded
    for (std::size_t i = 20; i < 24; ++i) CHECK(p[i] == 0.0);  // batch 1, query 2: all -inf
    check_close(emu, ref, 1e-5, 1e-5, causal ? "causal probs vs ref" : "probs vs ref");
    check_close(cpu, ref, 1e-5, 1e-5, causal ? "causal probs, cpu vs ref" : "probs, cpu vs ref");
    const std::vector<double> g =
        values(kernels::attention_softmax_backward(emu, to_test_device(ones_like(scores)), m, 1.0).grad_scores);
    for (double x : g) CHECK(std::isfinite(x));
    for (std::size_t i = 0; i < 12; ++i) CHECK(g[i] == 0.0);
    for (std::size_t i = 20; i < 24; ++i) CHECK(g[i] == 0.0);
  }
}

// Mixed precision's attention: 16-bit q, k, v on the GPUs run the whole op in their format (GEMMs
// with float accumulation, the row kernel reading and writing 16-bit scores and computing in float):
// as many launches as in float32, where widening would add casts around the row kernel, and results
// within a few roundings of the reference (exact upcast, float64, one rounding per result; the
// native op also rounds the scores, P and dS once each).
TEST_CASE("attention kernels: 16-bit q, k, v run natively, as many launches as float32",
          "[cuda][attention][family:attention][float16]") {
  register_emu();
  Generator gen(17);
  const std::int64_t b = 2, h = 2, tq = 17, tk = 40, d = 16, dv = 8;
  const Tensor q32 = rand_uniform({b, h, tq, d}, -1, 1, {}, gen), k32 = rand_uniform({b, h, tk, d}, -1, 1, {}, gen);
  const Tensor v32 = rand_uniform({b, h, tk, dv}, -1, 1, {}, gen), up32 = rand_uniform({b, h, tq, dv}, -1, 1, {}, gen);
  const kernels::AttentionMasking m = masking(padding(b, tk), true, 0.1);
  const double scale = 0.25;
  struct Run {
    std::vector<Tensor> results;
    std::uint64_t launches;
  };
  const auto run = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& up) {
    const std::uint64_t before = kernels::emu_kernel_launches();
    const kernels::AttentionOutput f = kernels::attention_forward(q, k, v, m, scale, true);
    const kernels::AttentionGrads g = kernels::attention_backward(up, q, k, v, f.probs, m, scale, true, true, true);
    return Run{{f.out, f.probs, g.grad_q, g.grad_k, g.grad_v}, kernels::emu_kernel_launches() - before};
  };
  const Run f32 = run(to_test_device(q32), to_test_device(k32), to_test_device(v32), to_test_device(up32));
  const char* names[] = {"out", "probs", "grad_q", "grad_k", "grad_v"};
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    const Tensor q = kernels::cast(q32, dt), k = kernels::cast(k32, dt), v = kernels::cast(v32, dt),
                 up = kernels::cast(up32, dt);
    const Run emu = run(to_test_device(q), to_test_device(k), to_test_device(v), to_test_device(up));
    CHECK(emu.launches == f32.launches);
    const Run ref = [&] {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      return run(q, k, v, up);
    }();
    const double eps = dt == DType::Float16 ? 0.0009765625 : 0.0078125;
    for (std::size_t i = 0; i < ref.results.size(); ++i) {
      CHECK(emu.results[i].dtype() == dt);
      check_close(emu.results[i], ref.results[i], 4 * eps, 4 * eps, names[i]);
    }
  }
}
