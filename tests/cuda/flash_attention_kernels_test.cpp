// CUDA flash-attention kernels (kernels/cuda/flash_attention.cu) on the emulated device, for what the
// op harness cannot express: forward and backward against the reference at sizes past several tiles
// of every tile configuration (head dims 32, 41, 64, 128; Tq != Tk, a memory longer than the
// segment, lengths that are not multiples of a tile, one query row against a long cache), masks,
// fully masked rows, dropout equal to the unfused attention's for the same seed and offset,
// bit-identical results under every emulator schedule, and the memory it does not use: no
// [B, H, Tq, Tk] tensor. With 16-bit inputs at an emulated sm_75 / sm_80, the tensor-core kernels of
// kernels/cuda/flash_attention_mma.cu: against the reference, proven to be what ran, the FFMA fallback
// where the instruction is missing, schedules and the autocast route. Decoding (kernels/cuda/
// flash_decode.cu): the query-row kernel and split decoding with its merge, what ran checked from the
// emulator's profile, 16-bit caches read as they are.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "cuda_emu/emu_profile.hpp"
#include "cuda_emu/emu_types.hpp"
#include "kernels/attention.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "kernels/flash_attention.h"
#include "support/common.h"
#include "support/emulated_device.h"

using namespace define;
using define::test::check_close;
using define::test::check_identical;
using define::test::EmuDeviceScope;
using define::test::run_all_schedules;
using define::test::to_test_device;
using define::test::values;

namespace {

void register_emu() {
  static const kernels::DeviceAvailability devices = kernels::register_devices();
  REQUIRE(devices.emu);
}

// [B, Tk] int32: batch b pads keys j with (j + b) % 5 == 2, and the last batch (when B > 1) pads
// every key: its rows are fully masked.
Tensor padding(std::int64_t b, std::int64_t tk) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(b * tk));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < tk; ++j)
      m[static_cast<std::size_t>(i * tk + j)] = ((b > 1 && i == b - 1) || (j + i) % 5 == 2) ? 1 : 0;
  return from_vector(m, Shape{b, tk});
}

struct Problem {
  std::int64_t b, h, tq, tk, d, dv;
  bool causal = false, padded = false;
  double p = 0.0;

  std::string name() const {
    return fmt::format("B{} H{} Tq{} Tk{} d{} dv{}{}{}{}", b, h, tq, tk, d, dv, causal ? " causal" : "",
                       padded ? " padded" : "", p > 0 ? fmt::format(" dropout {}", p) : "");
  }
  kernels::AttentionMasking masking() const {
    return {.key_padding_mask = padded ? padding(b, tk) : Tensor(),
            .causal = causal,
            .dropout = p,
            .seed = 0xfeedbeef12ull,
            .offset = 12};
  }
  double scale() const { return 1.0 / std::sqrt(double(d)); }
};

// CPU inputs of a problem: q, k, v and the upstream gradient.
struct Inputs {
  Tensor q, k, v, up;
  explicit Inputs(const Problem& s, std::uint64_t seed = 9) {
    Generator gen(seed);
    q = rand_uniform({s.b, s.h, s.tq, s.d}, -1, 1, {}, gen);
    k = rand_uniform({s.b, s.h, s.tk, s.d}, -1, 1, {}, gen);
    v = rand_uniform({s.b, s.h, s.tk, s.dv}, -1, 1, {}, gen);
    up = rand_uniform({s.b, s.h, s.tq, s.dv}, -1, 1, {}, gen);
  }
  Inputs on_device() const {
    Inputs r = *this;
    r.q = to_test_device(q), r.k = to_test_device(k), r.v = to_test_device(v), r.up = to_test_device(up);
    return r;
  }
};

// out, lse, grad_q, grad_k, grad_v of the flash-attention family on the inputs' device (the CPU ones on
// the thread's CPU backend).
std::vector<Tensor> flash(const Problem& s, const Inputs& in) {
  const kernels::AttentionMasking m = s.masking();
  const kernels::FlashAttentionOutput f = kernels::flash_attention_forward(in.q, in.k, in.v, m, s.scale());
  const kernels::AttentionGrads g =
      kernels::flash_attention_backward(in.up, in.q, in.k, in.v, f.out, f.lse, m, s.scale(), true, true, true);
  return {f.out, f.lse, g.grad_q, g.grad_k, g.grad_v};
}

// out, grad_q, grad_k, grad_v of the unfused attention family.
std::vector<Tensor> unfused(const Problem& s, const Inputs& in) {
  const kernels::AttentionMasking m = s.masking();
  const kernels::AttentionOutput f = kernels::attention_forward(in.q, in.k, in.v, m, s.scale(), true);
  const kernels::AttentionGrads g =
      kernels::attention_backward(in.up, in.q, in.k, in.v, f.probs, m, s.scale(), true, true, true);
  return {f.out, g.grad_q, g.grad_k, g.grad_v};
}

const char* const kFlashNames[] = {"out", "lse", "grad_q", "grad_k", "grad_v"};

// lse is -inf in fully masked rows on both sides: compared where finite, and equal where not.
void check_lse(const Tensor& got, const Tensor& ref, const std::string& what) {
  const std::vector<double> a = values(got), b = values(ref);
  REQUIRE(a.size() == b.size());
  INFO(what);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]))
      CHECK(a[i] == b[i]);
    else
      CHECK(a[i] == Approx(b[i]).margin(1e-5).epsilon(1e-5));
  }
}

// flash() on the device against the reference backend's: out and gradients to 2e-5, lse too where
// finite.
void check_against_reference(const Problem& s, const Inputs& in, const Inputs& dev, const std::string& label) {
  const std::vector<Tensor> got = flash(s, dev);
  std::vector<Tensor> ref;
  {
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    ref = flash(s, in);
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string what = s.name() + " " + label + " " + kFlashNames[i];
    if (i == 1)
      check_lse(got[i], ref[i], what);
    else
      check_close(got[i], ref[i], 2e-5, 2e-5, what);
  }
}

#if !defined(__SANITIZE_ADDRESS__)
// The launches of one forward on the inputs (CPU tensors), rounded to dtype first where it is not float32.
std::vector<::cuda_emu::KernelProfile> forward_launches(const Problem& s, const Inputs& in,
                                                        DType dtype = DType::Float32) {
  const auto on = [&](const Tensor& t) {
    return to_test_device(dtype == DType::Float32 ? t : kernels::cast(t, dtype));
  };
  const Tensor q = on(in.q), k = on(in.k), v = on(in.v);
  ::cuda_emu::profile_start();
  (void)kernels::flash_attention_forward(q, k, v, s.masking(), s.scale());
  return ::cuda_emu::profile_stop();
}
#endif

// 16-bit inputs (as the inputs rounded to dtype) give the float forward's result on them widened, out
// rounded once: the same float arithmetic, but compiled once per input type, and the compiler may fuse
// a multiply and an add into one FMA in one instantiation and not the other (g++ -march=native does on
// an AMD EPYC Zen 3; nvcc's --fmad may on a GPU), so a float result a rounding step away from a 16-bit
// boundary may round to the neighbouring value: out within one unit in the last place of dtype, in a
// few elements at most. lse (float32, never rounded to 16 bits) is equal.
void check_16bit_as_widened(const Problem& s, const Inputs& in, DType dtype, const std::string& label) {
  const auto narrow = [&](const Tensor& t) { return to_test_device(kernels::cast(t, dtype)); };
  const auto widened = [&](const Tensor& t) { return kernels::cast(narrow(t), DType::Float32); };
  const kernels::FlashAttentionOutput got16 =
      kernels::flash_attention_forward(narrow(in.q), narrow(in.k), narrow(in.v), s.masking(), s.scale());
  const kernels::FlashAttentionOutput via32 =
      kernels::flash_attention_forward(widened(in.q), widened(in.k), widened(in.v), s.masking(), s.scale());
  INFO(s.name() + " " + label + " " + std::string(dtype_name(dtype)));
  CHECK(got16.out.dtype() == dtype);
  const std::vector<double> a = values(got16.out), b = values(kernels::cast(via32.out, dtype));
  REQUIRE(a.size() == b.size());
  const double eps = dtype == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    ++differ;
    INFO("element " << i << ": " << a[i] << " against " << b[i]);
    CHECK(std::abs(a[i] - b[i]) <= eps * std::max(std::abs(b[i]), 6.1e-5));  // one unit, subnormals aside
  }
  CHECK(differ <= 1 + a.size() / 50);
  CHECK(values(got16.lse) == values(via32.lse));
}

}  // namespace

TEST_CASE("flash attention kernels: forward and backward against the reference",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  // The tiles (queries x keys) are chosen by max(d, dv) <= 32, 64, 128 and, for the forward, by
  // Tq <= 16 (the decoding tile): kernels/cuda/flash_attention.cu, FlashTiles.
  const std::vector<Problem> problems = {
      {2, 2, 37, 53, 32, 32},                      // odd lengths, d <= 32 tiles
      {2, 1, 70, 150, 41, 41, true, true},         // a memory (Tk > Tq), causal, padded; d 41 in the 64 tiles
      {2, 2, 65, 65, 64, 64, true, true},          // the last batch fully masked
      {2, 1, 50, 40, 32, 16, true},                // Tq > Tk: the first 10 queries see nothing
      {2, 2, 1, 700, 64, 64, false, true},         // a decoding step against a long cache
      {3, 1, 1, 333, 32, 32, false, true},         // the same, 32 tiles
      {1, 2, 5, 70, 128, 96, true},                // a few query rows, 128 tiles
      {1, 2, 33, 47, 128, 128},                    // d 128
      {1, 2, 20, 30, 100, 72, true},               // d != dv, 128 tiles
      {1, 3, 19, 100, 24, 40, false, false, 0.2},  // dropout, dv > d
  };
  for (const Problem& s : problems) {
    const Inputs in(s);
    const std::vector<Tensor> got = flash(s, in.on_device());
    std::vector<Tensor> ref;
    {
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      ref = flash(s, in);
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::string what = s.name() + " " + kFlashNames[i];
      CHECK(got[i].device() == define::test::kernel_test_device());
      if (i == 1)
        check_lse(got[i], ref[i], what);
      else
        check_close(got[i], ref[i], 2e-5, 2e-5, what);
    }
  }
}

TEST_CASE("flash attention kernels: dropout equals the unfused attention's, same seed and offset",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  for (const Problem& s :
       {Problem{2, 2, 45, 70, 32, 32, true, true, 0.1}, Problem{1, 2, 66, 66, 64, 48, true, false, 0.3},
        Problem{2, 1, 3, 260, 16, 16, false, true, 0.25}}) {
    const Inputs in(s, 4);
    const Inputs dev = in.on_device();
    const std::vector<Tensor> f = flash(s, dev);
    const std::vector<Tensor> u = unfused(s, dev);  // the unfused CUDA kernels, on the same device
    check_close(f[0], u[0], 2e-5, 2e-5, s.name() + " out, flash against unfused");
    for (std::size_t i = 1; i < 4; ++i)
      check_close(f[i + 1], u[i], 2e-5, 2e-5, s.name() + " " + kFlashNames[i + 1] + ", flash against unfused");
    // And against the unfused reference: the same mask on every backend.
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    const std::vector<Tensor> r = unfused(s, in);
    check_close(f[0], r[0], 2e-5, 2e-5, s.name() + " out, flash against the unfused reference");
    check_close(f[4], r[3], 2e-5, 2e-5, s.name() + " grad_v, flash against the unfused reference");
  }
  // Through the differentiable ops: the same generator state gives the same mask and leaves the
  // generator in the same place.
  const Problem s{2, 2, 30, 41, 32, 32, true, true, 0.2};
  const Inputs in = Inputs(s, 6).on_device();
  Generator g1(123), g2(123);
  const AttentionOptions o1{
      .key_padding_mask = s.masking().key_padding_mask, .causal = true, .dropout = 0.2, .generator = &g1};
  AttentionOptions o2 = o1;
  o2.generator = &g2;
  const Tensor a = flash_attention(in.q, in.k, in.v, o1), b = scaled_dot_product_attention(in.q, in.k, in.v, o2);
  CHECK(g1.state().offset == g2.state().offset);
  check_close(a, b, 2e-5, 2e-5, "flash_attention against scaled_dot_product_attention, dropout 0.2");
}

TEST_CASE("flash attention kernels: bit-identical under every emulator schedule",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  // Several query and key tiles each (the tiles of d 32 are 64 x 64 forward, 64 keys x 32 queries
  // for dK / dV, 64 queries x 32 keys for dQ), partial tiles, masks and dropout; the decoding tile.
  for (const Problem& s :
       {Problem{2, 1, 70, 75, 32, 24, true, true, 0.3}, Problem{1, 1, 40, 45, 64, 64, true, false, 0.1},
        Problem{1, 1, 20, 17, 128, 128, false, true, 0.0},
        Problem{2, 1, 3, 150, 64, 64, false, true, 0.2}}) {  // the decoding tile
    const Inputs in = Inputs(s, 2).on_device();
    for (std::size_t i = 0; i < 5; ++i)
      run_all_schedules([&] { return flash(s, in)[i]; }, s.name() + " " + kFlashNames[i]);
  }
}

TEST_CASE("flash attention kernels: split decoding, a long cache over several blocks merged in a fixed order",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  // The emulated device reports its OS threads as multiprocessors: 16 of them want 64 blocks, so a
  // decoding launch of a few blocks splits its keys (kernels/cuda/flash_attention.cu,
  // flash_decode_splits: at least 2 key tiles a split, at most 64 splits).
  const EmuDeviceScope scope({.threads = 16});
  // (One query row without dropout takes the query-row kernel: its own test below.)
  const std::vector<Problem> problems = {
      {1, 1, 2, 2000, 64, 64},                    // one block: 16 splits of 2 key tiles
      {1, 2, 3, 1000, 32, 32, true, true},        // causal rows over a memory, padded: 4 splits
      {2, 1, 2, 777, 128, 96, false, true},       // the second batch fully masked (zeros, lse -inf): 12
      {1, 1, 1, 900, 64, 64, false, false, 0.2},  // one row with dropout, the same mask as unsplit: 7
      {1, 1, 2, 2200, 128, 100},                  // 34 splits (the merge's second lane slot), dv not 8k
  };
  for (const Problem& s : problems) {
    const Inputs in(s, 5);
    const Inputs dev = in.on_device();
#if !defined(__SANITIZE_ADDRESS__)
    // What ran: the split kernel and the merge (profiled, the device reports the profiled target's
    // multiprocessors, so the split count differs from the run below; both split).
    const std::vector<::cuda_emu::KernelProfile> launches = forward_launches(s, in);
    REQUIRE(launches.size() == 2);
    CHECK(launches[0].grid.z > 1);
    CHECK(launches[1].kernel == "flash_decode_merge_kernel<float>");
#endif
    check_against_reference(s, in, dev, "split decoding");
    run_all_schedules([&] { return flash(s, dev)[0]; }, s.name() + " split decoding out");

    // 16-bit inputs decode from the cache as it is (no widened copy, no tensor-core tile), with the
    // same splits: the float path on the widened inputs, bit for bit, out rounded once. On every
    // architecture, with or without tensor cores.
    for (const auto& [dtype, arch] : {std::pair{DType::Float16, 61}, std::pair{DType::BFloat16, 80}}) {
      const EmuDeviceScope arch_scope({.arch = arch});
#if !defined(__SANITIZE_ADDRESS__)
      const std::vector<::cuda_emu::KernelProfile> runs = forward_launches(s, in, dtype);
      // The split kernel reads the 16-bit cache, under 4 bytes an element (a widened copy would be
      // read at 4), and no other kernel reads as much as k (a widening cast of the cache would).
      const double cache = static_cast<double>(in.k.numel() + in.v.numel());
      bool split_kernel = false;
      for (const auto& r : runs) {
        INFO(r.kernel);
        if (r.kernel.find("flash_forward_kernel") != std::string::npos) {
          split_kernel = r.grid.z > 1;
          CHECK(r.global_load.bytes < 4 * cache);
        } else {
          CHECK(r.global_load.bytes < 2 * static_cast<double>(in.k.numel()));
        }
      }
      CHECK(split_kernel);
#endif
      check_16bit_as_widened(s, in, dtype, "split decoding");
    }
  }
}

TEST_CASE("flash attention kernels: the query-row decoding kernel, short and long caches, split and merged",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  // One query row a head without dropout (kernels/cuda/flash_decode.cu): a block decodes 4, 2 or 1
  // rows by the cache's length, and splits the keys when too few blocks would fill the device (16
  // emulated multiprocessors want 64 blocks; at least 2 of a block's key steps a split).
  const EmuDeviceScope scope({.threads = 16});
  struct Case {
    Problem s;
    bool split;
  };
  const std::vector<Case> cases = {
      {{6, 5, 1, 30, 64, 64, false, true}, false},  // beam-search-like: 4 rows a block, last batch all padded
      {{5, 2, 1, 90, 64, 48}, false},               // 2 rows a block, dv < d
      {{2, 3, 1, 100, 32, 24, true}, true},         // d 32 lanes, 4 rows a block over 2 splits
      {{1, 2, 1, 3000, 64, 64, true, true}, true},  // a long cache: a row a block, 23 splits
      {{1, 1, 1, 5000, 128, 100}, true},            // d 128, 64 splits (the merge's second lane slot)
      {{3, 1, 1, 200, 41, 41, false, true}, true},  // d 41: element loads; the last batch fully masked
  };
  for (const Case& c : cases) {
    const Problem& s = c.s;  // (not a structured binding: clang before 16 cannot capture one)
    [[maybe_unused]] const bool split = c.split;  // read by the profile checks only (none under the sanitizers)
    const Inputs in(s, 8);
    const Inputs dev = in.on_device();
#if !defined(__SANITIZE_ADDRESS__)
    const std::vector<::cuda_emu::KernelProfile> launches = forward_launches(s, in);
    INFO(s.name());
    // One launch, split or not: the last block of a row's splits merges them (last_block.cuh).
    REQUIRE(launches.size() == 1u);
    CHECK(launches[0].kernel.find("flash_decode_row_kernel") != std::string::npos);
    CHECK((launches[0].grid.z > 1) == split);
    // The cache is read once: k and v (whole 32-byte sectors of them), the padding flags and q.
    const double cache = 4.0 * static_cast<double>(in.k.numel() + in.v.numel());
    CHECK(launches[0].global_load.bytes < 1.05 * cache + 4.0 * static_cast<double>(in.q.numel() + s.b * s.tk));
#endif
    check_against_reference(s, in, dev, "query-row decoding");
    run_all_schedules([&] { return flash(s, dev)[0]; }, s.name() + " query-row decoding out");
    run_all_schedules([&] { return flash(s, dev)[1]; }, s.name() + " query-row decoding lse");

    // 16-bit caches are read as they are, in the float path's order: its result on the widened
    // inputs, bit for bit, out rounded once (on sm_61 too: no tensor cores needed).
    for (const auto& [dtype, arch] : {std::pair{DType::Float16, 61}, std::pair{DType::BFloat16, 80}}) {
      const EmuDeviceScope arch_scope({.arch = arch});
#if !defined(__SANITIZE_ADDRESS__)
      const std::vector<::cuda_emu::KernelProfile> runs = forward_launches(s, in, dtype);
      // out is written in its dtype by the kernels themselves: no widened out, no copy after.
      REQUIRE(runs.size() == 1u);
      CHECK(runs[0].kernel.find("flash_decode_row_kernel") != std::string::npos);
      CHECK(runs[0].global_load.bytes < 2.1 * static_cast<double>(in.k.numel() + in.v.numel()) +
                                            4.0 * static_cast<double>(in.q.numel() + s.b * s.tk));
#endif
      check_16bit_as_widened(s, in, dtype, "query-row decoding");
    }
  }
}

TEST_CASE("flash attention kernels: fully masked rows are exact zeros with lse -inf, forward and backward",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  // Batch 0 pads every key; causal with Tq > Tk leaves the first queries of batch 1 without keys.
  const Problem s{2, 2, 9, 5, 8, 8, true, false, 0.2};
  const Inputs in = Inputs(s, 3).on_device();
  kernels::AttentionMasking m = s.masking();
  m.key_padding_mask = from_vector(std::vector<std::int32_t>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0}, Shape{2, 5});
  const kernels::FlashAttentionOutput f = kernels::flash_attention_forward(in.q, in.k, in.v, m, 0.5);
  const kernels::AttentionGrads g =
      kernels::flash_attention_backward(in.up, in.q, in.k, in.v, f.out, f.lse, m, 0.5, true, true, true);
  const std::vector<double> out = values(f.out), lse = values(f.lse), gq = values(g.grad_q);
  const double inf = std::numeric_limits<double>::infinity();
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 9; ++i) {
      const bool dead = i < 4;  // batch 1: query i sees keys j <= i - 4
      for (const std::int64_t b : {std::int64_t{0}, std::int64_t{1}}) {
        if (b == 1 && !dead) continue;
        const std::int64_t row = (b * 2 + h) * 9 + i;
        CHECK(lse[static_cast<std::size_t>(row)] == -inf);
        for (std::int64_t c = 0; c < 8; ++c) {
          CHECK(out[static_cast<std::size_t>(row * 8 + c)] == 0.0);
          CHECK(gq[static_cast<std::size_t>(row * 8 + c)] == 0.0);
        }
      }
    }
  // Batch 0's keys get no gradient; everything is finite.
  for (const Tensor& t : {g.grad_k, g.grad_v}) {
    const std::vector<double> x = values(t);
    for (std::size_t e = 0; e < x.size(); ++e) {
      CHECK(std::isfinite(x[e]));
      if (e < x.size() / 2) CHECK(x[e] == 0.0);
    }
  }
  for (double x : gq) CHECK(std::isfinite(x));
}

// The point of the family: memory that does not grow with Tq * Tk. At B 1, H 4, Tq = Tk = 512,
// d 32 the score matrix is 4 MiB, eight times q; the unfused path holds it (and with dropout the
// dropped copy) through forward and backward, the fused path never allocates one.
TEST_CASE("flash attention kernels: no [B, H, Tq, Tk] tensor in device memory",
          "[cuda][flash_attention][family:flash_attention][memory]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;  // the emulated device's allocator statistics
  if (!define::cuda_emu::caching_allocator_enabled())
    DEFINE_SKIP_TEST(
        "reads the caching allocator's counters, which DEFINE_CUDA_CACHE=0 turns off (ctest runs the "
        "[memory] tests again with the cache on)");
  const Problem s{1, 4, 512, 512, 32, 32, true, false, 0.1};
  const Inputs in = Inputs(s, 1).on_device();
  const std::size_t scores = 4 * 512 * 512 * sizeof(float);
  auto& alloc = define::cuda_emu::allocator(0);
  // Synchronised on both sides: the emulated streams free a kernel's temporaries when its work is
  // done, so without it the peak would depend on how far the stream had got.
  const auto peak_above = [&](const auto& run) {
    define::cuda_emu::synchronize();
    const std::size_t before = alloc.stats().active_bytes;
    alloc.reset_peak();
    run();
    define::cuda_emu::synchronize();
    return alloc.stats().peak_active_bytes - before;
  };
  const std::size_t fused = peak_above([&] { (void)flash(s, in); });
  const std::size_t plain = peak_above([&] { (void)unfused(s, in); });
  const std::size_t io = static_cast<std::size_t>(in.q.numel()) * sizeof(float);  // one [B, H, T, d] tensor
  INFO("peak above the inputs: fused " << fused << " bytes, unfused " << plain << " bytes, scores " << scores
                                       << " bytes, q " << io << " bytes");
  // Fused: out, lse, delta and the three gradients (+ allocator rounding): about 4 x q, far below
  // the one [B, H, Tq, Tk] matrix the unfused path holds several of.
  CHECK(fused < 8 * io);
  CHECK(fused < scores / 2);
  // Unfused: the scores (P in place), D, dD / dS, plus the same outputs.
  CHECK(plain >= 3 * scores);
  fmt::print(
      "flash attention memory, B 1 H 4 Tq 512 Tk 512 d 32 dropout 0.1, forward + backward peak above the "
      "inputs: fused {:.2f} MiB, unfused {:.2f} MiB\n",
      fused / 1048576.0, plain / 1048576.0);
}

TEST_CASE("flash attention kernels: what the CUDA kernels refuse, named",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  const Tensor q = to_test_device(zeros({1, 1, 4, 129})), v = to_test_device(zeros({1, 1, 4, 8}));
  CHECK_THROWS_WITH(kernels::flash_attention_forward(q, q, v, {}, 1.0),
                    Catch::Contains("head dims d = 129, dv = 8: the CUDA kernels take at most 128"));
  const Tensor q64 = to_test_device(zeros({1, 1, 4, 8}, {.dtype = DType::Float64}));
  CHECK_THROWS_WITH(kernels::flash_attention_forward(q64, q64, q64, {}, 1.0), Catch::Contains("float64"));
  // 16-bit inputs are widened: the kernels run in float32 and out comes back in the inputs' dtype.
  const Tensor h = kernels::cast(to_test_device(rand_uniform({1, 2, 5, 8}, -1, 1)), DType::Float16);
  const kernels::FlashAttentionOutput r = kernels::flash_attention_forward(h, h, h, {.causal = true}, 0.3);
  CHECK(r.out.dtype() == DType::Float16);
  CHECK(r.lse.dtype() == DType::Float32);
}

TEST_CASE("flash attention kernels: the tensor-core forward and backward for 16-bit inputs against the reference",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;  // sets the emulated architecture
  // Tiles of 64 queries (16 a warp) by 64 keys (32 for head dims past 64); mma.m16n8k8 steps of 8
  // along d, so d and dv that are not multiples of 8 pad with zeros.
  const std::vector<Problem> problems = {
      {2, 2, 37, 53, 32, 32},
      {2, 1, 70, 150, 41, 41, true, true},
      {2, 2, 65, 65, 64, 64, true, true},   // the last batch fully masked
      {2, 1, 50, 40, 32, 16, true},         // Tq > Tk: the first 10 queries see nothing
      {2, 2, 1, 300, 64, 64, false, true},  // a decoding step
      {1, 2, 20, 30, 100, 72, true},
      {1, 2, 33, 47, 128, 128},
      {1, 3, 19, 100, 24, 40, false, false, 0.2},  // dropout
  };
  for (const auto& format : {std::tuple{DType::Float16, 75, 1.5e-3}, std::tuple{DType::BFloat16, 80, 1.2e-2}}) {
    // (Not structured bindings: dtype is captured below, which clang before 16 cannot do with one.)
    const DType dtype = std::get<0>(format);
    const int arch = std::get<1>(format);
    const double tol = std::get<2>(format);
    const EmuDeviceScope scope({.arch = arch});
    for (const Problem& s : problems) {
      const Inputs in(s);
      // The inputs rounded to 16 bits; the reference computes on them exactly (widened).
      const auto narrow = [&](const Tensor& t) { return kernels::cast(t, dtype); };
      const Tensor q = narrow(in.q), k = narrow(in.k), v = narrow(in.v);
      const kernels::AttentionMasking m = s.masking();
      const Tensor up = narrow(in.up);
      const Tensor qd = to_test_device(q), kd = to_test_device(k), vd = to_test_device(v);
      const kernels::FlashAttentionOutput got = kernels::flash_attention_forward(qd, kd, vd, m, s.scale());
      const kernels::AttentionGrads grads = kernels::flash_attention_backward(to_test_device(up), qd, kd, vd, got.out,
                                                                              got.lse, m, s.scale(), true, true, true);
      kernels::CpuBackendGuard guard(kernels::Backend::Ref);
      const auto wide = [](const Tensor& t) { return kernels::cast(t, DType::Float64); };
      const kernels::FlashAttentionOutput ref =
          kernels::flash_attention_forward(wide(q), wide(k), wide(v), m, s.scale());
      const kernels::AttentionGrads ref_grads = kernels::flash_attention_backward(
          wide(up), wide(q), wide(k), wide(v), ref.out, ref.lse, m, s.scale(), true, true, true);
      const std::string what = s.name() + " " + std::string(dtype_name(dtype));
      CHECK(got.out.dtype() == dtype);
      CHECK(got.lse.dtype() == DType::Float32);
      // P is rounded to 16 bits before it multiplies V, out once more at the end.
      check_close(kernels::cast(got.out, DType::Float64), ref.out, tol, tol, what + " out");
      check_lse(got.lse, ref.lse, what + " lse");
      // dS and D are rounded to 16 bits before they multiply Q, K or dO: gradients to a few of the
      // format's units against their sums' magnitude.
      const char* names[] = {"grad_q", "grad_k", "grad_v"};
      const Tensor* g[] = {&grads.grad_q, &grads.grad_k, &grads.grad_v};
      const Tensor* r[] = {&ref_grads.grad_q, &ref_grads.grad_k, &ref_grads.grad_v};
      for (int i = 0; i < 3; ++i) {
        CHECK(g[i]->dtype() == dtype);
        check_close(kernels::cast(*g[i], DType::Float64), *r[i], 2 * tol, 2 * tol, what + " " + names[i]);
      }
      // And it is the tensor-core kernel that ran: the FFMA kernels keep P in float32, so their out
      // (on the same 16-bit inputs, widened) differs in some element. A decoding step (at most 16
      // queries) runs the FFMA decoding kernels on the 16-bit cache as it is, which is the float
      // path on the widened inputs bit for bit.
      const kernels::FlashAttentionOutput ffma = kernels::flash_attention_forward(
          to_test_device(kernels::cast(q, DType::Float32)), to_test_device(kernels::cast(k, DType::Float32)),
          to_test_device(kernels::cast(v, DType::Float32)), m, s.scale());
      if (s.tq <= 16)
        CHECK(values(got.out) == values(kernels::cast(ffma.out, dtype)));
      else
        CHECK(values(got.out) != values(kernels::cast(ffma.out, dtype)));
      const auto f32 = [](const Tensor& t) { return to_test_device(kernels::cast(t, DType::Float32)); };
      const kernels::AttentionGrads ffma_grads = kernels::flash_attention_backward(
          f32(up), f32(q), f32(k), f32(v), f32(got.out), got.lse, m, s.scale(), true, true, true);
      CHECK(values(grads.grad_k) != values(kernels::cast(ffma_grads.grad_k, dtype)));
    }
  }
}

TEST_CASE("flash attention kernels: 16-bit inputs where the tensor cores cannot run take the FFMA path",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  // bfloat16 on sm_75 and float16 on sm_61: the float32 kernels on the widened inputs, out rounded
  // once: exactly what the float32 inputs widened by hand give.
  const Problem s{2, 2, 30, 45, 32, 32, true, true, 0.1};
  const Inputs in = Inputs(s, 5).on_device();
  for (const auto& [dtype, arch] : {std::pair{DType::BFloat16, 75}, std::pair{DType::Float16, 61}}) {
    const EmuDeviceScope scope({.arch = arch});
    const Tensor q = kernels::cast(in.q, dtype), k = kernels::cast(in.k, dtype), v = kernels::cast(in.v, dtype);
    const kernels::FlashAttentionOutput got = kernels::flash_attention_forward(q, k, v, s.masking(), s.scale());
    const kernels::FlashAttentionOutput wide =
        kernels::flash_attention_forward(kernels::cast(q, DType::Float32), kernels::cast(k, DType::Float32),
                                         kernels::cast(v, DType::Float32), s.masking(), s.scale());
    check_identical(got.out, kernels::cast(wide.out, dtype), std::string(dtype_name(dtype)) + " out");
    check_identical(got.lse, wide.lse, std::string(dtype_name(dtype)) + " lse");
    // The backward likewise: the float32 kernels on the widened 16-bit tensors, gradients rounded once.
    const Tensor up = kernels::cast(in.up, dtype);
    const auto f32 = [](const Tensor& t) { return kernels::cast(t, DType::Float32); };
    const kernels::AttentionGrads g =
        kernels::flash_attention_backward(up, q, k, v, got.out, got.lse, s.masking(), s.scale(), true, true, true);
    const kernels::AttentionGrads w = kernels::flash_attention_backward(
        f32(up), f32(q), f32(k), f32(v), f32(got.out), got.lse, s.masking(), s.scale(), true, true, true);
    check_identical(g.grad_q, kernels::cast(w.grad_q, dtype), std::string(dtype_name(dtype)) + " grad_q");
    check_identical(g.grad_k, kernels::cast(w.grad_k, dtype), std::string(dtype_name(dtype)) + " grad_k");
    check_identical(g.grad_v, kernels::cast(w.grad_v, dtype), std::string(dtype_name(dtype)) + " grad_v");
  }
}

TEST_CASE("flash attention kernels: the tensor-core kernels are bit-identical under every emulator schedule",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  const EmuDeviceScope scope({.arch = 80});
  for (const Problem& s : {Problem{2, 1, 70, 75, 32, 24, true, true, 0.3}, Problem{1, 1, 20, 40, 128, 128}}) {
    const Inputs in = Inputs(s, 2).on_device();
    for (const DType dtype : {DType::Float16, DType::BFloat16}) {
      const Tensor q = kernels::cast(in.q, dtype), k = kernels::cast(in.k, dtype), v = kernels::cast(in.v, dtype);
      run_all_schedules([&] { return kernels::flash_attention_forward(q, k, v, s.masking(), s.scale()).out; },
                        s.name() + " " + std::string(dtype_name(dtype)) + " out");
      run_all_schedules([&] { return kernels::flash_attention_forward(q, k, v, s.masking(), s.scale()).lse; },
                        s.name() + " " + std::string(dtype_name(dtype)) + " lse");
      const kernels::FlashAttentionOutput f = kernels::flash_attention_forward(q, k, v, s.masking(), s.scale());
      const Tensor up = kernels::cast(in.up, dtype);
      for (int i = 0; i < 3; ++i)
        run_all_schedules(
            [&] {
              const kernels::AttentionGrads g = kernels::flash_attention_backward(
                  up, q, k, v, f.out, f.lse, s.masking(), s.scale(), true, true, true);
              return i == 0 ? g.grad_q : i == 1 ? g.grad_k : g.grad_v;
            },
            s.name() + " " + std::string(dtype_name(dtype)) + " " + kFlashNames[i + 2]);
    }
  }
}

TEST_CASE("flash attention kernels: under mixed precision attention runs on the tensor cores",
          "[cuda][flash_attention][family:flash_attention]") {
  register_emu();
  if (define::test::kernel_test_device() != Device::emu()) return;
  // The autocast policy casts q, k and v to the region's 16-bit dtype (autograd/autocast.h), and the
  // fused op then runs the tensor-core kernels: the same bits as the kernels called on the cast inputs.
  const EmuDeviceScope scope({.arch = 80});
  const Problem s{2, 2, 21, 33, 32, 32, true};
  const Inputs in = Inputs(s, 8).on_device();
  for (const DType dtype : {DType::Float16, DType::BFloat16}) {
    Tensor got;
    {
      const autocast::Scope region(dtype);
      got = scaled_dot_product_attention(in.q, in.k, in.v, {.causal = true});
    }
    const Tensor q = kernels::cast(in.q, dtype), k = kernels::cast(in.k, dtype), v = kernels::cast(in.v, dtype);
    CHECK(got.dtype() == dtype);
    check_identical(got, kernels::flash_attention_forward(q, k, v, {.causal = true}, s.scale()).out,
                    std::string(dtype_name(dtype)) + " out");
  }
}
