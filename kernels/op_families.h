// The op families: the one list of them. A family is a group of kernels with one entry-point
// header (kernels/<name>.h), one backend contract (kernels/contracts/<name>.inc) and an
// implementation in every backend (kernels/backend.h).
//
// Tests and benchmarks name the family they cover: the Catch2 tag [family:<name>] on op-harness
// test cases (tests/ops/) and emulator kernel tests (tests/cuda/), the family field of a
// kernel_bench case (bench/kernels/kernel_cases.h), DEFINE_BENCH_FAMILY("<name>") in a family
// benchmark (bench/*_bench.cpp). tests/ops/op_coverage_test.cpp fails when a family listed here
// lacks any of the three, or when a test or benchmark names a family not listed here.
//
// Fused ops without a backend contract of their own are not families: linear_cross_entropy
// (kernels/linear_cross_entropy.h, autograd/linear_cross_entropy.h) has a fast CPU kernel only and
// composes the matmul and softmax kernels elsewhere; its tests and benchmark count for "softmax".
#pragma once

#include <array>
#include <string_view>

namespace define::kernels {

inline constexpr std::array<std::string_view, 18> kOpFamilies = {
    "copy",
    "elementwise",
    "reduce",
    "softmax",
    "layer_norm",
    "dropout",
    "embedding",
    "index",
    "matmul",
    "grouped_linear",
    "split_mix",
    "attention",
    "flash_attention",
    "rel_attention",
    "flash_rel_attention",
    "adaptive_softmax",
    "lstm",
    "optim",
};

constexpr bool is_op_family(std::string_view name) {
  for (std::string_view f : kOpFamilies)
    if (f == name) return true;
  return false;
}

}  // namespace define::kernels
