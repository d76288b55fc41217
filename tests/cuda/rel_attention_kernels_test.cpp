// CUDA relative-attention kernels (kernels/cuda/rel_attention.cu) on the emulated device, for what
// the op harness cannot express: bit-identical results under every emulator schedule (warp
// shuffles, shared memory behind barriers), the whole op forward and backward at larger shapes
// against the reference (rows past 1024 keys for the block-per-row path), float64 row kernels,
// the dropout mask identical to the CPU paths and to the dropout family's contract, and rows
// whose visible scores are all -inf (only infinite inputs make one: every row sees the key at
// distance 0) coming out as exact zeros.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/factory.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/dropout.h"
#include "kernels/rel_attention.h"
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

kernels::RelAttentionParams params(std::int64_t window, double p, double scale = 0.6) {
  return {.window = window, .scale = scale, .dropout = p, .seed = 0xfeedbeef12ull, .offset = 12};
}

// The forward row kernel and the unshift on emulated tensors: P, D and dBD (of grad) as one list.
std::vector<Tensor> row_kernels(const Tensor& ac, const Tensor& bd, const Tensor& grad,
                                const kernels::RelAttentionParams& pr) {
  const kernels::AttentionProbs f = kernels::rel_attention_softmax(ac, bd, pr);
  return {f.probs, f.dropped, kernels::rel_attention_unshift(grad)};
}

void check_schedules(const Shape& shape, std::int64_t window, double p) {
  Generator gen(4);
  const Tensor ac = to_test_device(rand_uniform(shape, -3, 3, {}, gen)),
               bd = to_test_device(rand_uniform(shape, -3, 3, {}, gen));
  const Tensor grad = to_test_device(rand_uniform(shape, -1, 1, {}, gen));
  for (std::size_t i = 0; i < 3; ++i)
    run_all_schedules([&] { return row_kernels(ac, bd, grad, params(window, p))[i]; },
                      "row kernel output " + std::to_string(i) + " of " + shape_str(shape));
}

}  // namespace

TEST_CASE("rel_attention kernels: bit-identical under every emulator schedule",
          "[cuda][rel_attention][family:rel_attention]") {
  register_emu();
  check_schedules({2, 2, 5, 70}, 0, 0.3);      // one warp per row, partial warps
  check_schedules({2, 1, 3, 45}, 7, 0.0);      // a window, no dropout: the plain strided loops
  check_schedules({1, 2, 2, 1500}, 1200, 0.2);  // one block per row
}

TEST_CASE("rel_attention kernels: the whole op at larger shapes against the reference",
          "[cuda][rel_attention][family:rel_attention]") {
  register_emu();
  struct Shapes {
    std::int64_t b, h, tq, tk, d, dv, window;
    double p;
  };
  for (const Shapes s : {Shapes{2, 4, 64, 128, 32, 24, 0, 0.1}, Shapes{3, 2, 33, 257, 16, 8, 40, 0.0},
                         Shapes{1, 2, 6, 1300, 8, 4, 0, 0.25}, Shapes{2, 1, 5, 1100, 8, 3, 1030, 0.0}}) {
    Generator gen(9);
    const Tensor q = rand_uniform({s.b, s.h, s.tq, s.d}, -1, 1, {}, gen);
    const Tensor k = rand_uniform({s.b, s.h, s.tk, s.d}, -1, 1, {}, gen);
    const Tensor v = rand_uniform({s.b, s.h, s.tk, s.dv}, -1, 1, {}, gen);
    const Tensor r = rand_uniform({s.h, s.tk, s.d}, -1, 1, {}, gen);
    const Tensor u = rand_uniform({s.h, s.d}, -1, 1, {}, gen), w = rand_uniform({s.h, s.d}, -1, 1, {}, gen);
    const Tensor up = rand_uniform({s.b, s.h, s.tq, s.dv}, -1, 1, {}, gen);
    const kernels::RelAttentionParams pr = params(s.window, s.p, 1.0 / std::sqrt(double(s.d)));
    const std::string what = fmt::format("B{} H{} Tq{} Tk{} d{} window {}", s.b, s.h, s.tq, s.tk, s.d, s.window);

    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    const kernels::RelAttentionOutput ref = kernels::rel_attention_forward(q, k, v, r, u, w, pr, true);
    const kernels::RelAttentionGrads rg = kernels::rel_attention_backward(up, q, k, v, r, u, w, ref.probs, pr, {});
    const kernels::RelAttentionOutput emu =
        kernels::rel_attention_forward(to_test_device(q), to_test_device(k), to_test_device(v), to_test_device(r),
                                       to_test_device(u), to_test_device(w), pr, true);
    const kernels::RelAttentionGrads eg =
        kernels::rel_attention_backward(to_test_device(up), to_test_device(q), to_test_device(k), to_test_device(v),
                                        to_test_device(r), to_test_device(u), to_test_device(w), emu.probs, pr, {});
    check_close(emu.out, ref.out, 1e-5, 1e-5, what + " out");
    check_close(emu.probs, ref.probs, 1e-5, 1e-5, what + " probs");
    check_close(eg.grad_q, rg.grad_q, 1e-5, 1e-5, what + " grad_q");
    check_close(eg.grad_k, rg.grad_k, 1e-5, 1e-5, what + " grad_k");
    check_close(eg.grad_v, rg.grad_v, 1e-5, 1e-5, what + " grad_v");
    // dr, du, dw sum over B * Tq rows: a looser absolute bound for the float32 sums.
    check_close(eg.grad_r, rg.grad_r, 1e-4, 1e-4, what + " grad_r");
    check_close(eg.grad_u, rg.grad_u, 1e-4, 1e-4, what + " grad_u");
    check_close(eg.grad_w, rg.grad_w, 1e-4, 1e-4, what + " grad_w");
  }
}

TEST_CASE("rel_attention kernels: float64 row kernels against the reference",
          "[cuda][rel_attention][family:rel_attention]") {
  register_emu();
  for (const std::int64_t tk : {std::int64_t{45}, std::int64_t{1030}}) {
    Generator gen(6);
    const Shape shape{2, 2, 7, tk};
    const TensorOptions f64{.dtype = DType::Float64};
    const Tensor ac = rand_uniform(shape, -3, 3, f64, gen), bd = rand_uniform(shape, -3, 3, f64, gen);
    const Tensor grad = rand_uniform(shape, -1, 1, f64, gen);
    const kernels::RelAttentionParams pr = params(tk - 3, 0.2);
    const std::vector<Tensor> emu = row_kernels(to_test_device(ac), to_test_device(bd), to_test_device(grad), pr);
    std::vector<Tensor> ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = row_kernels(ac, bd, grad, pr);
    }
    const char* names[] = {"probs", "dropped", "unshifted grad"};
    for (std::size_t i = 0; i < 3; ++i)
      check_close(emu[i], ref[i], 1e-13, 1e-12, std::string("float64 ") + names[i] + ", Tk " + std::to_string(tk));
  }
}

TEST_CASE("rel_attention kernels: the dropout mask equals the CPU paths' and the dropout contract",
          "[cuda][rel_attention][family:rel_attention]") {
  register_emu();
  for (const std::int64_t tk : {std::int64_t{77}, std::int64_t{1100}}) {
    Generator gen(5);
    const Shape shape{2, 3, 4, tk};
    const Tensor ac = rand_uniform(shape, -2, 2, {}, gen), bd = rand_uniform(shape, -2, 2, {}, gen);
    const kernels::RelAttentionParams pr = params(tk / 2, 0.35);
    const kernels::AttentionProbs emu = kernels::rel_attention_softmax(to_test_device(ac), to_test_device(bd), pr);
    // The kept pattern (D != 0 where P > 0; hidden keys are 0 everywhere) on every backend.
    const auto kept = [](const Tensor& d) {
      std::vector<int> k;
      for (double x : values(d)) k.push_back(x != 0.0);
      return k;
    };
    const auto on = [&](kernels::Backend b) {
      return on_cpu_backend(b, [&] { return kernels::rel_attention_softmax(ac, bd, pr).dropped; });
    };
    const std::vector<int> emu_kept = kept(emu.dropped);
    CHECK(emu_kept == kept(on(kernels::Backend::Cpu)));
    CHECK(emu_kept == kept(on(kernels::Backend::Ref)));
    // D is dropout_apply(P) bit for bit, on the emulated device's own dropout kernel too.
    check_identical(emu.dropped, kernels::dropout_apply(emu.probs, pr.dropout, pr.seed, pr.offset),
                    "D == dropout_apply(P), Tk " + std::to_string(tk));
    // And the attention family's backward kernel (causal over M, as the backward pass runs it)
    // rebuilds the same D.
    const kernels::AttentionMasking m{.causal = true, .dropout = pr.dropout, .seed = pr.seed, .offset = pr.offset};
    const kernels::AttentionSoftmaxGrad g = kernels::attention_softmax_backward(emu.probs, emu.probs, m, 1.0);
    check_identical(g.dropped, emu.dropped, "D rebuilt by the backward kernel, Tk " + std::to_string(tk));
  }
}

TEST_CASE("rel_attention kernels: rows whose visible scores are all -inf are exact zeros",
          "[cuda][rel_attention][family:rel_attention]") {
  register_emu();
  // [1, 1, 3, 5], M = 2, window 2: query 1 sees keys 2 and 3. Their AC is -inf: that row is
  // fully masked; the other rows are ordinary.
  std::vector<float> a(15, 0.5f), b(15, 0.25f);
  a[5 + 2] = a[5 + 3] = -std::numeric_limits<float>::infinity();
  const Tensor ac = from_vector(a, Shape{1, 1, 3, 5}), bd = from_vector(b, Shape{1, 1, 3, 5});
  for (const double p : {0.0, 0.5}) {
    const kernels::RelAttentionParams pr = params(2, p);
    const std::vector<double> emu =
        values(kernels::rel_attention_softmax(to_test_device(ac), to_test_device(bd), pr).probs);
    const auto probs = [&] { return kernels::rel_attention_softmax(ac, bd, pr).probs; };
    const Tensor ref = on_cpu_backend(kernels::Backend::Ref, probs);
    const Tensor cpu = on_cpu_backend(kernels::Backend::Cpu, probs);
    for (std::size_t j = 0; j < 5; ++j) CHECK(emu[5 + j] == 0.0);
    CHECK(emu[2] == 0.5);  // query 0 sees keys 1 and 2 with equal scores
    CHECK(values(ref) == emu);
    check_close(cpu, ref, 1e-5, 1e-5, "cpu vs ref");
  }
}

// Mixed precision's relative attention (Transformer-XL): 16-bit q, k, v, r, u, w run natively on
// the GPUs, as many launches as in float32 (widening would add casts around the row kernel), with
// results within a few roundings of the reference (exact upcast, float64, one rounding per result).
TEST_CASE("rel_attention kernels: 16-bit inputs run natively, as many launches as float32",
          "[cuda][rel_attention][family:rel_attention][float16]") {
  register_emu();
  Generator gen(19);
  const std::int64_t b = 2, h = 2, tq = 9, tk = 24, d = 16, dv = 8;
  std::vector<Tensor> in32 = {rand_uniform({b, h, tq, d}, -1, 1, {}, gen),  rand_uniform({b, h, tk, d}, -1, 1, {}, gen),
                              rand_uniform({b, h, tk, dv}, -1, 1, {}, gen), rand_uniform({h, tk, d}, -1, 1, {}, gen),
                              rand_uniform({h, d}, -1, 1, {}, gen),         rand_uniform({h, d}, -1, 1, {}, gen),
                              rand_uniform({b, h, tq, dv}, -1, 1, {}, gen)};
  const kernels::RelAttentionParams pr = params(0, 0.1, 0.25);
  struct Run {
    std::vector<Tensor> results;
    std::uint64_t launches;
  };
  // in: q, k, v, r, u, w, the upstream gradient.
  const auto run = [&](const std::vector<Tensor>& in) {
    const std::uint64_t before = kernels::emu_kernel_launches();
    const kernels::RelAttentionOutput f =
        kernels::rel_attention_forward(in[0], in[1], in[2], in[3], in[4], in[5], pr, true);
    const kernels::RelAttentionGrads g =
        kernels::rel_attention_backward(in[6], in[0], in[1], in[2], in[3], in[4], in[5], f.probs, pr, {});
    return Run{{f.out, f.probs, g.grad_q, g.grad_k, g.grad_v, g.grad_r, g.grad_u, g.grad_w},
               kernels::emu_kernel_launches() - before};
  };
  const auto on_emu = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    for (const Tensor& t : in) out.push_back(to_test_device(t));
    return out;
  };
  const Run f32 = run(on_emu(in32));
  const char* names[] = {"out", "probs", "grad_q", "grad_k", "grad_v", "grad_r", "grad_u", "grad_w"};
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    std::vector<Tensor> in;
    for (const Tensor& t : in32) in.push_back(kernels::cast(t, dt));
    const Run emu = run(on_emu(in));
    CHECK(emu.launches == f32.launches);
    const Run ref = [&] {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      return run(in);
    }();
    const double eps = dt == DType::Float16 ? 0.0009765625 : 0.0078125;
    for (std::size_t i = 0; i < ref.results.size(); ++i) {
      CHECK(emu.results[i].dtype() == dt);
      // grad_r, grad_u and grad_w sum over B * Tq rows: their magnitudes reach a few units.
      const double tol = i >= 5 ? 8 * eps : 4 * eps;
      check_close(emu.results[i], ref.results[i], tol, tol, names[i]);
    }
  }
}
