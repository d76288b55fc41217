// The kernel benchmark's cases (bench/kernels/kernel_bench.cpp): one per CUDA kernel, each
// naming the op family it measures. A header of its own so that the op coverage test
// (tests/ops/op_coverage_test.cpp) reads the same table without running a benchmark, also in
// builds without the benchmarks (DEFINE_BUILD_BENCH=OFF).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/factory.h"
#include "kernels/attention.h"
#include "kernels/copy.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/flash_attention.h"
#include "kernels/flash_rel_attention.h"
#include "kernels/index.h"
#include "kernels/layer_norm.h"
#include "kernels/matmul.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/rel_attention.h"
#include "kernels/softmax.h"

namespace define::bench::kernel_bench {

struct Problem {
  double bytes = 0;  // compulsory memory traffic of one call
  double flops = 0;  // for compute-bound kernels (GEMM); 0 otherwise
  std::function<void()> run;
};

// A case builds its inputs on a device at a size, and returns the call to time.
struct Case {
  std::string name;
  std::string family;              // the op family it measures (kernels/op_families.h)
  std::string size_gpu, size_emu;  // shown in the table
  std::function<Problem(Device device, bool gpu_size)> make;
};

inline Tensor uniform(const Shape& s, Device d) { return copy_to_device(rand_uniform(s, -1, 1), d); }
inline Tensor indices(const Shape& s, std::int64_t high, Device d) { return copy_to_device(rand_int(s, high), d); }
inline double f32_bytes(double elements) { return 4.0 * elements; }

inline std::vector<Case> cases() {
  std::vector<Case> c;
  // n elements: 64M on a GPU, 1M on the emulator.
  auto n_of = [](bool gpu) -> std::int64_t { return gpu ? (64 << 20) : (1 << 20); };

  c.push_back({"copy (transpose)", "copy", "8192x8192", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t n = gpu ? 8192 : 1024;
                 Tensor x = uniform({n, n}, d), y = empty({n, n}, {DType::Float32, d});
                 const Tensor xt = x.as_strided({n, n}, {1, n}, 0);
                 return Problem{f32_bytes(2.0 * n * n), 0, [=] { kernels::copy_into(y, xt); }};
               }});
  c.push_back({"fill", "copy", "64M", "1M", [n_of](Device d, bool gpu) {
                 Tensor y = empty({n_of(gpu)}, {DType::Float32, d});
                 return Problem{f32_bytes(n_of(gpu)), 0, [=] { kernels::fill(y, 1.5); }};
               }});
  c.push_back({"unary gelu", "elementwise", "64M", "1M", [n_of](Device d, bool gpu) {
                 Tensor x = uniform({n_of(gpu)}, d), y = empty_like(x);
                 return Problem{f32_bytes(2.0 * n_of(gpu)), 0,
                                [=] { kernels::unary_into(kernels::UnaryOp::Gelu, y, x); }};
               }});
  c.push_back({"binary add (row broadcast)", "elementwise", "16384x4096 + 4096", "1024x1024 + 1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor a = uniform({r, k}, d), b = uniform({k}, d), y = empty_like(a);
                 return Problem{f32_bytes(2.0 * r * k + k), 0,
                                [=] { kernels::binary_into(kernels::BinaryOp::Add, y, a, b); }};
               }});
  c.push_back({"sum (last dim)", "reduce", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = uniform({r, k}, d);
                 return Problem{f32_bytes(1.0 * r * k + r), 0, [=] { (void)kernels::sum(x, {1}, false); }};
               }});
  // Rows of 16-bit values (activations under mixed precision), read as 16-bit and summed in float.
  c.push_back({"sum (last dim) float16", "reduce", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = kernels::cast(uniform({r, k}, d), DType::Float16);
                 return Problem{2.0 * (1.0 * r * k + r), 0, [=] { (void)kernels::sum(x, {1}, false); }};
               }});
  c.push_back({"sum (first dim)", "reduce", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = uniform({r, k}, d);
                 return Problem{f32_bytes(1.0 * r * k + k), 0, [=] { (void)kernels::sum(x, {0}, false); }};
               }});
  // Two reduced dims that do not merge: a bias gradient of relative attention, [B, H, T, d] summed
  // over the batch and time dims (Transformer-XL's u and w).
  c.push_back(
      {"sum (batch and time dims)", "reduce", "64x8x512x64", "4x4x150x64", [](Device d, bool gpu) {
         const std::int64_t b = gpu ? 64 : 4, h = gpu ? 8 : 4, t = gpu ? 512 : 150, k = 64;
         Tensor x = uniform({b, h, t, k}, d);
         return Problem{f32_bytes(1.0 * b * h * t * k + h * k), 0, [=] { (void)kernels::sum(x, {0, 2}, false); }};
       }});
  c.push_back({"column_sum", "matmul", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = uniform({r, k}, d);
                 return Problem{f32_bytes(1.0 * r * k + k), 0, [=] { (void)kernels::column_sum(x); }};
               }});
  // A bias gradient under mixed precision: the same sum of 16-bit rows, in float, rounded once.
  c.push_back({"column_sum float16", "matmul", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = kernels::cast(uniform({r, k}, d), DType::Float16);
                 return Problem{2.0 * (1.0 * r * k + k), 0, [=] { (void)kernels::column_sum(x); }};
               }});
  c.push_back({"log_softmax", "softmax", "4096x32000", "256x10000", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 4096 : 256, v = gpu ? 32000 : 10000;
                 Tensor x = uniform({r, v}, d);
                 return Problem{f32_bytes(2.0 * r * v), 0, [=] { (void)kernels::log_softmax(x, 1); }};
               }});
  c.push_back({"cross_entropy rows", "softmax", "4096x32000", "256x10000", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 4096 : 256, v = gpu ? 32000 : 10000;
                 Tensor x = uniform({r, v}, d), t = indices({r}, v, d);
                 return Problem{f32_bytes(1.0 * r * v + 2.0 * r), 0,
                                [=] { (void)kernels::cross_entropy_rows(x, t, -100, 0.0); }};
               }});
  c.push_back({"layer_norm forward", "layer_norm", "16384x1024", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = 1024;
                 Tensor x = uniform({r, k}, d), w = uniform({k}, d), b = uniform({k}, d);
                 return Problem{f32_bytes(2.0 * r * k + 2.0 * r), 0, [=] { (void)kernels::layer_norm(x, w, b, 1e-5); }};
               }});
  c.push_back({"layer_norm backward", "layer_norm", "16384x1024", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = 1024;
                 Tensor x = uniform({r, k}, d), w = uniform({k}, d), b = uniform({k}, d), dy = uniform({r, k}, d);
                 const kernels::LayerNormOutputs o = kernels::layer_norm(x, w, b, 1e-5);
                 return Problem{f32_bytes(3.0 * r * k + 2.0 * r), 0, [=] {
                                  (void)kernels::layer_norm_backward(dy, x, w, o.mean, o.rstd, true, true, true);
                                }};
               }});
  c.push_back({"adam_update", "optim", "64M", "1M", [n_of](Device d, bool gpu) {
                 const Shape s{n_of(gpu)};
                 Tensor p = uniform(s, d), g = uniform(s, d), m = uniform(s, d);
                 Tensor v = copy_to_device(rand_uniform(s, 0, 1), d);  // a second moment is >= 0
                 const kernels::AdamHyper h{.step_size = 1e-3};
                 // Reads p, g, m and v, writes p, m and v.
                 return Problem{f32_bytes(7.0 * n_of(gpu)), 0, [=] { kernels::adam_update(p, g, m, v, h); }};
               }});
  c.push_back({"dropout", "dropout", "64M", "1M", [n_of](Device d, bool gpu) {
                 Tensor x = uniform({n_of(gpu)}, d);
                 return Problem{f32_bytes(2.0 * n_of(gpu)), 0, [=] { (void)kernels::dropout_apply(x, 0.3, 7, 0); }};
               }});
  // The unfused attention's row kernels (the translation Transformer's path when fused attention is
  // off): causal masked softmax + dropout (reads S, writes P and D) and its backward (reads P and
  // dD, writes dS and D), at B x H x T x T.
  c.push_back({"attention rows", "attention", "64x8x256x256", "8x8x64x128", [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 64 : 8, h = 8, tq = gpu ? 256 : 64, tk = gpu ? 256 : 128;
                 Tensor s = uniform({b, h, tq, tk}, d);
                 const kernels::AttentionMasking m{.causal = true, .dropout = 0.1, .seed = 7};
                 return Problem{f32_bytes(3.0 * b * h * tq * tk), 0, [=] { (void)kernels::attention_softmax(s, m); }};
               }});
  c.push_back({"attention rows backward", "attention", "64x8x256x256", "8x8x64x128", [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 64 : 8, h = 8, tq = gpu ? 256 : 64, tk = gpu ? 256 : 128;
                 const kernels::AttentionMasking m{.causal = true, .dropout = 0.1, .seed = 7};
                 const Tensor probs = kernels::attention_softmax(uniform({b, h, tq, tk}, d), m).probs;
                 Tensor g = uniform({b, h, tq, tk}, d);
                 return Problem{f32_bytes(4.0 * b * h * tq * tk), 0,
                                [=] { (void)kernels::attention_softmax_backward(probs, g, m, 0.125); }};
               }});
  // Transformer-XL's fused relative-attention row kernel (scores from AC and the shifted BD, causal
  // + window mask, softmax, dropout: reads AC and BD, writes P and D) and its backward's unshift,
  // at B x H x Tq x Tk with a memory of M = Tq.
  c.push_back({"rel_attention rows", "rel_attention", "64x8x150x300", "8x8x64x128", [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 64 : 8, h = 8, tq = gpu ? 150 : 64, tk = 2 * tq;
                 Tensor ac = uniform({b, h, tq, tk}, d), bd = uniform({b, h, tq, tk}, d);
                 const kernels::RelAttentionParams p{.window = tq, .scale = 0.15, .dropout = 0.1, .seed = 7};
                 return Problem{f32_bytes(4.0 * b * h * tq * tk), 0,
                                [=] { (void)kernels::rel_attention_softmax(ac, bd, p); }};
               }});
  c.push_back({"rel_attention unshift", "rel_attention", "64x8x150x300", "8x8x64x128", [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 64 : 8, h = 8, tq = gpu ? 150 : 64, tk = 2 * tq;
                 Tensor g = uniform({b, h, tq, tk}, d);
                 return Problem{f32_bytes(2.0 * b * h * tq * tk), 0, [=] { (void)kernels::rel_attention_unshift(g); }};
               }});
  // The fused flash-attention kernels (kernels/flash_attention.h) at B x H x T x T, d = dv = 64, no mask:
  // compute-bound, so the FLOPs the kernels execute (forward: S = Q K^T and P V; backward: S and dD
  // recomputed by both the dK/dV and the dQ kernel, then dV, dK and dQ). Bytes: q, k, v, out (and
  // for the backward dO, lse and the three gradients) once each.
  c.push_back(
      {"flash_attention forward", "flash_attention", "16x8x512x512 d64", "1x2x128x128 d64", [](Device d, bool gpu) {
         const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, t = gpu ? 512 : 128, hd = 64;
         Tensor q = uniform({b, h, t, hd}, d), k = uniform({b, h, t, hd}, d), v = uniform({b, h, t, hd}, d);
         return Problem{f32_bytes(4.0 * b * h * t * hd + b * h * t), 2.0 * b * h * t * t * (hd + hd),
                        [=] { (void)kernels::flash_attention_forward(q, k, v, {}, 0.125); }};
       }});
  c.push_back(
      {"flash_attention backward", "flash_attention", "16x8x512x512 d64", "1x2x128x128 d64", [](Device d, bool gpu) {
         const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, t = gpu ? 512 : 128, hd = 64;
         Tensor q = uniform({b, h, t, hd}, d), k = uniform({b, h, t, hd}, d), v = uniform({b, h, t, hd}, d);
         Tensor up = uniform({b, h, t, hd}, d);
         const kernels::FlashAttentionOutput f = kernels::flash_attention_forward(q, k, v, {}, 0.125);
         return Problem{
             f32_bytes(8.0 * b * h * t * hd + b * h * t), 2.0 * b * h * t * t * (4 * hd + 3 * hd),
             [=] { (void)kernels::flash_attention_backward(up, q, k, v, f.out, f.lse, {}, 0.125, true, true, true); }};
       }});
  // A step of incremental decoding with a small batch: one query row per head against a long key /
  // value cache (the query-row kernel, kernels/cuda/flash_decode.cu), too few rows to fill the GPU on
  // their own; split decoding spreads the keys over more blocks and merges them. Bytes: k and v once.
  c.push_back({"flash_attention decode", "flash_attention", "1x8x1x4096 d64", "1x2x1x1024 d64", [](Device d, bool gpu) {
                 const std::int64_t h = gpu ? 8 : 2, t = gpu ? 4096 : 1024, hd = 64;
                 Tensor q = uniform({1, h, 1, hd}, d), k = uniform({1, h, t, hd}, d), v = uniform({1, h, t, hd}, d);
                 return Problem{f32_bytes(2.0 * h * t * hd), 0,  // bandwidth-bound: 4 FLOPs per 8 bytes
                                [=] { (void)kernels::flash_attention_forward(q, k, v, {}, 0.125); }};
               }});
  // The same step with a float16 cache, read as it is by the decoding kernels (no widened copy, out
  // written in float16): half the bytes. Bytes: k and v once, 2 bytes an element.
  c.push_back(
      {"flash_attention decode float16", "flash_attention", "1x8x1x4096 d64", "1x2x1x1024 d64", [](Device d, bool gpu) {
         const std::int64_t h = gpu ? 8 : 2, t = gpu ? 4096 : 1024, hd = 64;
         const auto half = [&](Shape shape) { return kernels::cast(uniform(std::move(shape), d), DType::Float16); };
         Tensor q = half({1, h, 1, hd}), k = half({1, h, t, hd}), v = half({1, h, t, hd});
         return Problem{2.0 * 2.0 * h * t * hd, 0, [=] { (void)kernels::flash_attention_forward(q, k, v, {}, 0.125); }};
       }});
  // A step of beam search: 128 sentences x 5 beams, one query row per head against a short cache,
  // four rows a block. Bytes: q, k, v and out once.
  c.push_back({"flash_attention decode (beam search)", "flash_attention", "640x8x1x32 d64", "40x2x1x32 d64",
               [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 640 : 40, h = gpu ? 8 : 2, t = 32, hd = 64;
                 Tensor q = uniform({b, h, 1, hd}, d), k = uniform({b, h, t, hd}, d), v = uniform({b, h, t, hd}, d);
                 return Problem{f32_bytes(2.0 * b * h * t * hd + 2.0 * b * h * hd), 0,
                                [=] { (void)kernels::flash_attention_forward(q, k, v, {}, 0.125); }};
               }});
  // The tensor-core kernels (kernels/cuda/flash_attention_mma.cu) on 16-bit q, k, v at the same size: on
  // a GPU from sm_75 (float16) / sm_80 (bfloat16); elsewhere, and on the emulated device below sm_75,
  // the FFMA kernels on widened copies.
  for (const auto& [name, dtype] : {std::pair{"flash_attention forward float16", DType::Float16},
                                    std::pair{"flash_attention forward bfloat16", DType::BFloat16}}) {
    c.push_back({name, "flash_attention", "16x8x512x512 d64", "1x2x128x128 d64", [dtype = dtype](Device d, bool gpu) {
                   const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, t = gpu ? 512 : 128, hd = 64;
                   const auto half = [&](Shape shape) { return kernels::cast(uniform(std::move(shape), d), dtype); };
                   Tensor q = half({b, h, t, hd}), k = half({b, h, t, hd}), v = half({b, h, t, hd});
                   return Problem{2.0 * 4.0 * b * h * t * hd + 4.0 * b * h * t, 2.0 * b * h * t * t * (hd + hd),
                                  [=] { (void)kernels::flash_attention_forward(q, k, v, {}, 0.125); }};
                 }});
  }
  for (const auto& [name, dtype] : {std::pair{"flash_attention backward float16", DType::Float16},
                                    std::pair{"flash_attention backward bfloat16", DType::BFloat16}}) {
    c.push_back({name, "flash_attention", "16x8x512x512 d64", "1x2x128x128 d64", [dtype = dtype](Device d, bool gpu) {
                   const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, t = gpu ? 512 : 128, hd = 64;
                   const auto half = [&](Shape shape) { return kernels::cast(uniform(std::move(shape), d), dtype); };
                   Tensor q = half({b, h, t, hd}), k = half({b, h, t, hd}), v = half({b, h, t, hd});
                   Tensor up = half({b, h, t, hd});
                   const kernels::FlashAttentionOutput f = kernels::flash_attention_forward(q, k, v, {}, 0.125);
                   return Problem{2.0 * 8.0 * b * h * t * hd + 8.0 * b * h * t, 2.0 * b * h * t * t * (4 * hd + 3 * hd),
                                  [=] {
                                    (void)kernels::flash_attention_backward(up, q, k, v, f.out, f.lse, {}, 0.125, true,
                                                                            true, true);
                                  }};
                 }});
  }
  // The fused relative-attention kernels (kernels/flash_rel_attention.h) at Transformer-XL's lengths:
  // B x H x Tq queries against a memory of Tq (Tk = 2 Tq), d = dv = 64, a window of Tk. FLOPs over the
  // visible (query, key) pairs, Tq (M + (Tq + 1) / 2) per head: forward q . (k + r_p) and P V; backward
  // the dK/dV, dQ and dR kernels each recompute the scores and dD, then dV, dK; dqu, dqw; dR. Bytes:
  // q, k, v, r, out (and for the backward dO, lse and the gradients) once each.
  const auto rel_pairs = [](std::int64_t b, std::int64_t h, std::int64_t tq) {
    return double(b) * double(h) * double(tq) * (double(tq) + (double(tq) + 1) / 2);
  };
  c.push_back({"flash_rel_attention forward", "flash_rel_attention", "16x8x150x300 d64", "1x2x64x128 d64",
               [rel_pairs](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, tq = gpu ? 150 : 64, tk = 2 * tq, hd = 64;
                 Tensor q = uniform({b, h, tq, hd}, d), k = uniform({b, h, tk, hd}, d), v = uniform({b, h, tk, hd}, d);
                 Tensor r = uniform({h, tk, hd}, d), u = uniform({h, hd}, d), w = uniform({h, hd}, d);
                 const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
                 return Problem{f32_bytes(double(b) * h * (2.0 * tq * hd + 2.0 * tk * hd + tq) + double(h) * tk * hd),
                                2.0 * rel_pairs(b, h, tq) * (3 * hd),
                                [=] { (void)kernels::flash_rel_attention_forward(q, k, v, r, u, w, p); }};
               }});
  // A step of generation against Transformer-XL's evaluation memory (1,600 on WikiText-103): one query
  // row a head, the query-row kernel's relative form (kernels/cuda/flash_decode.cu). Bytes: k, v and r
  // once.
  c.push_back(
      {"flash_rel_attention decode", "flash_rel_attention", "4x8x1x1600 d64", "1x2x1x512 d64", [](Device d, bool gpu) {
         const std::int64_t b = gpu ? 4 : 1, h = gpu ? 8 : 2, tk = gpu ? 1600 : 512, hd = 64;
         Tensor q = uniform({b, h, 1, hd}, d), k = uniform({b, h, tk, hd}, d), v = uniform({b, h, tk, hd}, d);
         Tensor r = uniform({h, tk, hd}, d), u = uniform({h, hd}, d), w = uniform({h, hd}, d);
         const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
         return Problem{f32_bytes(2.0 * b * h * tk * hd + double(h) * tk * hd), 0,
                        [=] { (void)kernels::flash_rel_attention_forward(q, k, v, r, u, w, p); }};
       }});
  // The same step in mixed precision: a float16 memory, r, u and w, read as they are (no widened
  // copies, out written in float16). Bytes: k, v and r once, 2 bytes an element.
  c.push_back({"flash_rel_attention decode float16", "flash_rel_attention", "4x8x1x1600 d64", "1x2x1x512 d64",
               [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 4 : 1, h = gpu ? 8 : 2, tk = gpu ? 1600 : 512, hd = 64;
                 const auto half = [&](Shape shape) {
                   return kernels::cast(uniform(std::move(shape), d), DType::Float16);
                 };
                 Tensor q = half({b, h, 1, hd}), k = half({b, h, tk, hd}), v = half({b, h, tk, hd});
                 Tensor r = half({h, tk, hd}), u = half({h, hd}), w = half({h, hd});
                 const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
                 return Problem{2.0 * (2.0 * b * h * tk * hd + double(h) * tk * hd), 0,
                                [=] { (void)kernels::flash_rel_attention_forward(q, k, v, r, u, w, p); }};
               }});
  c.push_back(
      {"flash_rel_attention backward", "flash_rel_attention", "16x8x150x300 d64", "1x2x64x128 d64",
       [rel_pairs](Device d, bool gpu) {
         const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, tq = gpu ? 150 : 64, tk = 2 * tq, hd = 64;
         Tensor q = uniform({b, h, tq, hd}, d), k = uniform({b, h, tk, hd}, d), v = uniform({b, h, tk, hd}, d);
         Tensor r = uniform({h, tk, hd}, d), u = uniform({h, hd}, d), w = uniform({h, hd}, d);
         Tensor up = uniform({b, h, tq, hd}, d);
         const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
         const kernels::FlashAttentionOutput f = kernels::flash_rel_attention_forward(q, k, v, r, u, w, p);
         return Problem{
             f32_bytes(double(b) * h * (6.0 * tq * hd + 4.0 * tk * hd + 2.0 * tq) + double(b + 1) * h * tk * hd),
             2.0 * rel_pairs(b, h, tq) * (14 * hd),
             [=] { (void)kernels::flash_rel_attention_backward(up, q, k, v, r, u, w, f.out, f.lse, p, {}); }};
       }});
  // The tensor-core kernels (kernels/cuda/flash_rel_attention_mma.cu) on float16 inputs at the same size:
  // on a GPU from sm_75; elsewhere, and on the emulated device below sm_75, the FFMA kernels on widened
  // copies. FLOPs as the float32 cases count them (the position products the tiles compute past the
  // band are not counted). Bytes: the same tensors, 2 bytes an element (lse, delta and dr's float32
  // parts 4).
  c.push_back({"flash_rel_attention forward float16", "flash_rel_attention", "16x8x150x300 d64", "1x2x64x128 d64",
               [rel_pairs](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, tq = gpu ? 150 : 64, tk = 2 * tq, hd = 64;
                 const auto half = [&](Shape shape) {
                   return kernels::cast(uniform(std::move(shape), d), DType::Float16);
                 };
                 Tensor q = half({b, h, tq, hd}), k = half({b, h, tk, hd}), v = half({b, h, tk, hd});
                 Tensor r = half({h, tk, hd}), u = half({h, hd}), w = half({h, hd});
                 const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
                 return Problem{
                     2.0 * (double(b) * h * (2.0 * tq * hd + 2.0 * tk * hd) + double(h) * tk * hd) + 4.0 * b * h * tq,
                     2.0 * rel_pairs(b, h, tq) * (3 * hd),
                     [=] { (void)kernels::flash_rel_attention_forward(q, k, v, r, u, w, p); }};
               }});
  c.push_back(
      {"flash_rel_attention backward float16", "flash_rel_attention", "16x8x150x300 d64", "1x2x64x128 d64",
       [rel_pairs](Device d, bool gpu) {
         const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, tq = gpu ? 150 : 64, tk = 2 * tq, hd = 64;
         const auto half = [&](Shape shape) { return kernels::cast(uniform(std::move(shape), d), DType::Float16); };
         Tensor q = half({b, h, tq, hd}), k = half({b, h, tk, hd}), v = half({b, h, tk, hd});
         Tensor r = half({h, tk, hd}), u = half({h, hd}), w = half({h, hd});
         Tensor up = half({b, h, tq, hd});
         const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
         const kernels::FlashAttentionOutput f = kernels::flash_rel_attention_forward(q, k, v, r, u, w, p);
         return Problem{2.0 * (double(b) * h * (6.0 * tq * hd + 4.0 * tk * hd) + 2.0 * h * tk * hd) +
                            4.0 * (2.0 * b * h * tq + double(b) * h * tk * hd),
                        2.0 * rel_pairs(b, h, tq) * (14 * hd), [=] {
                          (void)kernels::flash_rel_attention_backward(up, q, k, v, r, u, w, f.out, f.lse, p, {});
                        }};
       }});
  // The unfused relative attention at the same size, for the fused kernels to be read against: GEMMs
  // over every (query, key) pair and the [B, H, Tq, Tk] score tensors through memory (forward: AC and
  // BD written and read, P and D written and D read; backward: dD, dS, dBD and D each written and read).
  c.push_back({"rel_attention forward (unfused)", "rel_attention", "16x8x150x300 d64", "1x2x64x128 d64",
               [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, tq = gpu ? 150 : 64, tk = 2 * tq, hd = 64;
                 Tensor q = uniform({b, h, tq, hd}, d), k = uniform({b, h, tk, hd}, d), v = uniform({b, h, tk, hd}, d);
                 Tensor r = uniform({h, tk, hd}, d), u = uniform({h, hd}, d), w = uniform({h, hd}, d);
                 const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
                 const double scores = double(b) * h * tq * tk;
                 return Problem{f32_bytes(7.0 * scores + double(b) * h * (2.0 * tq * hd + 2.0 * tk * hd)),
                                2.0 * scores * (3 * hd),
                                [=] { (void)kernels::rel_attention_forward(q, k, v, r, u, w, p, true); }};
               }});
  c.push_back({"rel_attention backward (unfused)", "rel_attention", "16x8x150x300 d64", "1x2x64x128 d64",
               [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 16 : 1, h = gpu ? 8 : 2, tq = gpu ? 150 : 64, tk = 2 * tq, hd = 64;
                 Tensor q = uniform({b, h, tq, hd}, d), k = uniform({b, h, tk, hd}, d), v = uniform({b, h, tk, hd}, d);
                 Tensor r = uniform({h, tk, hd}, d), u = uniform({h, hd}, d), w = uniform({h, hd}, d);
                 Tensor up = uniform({b, h, tq, hd}, d);
                 const kernels::RelAttentionParams p{.window = tk, .scale = 0.125};
                 const Tensor probs = kernels::rel_attention_forward(q, k, v, r, u, w, p, true).probs;
                 const double scores = double(b) * h * tq * tk;
                 return Problem{f32_bytes(9.0 * scores + double(b) * h * (6.0 * tq * hd + 4.0 * tk * hd)),
                                2.0 * scores * (6 * hd),
                                [=] { (void)kernels::rel_attention_backward(up, q, k, v, r, u, w, probs, p, {}); }};
               }});
  c.push_back({"embedding forward", "embedding", "65536 tok x 1024", "8192 tok x 400", [](Device d, bool gpu) {
                 const std::int64_t t = gpu ? 65536 : 8192, m = gpu ? 1024 : 400, v = 10000;
                 Tensor w = uniform({v, m}, d), idx = indices({t}, v, d);
                 return Problem{f32_bytes(2.0 * t * m) + 8.0 * t, 0, [=] { (void)kernels::embedding(w, idx); }};
               }});
  c.push_back({"embedding backward", "embedding", "65536 tok x 1024", "8192 tok x 400", [](Device d, bool gpu) {
                 const std::int64_t t = gpu ? 65536 : 8192, m = gpu ? 1024 : 400, v = 10000;
                 Tensor g = uniform({t, m}, d), idx = indices({t}, v, d);
                 return Problem{f32_bytes(1.0 * t * m + 1.0 * v * m) + 8.0 * t, 0,
                                [=] { (void)kernels::embedding_backward(g, idx, v, -1); }};
               }});
  c.push_back({"index_select rows", "index", "65536 of 16384x1024", "8192 of 4096x256", [](Device d, bool gpu) {
                 const std::int64_t t = gpu ? 65536 : 8192, r = gpu ? 16384 : 4096, m = gpu ? 1024 : 256;
                 Tensor x = uniform({r, m}, d), idx = indices({t}, r, d);
                 return Problem{f32_bytes(2.0 * t * m) + 8.0 * t, 0, [=] { (void)kernels::index_select(x, 0, idx); }};
               }});
  c.push_back({"gemm (default path)", "matmul", "4096^3", "256^3", [](Device d, bool gpu) {
                 const std::int64_t n = gpu ? 4096 : 256;
                 Tensor a = uniform({n, n}, d), b = uniform({n, n}, d);
                 return Problem{f32_bytes(3.0 * n * n), 2.0 * n * n * n, [=] { (void)kernels::matmul(a, b); }};
               }});
  // Mixed precision's GEMMs: 16-bit operands with float accumulation (cublasGemmEx on a GPU, tensor
  // cores from sm_70 for float16 and sm_80 for bfloat16), against the float32 SGEMM above.
  for (const auto& [name, dtype] : {std::pair{"gemm float16 (GemmEx)", DType::Float16},
                                    std::pair{"gemm bfloat16 (GemmEx)", DType::BFloat16}}) {
    c.push_back({name, "matmul", "4096^3", "256^3", [dtype = dtype](Device d, bool gpu) {
                   const std::int64_t n = gpu ? 4096 : 256;
                   Tensor a = kernels::cast(uniform({n, n}, d), dtype), b = kernels::cast(uniform({n, n}, d), dtype);
                   return Problem{2.0 * 3.0 * n * n, 2.0 * n * n * n, [=] { (void)kernels::matmul(a, b); }};
                 }});
  }
  // The backend's own tiled kernel (the emulated device's default; on a GPU it reads as a share of cuBLAS).
  c.push_back({"gemm (tiled kernel)", "matmul", "4096^3", "256^3", [](Device d, bool gpu) {
                 const std::int64_t n = gpu ? 4096 : 256;
                 Tensor a = uniform({n, n}, d), b = uniform({n, n}, d);
                 return Problem{f32_bytes(3.0 * n * n), 2.0 * n * n * n, [=] {
                                  const kernels::CudaGemm previous = kernels::cuda_gemm();
                                  kernels::set_cuda_gemm(kernels::CudaGemm::Tiled);
                                  (void)kernels::matmul(a, b);
                                  kernels::set_cuda_gemm(previous);
                                }};
               }});
  c.push_back({"bmm 64 x 128^3", "matmul", "64x128^3", "8x128^3", [](Device d, bool gpu) {
                 const std::int64_t batch = gpu ? 64 : 8, n = 128;
                 Tensor a = uniform({batch, n, n}, d), b = uniform({batch, n, n}, d);
                 return Problem{f32_bytes(3.0 * batch * n * n), 2.0 * batch * n * n * n,
                                [=] { (void)kernels::matmul(a, b); }};
               }});
  return c;
}

}  // namespace define::bench::kernel_bench
