// CUDA fused relative-attention kernels (kernels/cuda/flash_rel_attention.cu) on the emulated device,
// for what the op harness cannot express: forward and backward against the reference at sizes past
// several tiles of every tile configuration (head dims 32, 41, 64, 128; a memory longer than the
// segment, windows, lengths that are not multiples of a tile, one query row against a long memory,
// batches whose parts of dr are summed), dropout equal to the unfused relative attention's for the
// same seed and offset, bit-identical results under every emulator schedule, and the memory it
// does not use: no [B, H, Tq, Tk] tensor.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "cuda_emu/emu_profile.hpp"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "kernels/flash_rel_attention.h"
#include "support/common.h"
#include "support/emulated_device.h"

using namespace define;
using define::test::check_close;
using define::test::check_identical;
using define::test::EmuDeviceScope;
using define::test::run_all_schedules;
using define::test::to_test_device;

namespace {

void register_emu() {
  static const kernels::DeviceAvailability devices = kernels::register_devices();
  REQUIRE(devices.emu);
}

struct Problem {
  std::int64_t b, h, tq, tk, d, dv;
  std::int64_t window = 0;
  double p = 0.0;

  std::string name() const {
    return fmt::format("B{} H{} Tq{} Tk{} d{} dv{}{}{}", b, h, tq, tk, d, dv,
                       window > 0 ? fmt::format(" window {}", window) : "", p > 0 ? fmt::format(" dropout {}", p) : "");
  }
  kernels::RelAttentionParams params() const {
    return {.window = window, .scale = 1.0 / std::sqrt(double(d)), .dropout = p, .seed = 0xabcdef1234ull, .offset = 7};
  }
};

// CPU inputs of a problem: q, k, v, r, u, w and the upstream gradient.
struct Inputs {
  Tensor q, k, v, r, u, w, up;
  explicit Inputs(const Problem& s, std::uint64_t seed = 9) {
    Generator gen(seed);
    q = rand_uniform({s.b, s.h, s.tq, s.d}, -1, 1, {}, gen);
    k = rand_uniform({s.b, s.h, s.tk, s.d}, -1, 1, {}, gen);
    v = rand_uniform({s.b, s.h, s.tk, s.dv}, -1, 1, {}, gen);
    r = rand_uniform({s.h, s.tk, s.d}, -1, 1, {}, gen);
    u = rand_uniform({s.h, s.d}, -0.5, 0.5, {}, gen);
    w = rand_uniform({s.h, s.d}, -0.5, 0.5, {}, gen);
    up = rand_uniform({s.b, s.h, s.tq, s.dv}, -1, 1, {}, gen);
  }
  Inputs on_device() const {
    Inputs x = *this;
    for (Tensor* t : {&x.q, &x.k, &x.v, &x.r, &x.u, &x.w, &x.up}) *t = to_test_device(*t);
    return x;
  }
};

const char* const kNames[] = {"out", "lse", "grad_q", "grad_k", "grad_v", "grad_r", "grad_u", "grad_w"};

// out, lse and the six gradients of the fused family on the inputs' device (the CPU ones on the
// thread's CPU backend).
std::vector<Tensor> fused(const Problem& s, const Inputs& in) {
  const kernels::FlashAttentionOutput f =
      kernels::flash_rel_attention_forward(in.q, in.k, in.v, in.r, in.u, in.w, s.params());
  const kernels::RelAttentionGrads g =
      kernels::flash_rel_attention_backward(in.up, in.q, in.k, in.v, in.r, in.u, in.w, f.out, f.lse, s.params(), {});
  return {f.out, f.lse, g.grad_q, g.grad_k, g.grad_v, g.grad_r, g.grad_u, g.grad_w};
}

// out and the six gradients of the unfused family.
std::vector<Tensor> unfused(const Problem& s, const Inputs& in) {
  const kernels::RelAttentionOutput f =
      kernels::rel_attention_forward(in.q, in.k, in.v, in.r, in.u, in.w, s.params(), true);
  const kernels::RelAttentionGrads g =
      kernels::rel_attention_backward(in.up, in.q, in.k, in.v, in.r, in.u, in.w, f.probs, s.params(), {});
  return {f.out, g.grad_q, g.grad_k, g.grad_v, g.grad_r, g.grad_u, g.grad_w};
}

}  // namespace

TEST_CASE("flash relative attention kernels: forward and backward against the reference",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  // The tiles are chosen by max(d, dv) <= 32, 64, 128 and, for the forward, by Tq <= 16 (the
  // decoding tile): kernels/cuda/flash_rel_attention.cu, RelTiles.
  const std::vector<Problem> problems = {
      {2, 2, 37, 53, 32, 32},           // odd lengths, a memory of 16, 32 tiles
      {3, 1, 70, 150, 41, 41},          // a memory longer than the segment; d 41 in the 64 tiles
      {2, 2, 65, 65, 64, 64, 20},       // no memory, a window of 20
      {1, 2, 40, 100, 32, 16, 45},      // a window reaching into the memory, dv < d
      {2, 2, 1, 300, 64, 64},           // one query row against a long memory
      {1, 2, 5, 70, 128, 96, 30},       // a few query rows, 128 tiles, dv != d
      {2, 1, 33, 47, 128, 128},         // d 128
      {1, 3, 19, 100, 24, 40, 0, 0.2},  // dropout, dv > d
      {2, 1, 50, 90, 64, 64, 33, 0.1},  // dropout and a window
  };
  for (const Problem& s : problems) {
    const Inputs in(s);
    const std::vector<Tensor> got = fused(s, in.on_device());
    std::vector<Tensor> ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = fused(s, in);
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].device() == define::test::kernel_test_device());
      // Sums over the batch and the queries (dr, du, dw) hold more terms: a looser absolute bound.
      const double atol = i >= 5 ? 1e-4 : 2e-5;
      check_close(got[i], ref[i], 2e-5, atol, s.name() + " " + kNames[i]);
    }
  }
}

TEST_CASE("flash relative attention kernels: equal to the unfused relative attention, dropout mask included",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  for (const Problem& s : {Problem{2, 2, 45, 70, 32, 32, 0, 0.1}, Problem{1, 2, 66, 66, 64, 48, 25, 0.3},
                           Problem{2, 1, 3, 260, 16, 16, 0, 0.25}}) {
    const Inputs dev = Inputs(s, 4).on_device();
    const std::vector<Tensor> f = fused(s, dev);
    const std::vector<Tensor> u = unfused(s, dev);  // the unfused CUDA kernels, on the same device
    check_close(f[0], u[0], 2e-5, 2e-5, s.name() + " out, fused against unfused");
    for (std::size_t i = 1; i < u.size(); ++i)
      check_close(f[i + 1], u[i], 2e-5, 1e-4, s.name() + " " + kNames[i + 1] + ", fused against unfused");
  }
  // Through the differentiable op: the same generator state gives the same mask and leaves the
  // generator in the same place.
  const Problem s{2, 2, 30, 41, 32, 32, 12, 0.2};
  const Inputs in = Inputs(s, 6).on_device();
  Generator g1(123), g2(123);
  RelAttentionOptions o1{.window = 12, .dropout = 0.2, .generator = &g1, .kernel = AttentionKernel::Fused};
  RelAttentionOptions o2 = o1;
  o2.generator = &g2;
  o2.kernel = AttentionKernel::Unfused;
  const Tensor a = relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, o1);
  const Tensor b = relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, o2);
  CHECK(g1.state().offset == g2.state().offset);
  check_close(a, b, 2e-5, 2e-5, "fused against unfused relative_attention, dropout 0.2");
}

TEST_CASE("flash relative attention kernels: bit-identical under every emulator schedule",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  // Several query, key and position tiles each, partial tiles, a window, dropout, two batch
  // elements (dr's parts summed); the decoding tile.
  for (const Problem& s : {Problem{2, 1, 70, 75, 32, 24, 40, 0.3}, Problem{1, 1, 40, 45, 64, 64, 0, 0.1},
                           Problem{1, 1, 17, 20, 128, 128}, Problem{2, 1, 3, 150, 64, 64, 0, 0.2}}) {
    const Inputs in = Inputs(s, 2).on_device();
    for (std::size_t i = 0; i < 8; ++i) run_all_schedules([&] { return fused(s, in)[i]; }, s.name() + " " + kNames[i]);
  }
}

TEST_CASE("flash relative attention kernels: the query-row decoding kernel, windows, short and long memories",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  // One query row a head without dropout (kernels/cuda/flash_decode.cu, its relative form): 16
  // emulated multiprocessors want 64 blocks, so the long memories split their keys; a window leaves
  // the splits before it without a visible key.
  const define::test::EmuDeviceScope scope({.threads = 16});
  struct Case {
    Problem s;
    bool split;
  };
  const std::vector<Case> cases = {
      {{6, 4, 1, 40, 64, 64, 25}, false},    // a short memory, a window of 25: 4 rows a block
      {{2, 2, 1, 300, 64, 48}, true},        // a long memory, dv < d
      {{1, 2, 1, 2000, 32, 32, 500}, true},  // a window over the last quarter of a split memory
      {{3, 1, 1, 200, 41, 41}, true},        // d 41: element loads
      {{1, 1, 1, 3000, 128, 100, 0}, true},  // d 128, dv not a multiple of 8
  };
  for (const Case& c : cases) {
    const Problem& s = c.s;  // (not a structured binding: clang before 16 cannot capture one)
    [[maybe_unused]] const bool split = c.split;  // read by the profile checks only (none under the sanitizers)
    const Inputs in(s, 3);
    const Inputs dev = in.on_device();
#if !defined(__SANITIZE_ADDRESS__)
    ::cuda_emu::profile_start();
    (void)kernels::flash_rel_attention_forward(dev.q, dev.k, dev.v, dev.r, dev.u, dev.w, s.params());
    const std::vector<::cuda_emu::KernelProfile> launches = ::cuda_emu::profile_stop();
    INFO(s.name());
    REQUIRE(launches.size() == 1u);  // split or not: the last block of a row's splits merges them
    CHECK(launches[0].kernel.find("flash_decode_row_kernel") != std::string::npos);
    CHECK((launches[0].grid.z > 1) == split);
#endif
    const std::vector<Tensor> got = fused(s, dev);
    std::vector<Tensor> ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = fused(s, in);
    }
    for (std::size_t i = 0; i < got.size(); ++i)
      check_close(got[i], ref[i], 2e-5, i >= 5 ? 1e-4 : 2e-5, s.name() + " query-row decoding " + kNames[i]);
    check_close(got[0], unfused(s, dev)[0], 2e-5, 2e-5, s.name() + " query-row decoding out against unfused");
    for (std::size_t i = 0; i < 2; ++i)
      run_all_schedules([&] { return fused(s, dev)[i]; }, s.name() + " query-row decoding " + kNames[i]);

    // A 16-bit memory (mixed-precision generation) is read as it is: the same kernel and splits, no
    // widened copy (no launch but the decoding, which merges its splits), out in the inputs' dtype and
    // equal bit for bit to the float path on the widened inputs rounded once, lse float32 and equal. On
    // sm_61 too.
    for (const auto& [dtype, arch] : {std::pair{DType::Float16, 61}, std::pair{DType::BFloat16, 80}}) {
      const define::test::EmuDeviceScope arch_scope({.arch = arch});
      INFO(s.name() << " " << dtype_name(dtype));
      Inputs narrow = dev, widened = dev;
      for (auto [n, w] :
           {std::pair{&narrow.q, &widened.q}, std::pair{&narrow.k, &widened.k}, std::pair{&narrow.v, &widened.v},
            std::pair{&narrow.r, &widened.r}, std::pair{&narrow.u, &widened.u}, std::pair{&narrow.w, &widened.w}}) {
        *n = kernels::cast(*n, dtype);
        *w = kernels::cast(*n, DType::Float32);
      }
      kernels::FlashAttentionOutput half;
#if !defined(__SANITIZE_ADDRESS__)
      ::cuda_emu::profile_start();
      half =
          kernels::flash_rel_attention_forward(narrow.q, narrow.k, narrow.v, narrow.r, narrow.u, narrow.w, s.params());
      const std::vector<::cuda_emu::KernelProfile> runs = ::cuda_emu::profile_stop();
      REQUIRE(runs.size() == 1u);
      CHECK(runs[0].kernel.find("flash_decode_row_kernel") != std::string::npos);
      CHECK((runs[0].grid.z > 1) == split);
#else
      half =
          kernels::flash_rel_attention_forward(narrow.q, narrow.k, narrow.v, narrow.r, narrow.u, narrow.w, s.params());
#endif
      const kernels::FlashAttentionOutput wide = kernels::flash_rel_attention_forward(
          widened.q, widened.k, widened.v, widened.r, widened.u, widened.w, s.params());
      CHECK(half.out.dtype() == dtype);
      CHECK(half.lse.dtype() == DType::Float32);
      CHECK(define::test::values(half.out) == define::test::values(kernels::cast(wide.out, dtype)));
      CHECK(define::test::values(half.lse) == define::test::values(wide.lse));
    }
  }
}

// The point of the family: memory that does not grow with Tq * Tk. At B 1, H 4, Tq = Tk = 512,
// d 32 the score matrix is 4 MiB, eight times q; the unfused path holds AC / P, BD and with dropout D
// through forward and backward, the fused path never allocates one.
TEST_CASE("flash relative attention kernels: no [B, H, Tq, Tk] tensor in device memory",
          "[cuda][flash_rel_attention][family:flash_rel_attention][memory]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;  // the emulated device's allocator statistics
  if (!define::cuda_emu::caching_allocator_enabled())
    DEFINE_SKIP_TEST(
        "reads the caching allocator's counters, which DEFINE_CUDA_CACHE=0 turns off (ctest runs the "
        "[memory] tests again with the cache on)");
  const Problem s{1, 4, 512, 512, 32, 32, 0, 0.1};
  const Inputs in = Inputs(s, 1).on_device();
  const std::size_t scores = 4 * 512 * 512 * sizeof(float);
  auto& alloc = define::cuda_emu::allocator(0);
  const auto peak_above = [&](const auto& run) {
    define::cuda_emu::synchronize();
    const std::size_t before = alloc.stats().active_bytes;
    alloc.reset_peak();
    run();
    define::cuda_emu::synchronize();
    return alloc.stats().peak_active_bytes - before;
  };
  const std::size_t fused_peak = peak_above([&] { (void)fused(s, in); });
  const std::size_t plain_peak = peak_above([&] { (void)unfused(s, in); });
  const std::size_t io = static_cast<std::size_t>(in.q.numel()) * sizeof(float);  // one [B, H, T, d] tensor
  INFO("peak above the inputs: fused " << fused_peak << " bytes, unfused " << plain_peak << " bytes, scores " << scores
                                       << " bytes, q " << io << " bytes");
  // Fused: out, lse, delta, dqu, dqw, dq and the other gradients: about 7 x q.
  CHECK(fused_peak < 10 * io);
  CHECK(fused_peak < scores);
  CHECK(plain_peak >= 3 * scores);
  fmt::print(
      "flash relative attention memory, B 1 H 4 Tq 512 Tk 512 d 32 dropout 0.1, forward + backward peak above "
      "the inputs: fused {:.2f} MiB, unfused {:.2f} MiB\n",
      fused_peak / 1048576.0, plain_peak / 1048576.0);
}

TEST_CASE("flash relative attention kernels: what the CUDA kernels refuse, named",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  const Tensor q = to_test_device(zeros({1, 1, 4, 129})), v = to_test_device(zeros({1, 1, 4, 8}));
  const Tensor r = to_test_device(zeros({1, 4, 129})), u = to_test_device(zeros({1, 129}));
  CHECK_THROWS_WITH(kernels::flash_rel_attention_forward(q, q, v, r, u, u, {.scale = 1.0}),
                    Catch::Contains("head dims d = 129, dv = 8: the CUDA kernels take at most 128"));
  const TensorOptions f64{.dtype = DType::Float64};
  const Tensor q64 = to_test_device(zeros({1, 1, 4, 8}, f64)), r64 = to_test_device(zeros({1, 4, 8}, f64)),
               u64 = to_test_device(zeros({1, 8}, f64));
  CHECK_THROWS_WITH(kernels::flash_rel_attention_forward(q64, q64, q64, r64, u64, u64, {.scale = 1.0}),
                    Catch::Contains("float64"));
}

namespace {

// The inputs cast to dtype where they are: rounded to 16 bits, or those widened to float32 (the
// FFMA kernels') or float64 (the reference's).
Inputs cast_inputs(const Inputs& in, DType dtype) {
  Inputs x = in;
  for (Tensor* t : {&x.q, &x.k, &x.v, &x.r, &x.u, &x.w, &x.up}) *t = kernels::cast(*t, dtype);
  return x;
}

}  // namespace

TEST_CASE(
    "flash relative attention kernels: the tensor-core forward and backward for 16-bit inputs against the reference",
    "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;  // sets the emulated architecture
  // Blocks of 64 queries (forward, dq), 64 keys (dk, dv) and 64 positions (dr); key tiles of 32 and
  // query tiles of 32 (16 for head dims past 32); mma.m16n8k8 steps of 8 along d, so head dims that
  // are not multiples of 8 pad with zeros.
  const std::vector<Problem> problems = {
      {2, 2, 37, 53, 32, 32},             // odd lengths, a memory of 16
      {3, 1, 70, 150, 41, 41},            // a memory longer than the segment; d 41 in the 64 tiles
      {2, 2, 65, 65, 64, 64, 20},         // no memory, a window of 20
      {1, 2, 40, 100, 32, 16, 45},        // a window reaching into the memory, dv < d
      {1, 3, 19, 100, 24, 40, 0, 0.2},    // dropout, dv > d
      {2, 1, 130, 200, 64, 64, 90, 0.1},  // three query blocks, four key blocks, a window and dropout
      {1, 2, 3, 40, 64, 48},              // three query rows: the forward's tiles, not the decoding kernel
  };
  for (const auto& [dtype, arch, tol] :
       {std::tuple{DType::Float16, 75, 1.5e-3}, std::tuple{DType::BFloat16, 80, 1.2e-2}}) {
    const EmuDeviceScope scope({.arch = arch});
    for (const Problem& s : problems) {
      const Inputs in = cast_inputs(Inputs(s), dtype);
      const std::vector<Tensor> got = fused(s, in.on_device());
      std::vector<Tensor> ref;
      {
        kernels::CpuBackendGuard guard(kernels::Backend::Ref);
        ref = fused(s, cast_inputs(in, DType::Float64));
      }
      const std::string what = s.name() + " " + std::string(dtype_name(dtype));
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].dtype() == (i == 1 ? DType::Float32 : dtype));
        // P is rounded to 16 bits before it multiplies V, dS and D before they multiply a tile; the
        // sums over the batch and the queries (dr, du, dw) hold more terms.
        const double bound = i == 0 || i == 1 ? tol : i >= 5 ? 4 * tol : 2 * tol;
        check_close(kernels::cast(got[i], DType::Float64), ref[i], bound, bound, what + " " + kNames[i]);
      }
      // And it is the tensor-core kernels that ran: the FFMA kernels on the same inputs widened keep
      // P and dS in float32, so their out and grad_k differ in some element.
      const std::vector<Tensor> ffma = fused(s, cast_inputs(in, DType::Float32).on_device());
      CHECK(define::test::values(got[0]) != define::test::values(kernels::cast(ffma[0], dtype)));
      CHECK(define::test::values(got[3]) != define::test::values(kernels::cast(ffma[3], dtype)));
    }
  }
}

TEST_CASE("flash relative attention kernels: 16-bit inputs where the tensor cores cannot run take the FFMA path",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  // bfloat16 on sm_75, float16 on sm_61, and head dims past 64: the float32 kernels on the widened
  // inputs, results rounded once: exactly what the float32 inputs widened by hand give.
  for (const auto& [dtype, arch, d] :
       {std::tuple{DType::BFloat16, 75, 32}, std::tuple{DType::Float16, 61, 32}, std::tuple{DType::Float16, 80, 96}}) {
    const EmuDeviceScope scope({.arch = arch});
    const Problem s{2, 2, 30, 45, d, d, 20, 0.1};
    const Inputs in = cast_inputs(Inputs(s, 5), dtype).on_device(), wide = cast_inputs(in, DType::Float32);
    const kernels::FlashAttentionOutput f =
        kernels::flash_rel_attention_forward(in.q, in.k, in.v, in.r, in.u, in.w, s.params());
    const kernels::FlashAttentionOutput fw =
        kernels::flash_rel_attention_forward(wide.q, wide.k, wide.v, wide.r, wide.u, wide.w, s.params());
    // The backward from the same out (the 16-bit one, widened) and lse.
    const kernels::RelAttentionGrads g =
        kernels::flash_rel_attention_backward(in.up, in.q, in.k, in.v, in.r, in.u, in.w, f.out, f.lse, s.params(), {});
    const kernels::RelAttentionGrads gw =
        kernels::flash_rel_attention_backward(wide.up, wide.q, wide.k, wide.v, wide.r, wide.u, wide.w,
                                              kernels::cast(f.out, DType::Float32), f.lse, s.params(), {});
    const Tensor got[] = {f.out, f.lse, g.grad_q, g.grad_k, g.grad_v, g.grad_r, g.grad_u, g.grad_w};
    const Tensor want[] = {fw.out, fw.lse, gw.grad_q, gw.grad_k, gw.grad_v, gw.grad_r, gw.grad_u, gw.grad_w};
    for (std::size_t i = 0; i < 8; ++i)
      check_identical(got[i], i == 1 ? want[i] : kernels::cast(want[i], dtype),
                      s.name() + " " + std::string(dtype_name(dtype)) + " " + kNames[i]);
  }
}

TEST_CASE("flash relative attention kernels: each gradient asked for alone is the full backward's, bit for bit",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  // The backends form dq, du and dw from dq's two parts (the tensor-core dq kernel: dq itself and each
  // query block's column sums): asking for any one of them alone must not change it or need the others.
  using Grads = kernels::RelAttentionGrads;
  using Needs = kernels::RelAttentionNeeds;
  Tensor Grads::*const grads[] = {&Grads::grad_q, &Grads::grad_k, &Grads::grad_v,
                                  &Grads::grad_r, &Grads::grad_u, &Grads::grad_w};
  bool Needs::*const needs[] = {&Needs::q, &Needs::k, &Needs::v, &Needs::r, &Needs::u, &Needs::w};
  const Problem s{2, 2, 70, 90, 32, 24, 40, 0.1};  // two query blocks of the tensor-core kernels
  const auto check = [&](const Inputs& in, const std::string& what) {
    const kernels::FlashAttentionOutput f =
        kernels::flash_rel_attention_forward(in.q, in.k, in.v, in.r, in.u, in.w, s.params());
    const Grads all =
        kernels::flash_rel_attention_backward(in.up, in.q, in.k, in.v, in.r, in.u, in.w, f.out, f.lse, s.params(), {});
    for (int i = 0; i < 6; ++i) {
      Needs one_need{false, false, false, false, false, false};
      one_need.*needs[i] = true;
      const Grads one = kernels::flash_rel_attention_backward(in.up, in.q, in.k, in.v, in.r, in.u, in.w, f.out, f.lse,
                                                              s.params(), one_need);
      for (int j = 0; j < 6; ++j) {
        if (j == i)
          check_identical(one.*grads[j], all.*grads[j], what + " " + kNames[j + 2] + " alone");
        else
          CHECK_FALSE((one.*grads[j]).defined());
      }
    }
  };
  for (const auto& [dtype, arch] :
       {std::tuple{DType::Float32, 80}, std::tuple{DType::Float16, 75}, std::tuple{DType::BFloat16, 80}}) {
    const EmuDeviceScope scope({.arch = arch});
    check(cast_inputs(Inputs(s, 4), dtype).on_device(), std::string(dtype_name(dtype)) + " emulated device");
  }
  check(Inputs(s, 4), "CPU");
  const kernels::CpuBackendGuard guard(kernels::Backend::Ref);
  check(Inputs(s, 4), "reference");
}

TEST_CASE("flash relative attention kernels: the tensor-core kernels are bit-identical under every emulator schedule",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  const EmuDeviceScope scope({.arch = 80});
  for (const Problem& s : {Problem{2, 1, 70, 75, 32, 24, 40, 0.3}, Problem{1, 1, 40, 100, 64, 64}}) {
    for (const DType dtype : {DType::Float16, DType::BFloat16}) {
      const Inputs in = cast_inputs(Inputs(s, 2), dtype).on_device();
      for (std::size_t i = 0; i < 8; ++i)
        run_all_schedules([&] { return fused(s, in)[i]; },
                          s.name() + " " + std::string(dtype_name(dtype)) + " " + kNames[i]);
    }
  }
}

TEST_CASE("flash relative attention kernels: under mixed precision relative attention runs on the tensor cores",
          "[cuda][flash_rel_attention][family:flash_rel_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  // The autocast policy casts the six inputs to the region's 16-bit dtype (autograd/autocast.h), and
  // the fused op then runs the tensor-core kernels: the same bits as the kernels on the cast inputs.
  const EmuDeviceScope scope({.arch = 80});
  const Problem s{2, 2, 21, 33, 32, 32, 10};
  const Inputs in = Inputs(s, 8).on_device();
  for (const DType dtype : {DType::Float16, DType::BFloat16}) {
    Tensor got;
    {
      const autocast::Scope region(dtype);
      got = relative_attention(in.q, in.k, in.v, in.r, in.u, in.w, {.window = 10, .kernel = AttentionKernel::Fused});
    }
    const Inputs cast_in = cast_inputs(in, dtype);
    CHECK(got.dtype() == dtype);
    check_identical(got, fused(s, cast_in)[0], std::string(dtype_name(dtype)) + " out");
  }
}
