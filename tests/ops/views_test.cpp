// Views and copies in the op harness: every view's backward maps the gradient back exactly.
#include <catch2/catch.hpp>

#include "harness/op_harness.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;

TEST_CASE("ops: views and copies", "[ops][harness][views][family:copy]") {
  using V = const std::vector<Tensor>&;
  InputSpec m34{.shape = {3, 4}}, m234{.shape = {2, 3, 4}};
  InputSpec nc34{.shape = {3, 4}, .non_contiguous = true};
  define::test::run_op_cases({
      {.name = "reshape/split_dims", .inputs = {m234}, .forward = [](V x) { return reshape(x[0], {6, 2, 2}); }},
      {.name = "reshape/non_contiguous_copy", .inputs = {nc34}, .forward = [](V x) { return reshape(x[0], {12}); }},
      {.name = "view/merge", .inputs = {m234}, .forward = [](V x) { return view(x[0], {6, 4}); }},
      {.name = "flatten", .inputs = {m234}, .forward = [](V x) { return flatten(x[0], 1, 2); }},
      {.name = "transpose", .inputs = {m234}, .forward = [](V x) { return transpose(x[0], 0, 2); }},
      {.name = "permute", .inputs = {m234}, .forward = [](V x) { return permute(x[0], {1, 2, 0}); }},
      {.name = "narrow", .inputs = {m234}, .forward = [](V x) { return narrow(x[0], 2, 1, 2); }},
      {.name = "narrow/non_contiguous", .inputs = {nc34}, .forward = [](V x) { return narrow(x[0], 0, 1, 2); }},
      {.name = "select", .inputs = {m234}, .forward = [](V x) { return select(x[0], 1, -1); }},
      {.name = "expand", .inputs = {InputSpec{.shape = {3, 1}}}, .forward = [](V x) { return expand(x[0], {2, 3, 4}); }},
      {.name = "squeeze_unsqueeze", .inputs = {InputSpec{.shape = {1, 3, 1}}},
       .forward = [](V x) { return unsqueeze(squeeze(x[0]), 1); }},
      {.name = "contiguous", .inputs = {nc34}, .forward = [](V x) { return contiguous(x[0]); }},
      // Sources whose rows are contiguous: a slab of a larger tensor, rows broadcast over leading
      // dims (the CPU path's row loop), and one big enough to be shared out over threads.
      {.name = "contiguous/slab_rows", .inputs = {m234}, .forward = [](V x) { return contiguous(narrow(x[0], 1, 1, 2)); }},
      {.name = "contiguous/broadcast_rows", .inputs = {InputSpec{.shape = {4}}},
       .forward = [](V x) { return contiguous(expand(x[0], {2, 3, 4})); }},
      {.name = "contiguous/broadcast_rows_threads", .inputs = {InputSpec{.shape = {1, 3, 257}}},
       .forward = [](V x) { return contiguous(expand(x[0], {60, 3, 257})); }, .gradcheck = false},
      {.name = "clone", .inputs = {m34}, .forward = [](V x) { return clone(x[0]); }},
      {.name = "to_dtype/round_trip", .inputs = {m34},
       // Up to float64 and back: exact in both directions for float32 inputs.
       .forward = [](V x) { return to_dtype(mul(to_dtype(x[0], DType::Float64), 2.0), x[0].dtype()); }},
  });
}
