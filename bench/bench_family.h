// DEFINE_BENCH_FAMILY("<name>"): names the op family (kernels/op_families.h) that a benchmark
// program in bench/ measures. It fails to compile when the name is not in the list, and
// tests/ops/op_coverage_test.cpp finds these lines in bench/*.cpp (the programs need not be built
// for that) to check that every family has a benchmark.
#pragma once

#include "kernels/op_families.h"

#define DEFINE_BENCH_FAMILY(name) \
  static_assert(::define::kernels::is_op_family(name), "DEFINE_BENCH_FAMILY: " name " is not in kernels/op_families.h")
