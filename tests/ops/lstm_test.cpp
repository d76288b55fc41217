// The fused LSTM layer (lstm_layer): harness cases (fast CPU path and the CUDA cell kernels on the
// emulated device against the reference, float64 Jacobians of every input through all three
// results), one step by hand, empty sequences and batches, and the named errors for bad input.
// The comparison with an unfused composition of autograd ops is in tests/nn/lstm_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <tuple>

#include <omp.h>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/cpu/lstm.h"
#include "kernels/devices.h"
#include "kernels/ref/lstm.h"

using namespace define;
using Catch::Contains;
using define::test::InputSpec;
using V = const std::vector<Tensor>&;

namespace {

struct Sizes {
  std::int64_t T, B, I, H;
};

// Weights in +-0.5 keep most gates out of saturation for the widths used here.
InputSpec spec(Shape shape, bool non_contiguous = false, double range = 1.0) {
  InputSpec s;
  s.shape = std::move(shape);
  s.non_contiguous = non_contiguous;
  s.lo = -range;
  s.hi = range;
  return s;
}

// All three results in one vector, so the harness's upstream gradient reaches y, h_n and c_n.
Tensor all_results(const LstmLayerResult& r) { return concat({flatten(r.output), flatten(r.h_n), flatten(r.c_n)}, 0); }

struct CaseOptions {
  bool bias = true;
  bool non_contiguous_x = false;
  bool non_contiguous_weights = false;
  bool gradcheck = true;
};

// Inputs x [T, B, I], h0, c0 [B, H], w_ih [4H, I], w_hh [4H, H] (+ b_ih, b_hh [4H]).
define::test::OpCase lstm_case(const Sizes& s, CaseOptions o) {
  define::test::OpCase c;
  c.name = "lstm_layer/T" + std::to_string(s.T) + "_B" + std::to_string(s.B) + "_I" + std::to_string(s.I) + "_H" +
           std::to_string(s.H) + (o.bias ? "" : "_no_bias") + (o.non_contiguous_x ? "_strided_x" : "") +
           (o.non_contiguous_weights ? "_strided_weights" : "");
  c.inputs = {spec({s.T, s.B, s.I}, o.non_contiguous_x), spec({s.B, s.H}), spec({s.B, s.H}),
              spec({4 * s.H, s.I}, o.non_contiguous_weights, 0.5), spec({4 * s.H, s.H}, o.non_contiguous_weights, 0.5)};
  if (o.bias) {
    c.inputs.push_back(spec({4 * s.H}, false, 0.5));
    c.inputs.push_back(spec({4 * s.H}, false, 0.5));
    c.forward = [](V x) { return all_results(lstm_layer(x[0], x[1], x[2], x[3], x[4], x[5], x[6])); };
  } else {
    c.forward = [](V x) { return all_results(lstm_layer(x[0], x[1], x[2], x[3], x[4])); };
  }
  c.gradcheck = o.gradcheck;
  return c;
}

}  // namespace

// T in {1, 3, 7}, B in {1, 2, 5}, H in {1, 3, 33}, with and without biases, strided x and weights.
// The full Jacobian check (mode grad) runs on the small ones; the H = 33 cases run the cell kernels
// on partial blocks and the GEMMs on partial tiles.
TEST_CASE("ops: lstm_layer", "[ops][harness][lstm][family:lstm]") {
  define::test::run_op_cases({
      lstm_case({1, 1, 1, 1}, {}),
      lstm_case({3, 2, 4, 3}, {}),
      lstm_case({3, 2, 4, 3}, {.bias = false}),
      lstm_case({7, 1, 3, 3}, {.non_contiguous_x = true}),
      lstm_case({7, 5, 2, 1}, {}),
      lstm_case({1, 5, 3, 3}, {.bias = false, .non_contiguous_weights = true}),
      lstm_case({7, 2, 2, 3}, {.non_contiguous_x = true, .non_contiguous_weights = true}),
      lstm_case({7, 5, 17, 33}, {.gradcheck = false}),
      lstm_case({3, 5, 33, 33}, {.bias = false, .non_contiguous_x = true, .gradcheck = false}),
      lstm_case({7, 2, 5, 33}, {.non_contiguous_weights = true, .gradcheck = false}),
      lstm_case({1, 1, 1, 33}, {.gradcheck = false}),
  });
}

// Inputs the other cases do not hand over: a zero initial state (h0, c0 undefined), an x that is a
// column slice of a wider tensor (a strided view the input projection reads without a copy), and
// the gradient of h_n alone (c_n alone) with y unused.
TEST_CASE("ops: lstm_layer inputs and partial results", "[ops][harness][lstm][family:lstm]") {
  const auto weights = [](std::int64_t I, std::int64_t H) {
    return std::vector<InputSpec>{spec({4 * H, I}, false, 0.5), spec({4 * H, H}, false, 0.5), spec({4 * H}, false, 0.5),
                                  spec({4 * H}, false, 0.5)};
  };
  std::vector<InputSpec> zero_state_inputs{spec({3, 2, 4})};
  for (const InputSpec& w : weights(4, 3)) zero_state_inputs.push_back(w);
  std::vector<InputSpec> slice_inputs{spec({3, 2, 6}), spec({2, 3}), spec({2, 3})};
  for (const InputSpec& w : weights(4, 3)) slice_inputs.push_back(w);
  std::vector<InputSpec> full_inputs{spec({4, 2, 3}), spec({2, 3}), spec({2, 3})};
  for (const InputSpec& w : weights(3, 3)) full_inputs.push_back(w);
  define::test::run_op_cases({
      {.name = "lstm_layer/zero_initial_state", .inputs = zero_state_inputs,
       .forward = [](V x) { return all_results(lstm_layer(x[0], Tensor(), Tensor(), x[1], x[2], x[3], x[4])); }},
      {.name = "lstm_layer/x_column_slice", .inputs = slice_inputs,
       .forward = [](V x) {
         return all_results(lstm_layer(narrow(x[0], 2, 1, 4), x[1], x[2], x[3], x[4], x[5], x[6]));
       }},
      {.name = "lstm_layer/h_n_only", .inputs = full_inputs,
       .forward = [](V x) { return lstm_layer(x[0], x[1], x[2], x[3], x[4], x[5], x[6]).h_n; }},
      {.name = "lstm_layer/c_n_only", .inputs = full_inputs,
       .forward = [](V x) { return lstm_layer(x[0], x[1], x[2], x[3], x[4], x[5], x[6]).c_n; }},
  });
}

// One step, one unit: every gate's pre-activation is 0.5 * x + 0.25 * h0 (+ biases 0.1 and -0.2),
// so i = f = o = sigmoid(p) and g = tanh(p) with the same p.
TEST_CASE("lstm_layer: one step by hand", "[lstm][family:lstm]") {
  const double x = 0.8, h0 = -0.4, c0 = 0.3, p = 0.5 * x + 0.25 * h0 + 0.1 - 0.2;
  const double s = 1.0 / (1.0 + std::exp(-p)), g = std::tanh(p);
  const double c = s * c0 + s * g, h = s * std::tanh(c);
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    const LstmLayerResult r = lstm_layer(
        from_vector<double>({x}, {1, 1, 1}), from_vector<double>({h0}, {1, 1}), from_vector<double>({c0}, {1, 1}),
        full({4, 1}, 0.5, {.dtype = DType::Float64}), full({4, 1}, 0.25, {.dtype = DType::Float64}),
        full({4}, 0.1, {.dtype = DType::Float64}), full({4}, -0.2, {.dtype = DType::Float64}));
    CHECK(r.output.item_double() == Approx(h).epsilon(1e-14));
    CHECK(r.h_n.item_double() == Approx(h).epsilon(1e-14));
    CHECK(r.c_n.item_double() == Approx(c).epsilon(1e-14));
  }
}

TEST_CASE("lstm_layer: empty sequence and empty batch", "[lstm][family:lstm]") {
  REQUIRE(kernels::register_devices().emu);
  for (const Device device : {Device::cpu(), Device::emu()}) {
    INFO("device " << device.str());
    Generator gen(3);
    const auto leaf = [&](const Shape& shape) {
      return copy_to_device(rand_uniform(shape, -1, 1, {}, gen), device).set_requires_grad(true);
    };
    // T = 0: no step runs; h_n = h0 and c_n = c0, and their gradients go straight back.
    Tensor x = leaf({0, 2, 3}), h0 = leaf({2, 4}), c0 = leaf({2, 4}), w_ih = leaf({16, 3}), w_hh = leaf({16, 4});
    LstmLayerResult r = lstm_layer(x, h0, c0, w_ih, w_hh);
    CHECK(r.output.shape() == Shape{0, 2, 4});
    CHECK(define::test::to_doubles(r.h_n) == define::test::to_doubles(h0));
    CHECK(define::test::to_doubles(r.c_n) == define::test::to_doubles(c0));
    backward(sum(add(mul(r.h_n, 2.0), mul(r.c_n, 3.0))));
    CHECK(define::test::to_doubles(h0.grad()) == std::vector<double>(8, 2.0));
    CHECK(define::test::to_doubles(c0.grad()) == std::vector<double>(8, 3.0));
    CHECK(define::test::to_doubles(w_hh.grad()) == std::vector<double>(64, 0.0));
    // B = 0: every result is empty, the weight gradients are zero.
    Tensor xb = leaf({3, 0, 3}), hb = leaf({0, 4}), cb = leaf({0, 4}), wi = leaf({16, 3}), wh = leaf({16, 4});
    LstmLayerResult rb = lstm_layer(xb, hb, cb, wi, wh, leaf({16}), leaf({16}));
    CHECK(rb.output.shape() == Shape{3, 0, 4});
    backward(sum(rb.output));
    CHECK(define::test::to_doubles(wi.grad()) == std::vector<double>(48, 0.0));
  }
}

TEST_CASE("lstm_layer: named errors", "[lstm][family:lstm]") {
  const Tensor x = zeros({3, 2, 4}), h = zeros({2, 5}), w_ih = zeros({20, 4}), w_hh = zeros({20, 5});
  CHECK_NOTHROW(lstm_layer(x, h, h, w_ih, w_hh));
  REQUIRE_THROWS_WITH(lstm_layer(zeros({2, 4}), h, h, w_ih, w_hh), Contains("lstm_layer: x must be 3-d"));
  REQUIRE_THROWS_WITH(lstm_layer(x, zeros({3, 5}), h, w_ih, w_hh), Contains("h0 [3,5] does not match the batch"));
  REQUIRE_THROWS_WITH(lstm_layer(x, h, zeros({2, 4}), w_ih, w_hh), Contains("c0 [2,4] must be [2,5]"));
  REQUIRE_THROWS_WITH(lstm_layer(x, h, h, w_ih, zeros({16, 5})), Contains("w_hh [16,5] must be [20,5]"));
  REQUIRE_THROWS_WITH(lstm_layer(x, h, h, zeros({20, 3}), w_hh), Contains("w_ih [20,3] must be [20,4]"));
  REQUIRE_THROWS_WITH(lstm_layer(x, h, h, w_ih, w_hh, zeros({21})), Contains("b_ih [21] must be [20]"));
  REQUIRE_THROWS_WITH(lstm_layer(x, h, h, w_ih, w_hh, Tensor(), zeros({5})), Contains("b_hh [5] must be [20]"));
  REQUIRE_THROWS_WITH(lstm_layer(x, h, h, w_ih, zeros({20, 5}, {.dtype = DType::Float64})),
                      Contains("lstm_layer: dtypes"));
  REQUIRE_THROWS_WITH(lstm_layer(zeros({3, 2, 4}, {.dtype = DType::Int64}), h, h, w_ih, w_hh),
                      Contains("lstm_layer: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(lstm_layer(x, zeros({2, 0}), zeros({2, 0}), zeros({0, 4}), zeros({0, 0})),
                      Contains("hidden size must be at least 1"));
}

// The CPU recurrence splits the hidden units over a team when a step has enough work (here
// B * H * 4H = 301,088 multiply-adds): every element is computed by the same code in the same order
// whichever thread owns it, so 1, 2 and 3 threads give the same bits, forward and backward (3 on
// the 2-core machine also takes the step barrier's sleeping path, kernels/cpu/step_barrier.h).
TEST_CASE("lstm_layer: CPU recurrence bit-identical for 1, 2 and 3 threads", "[lstm][family:lstm]") {
  // Each shape runs with a team (over 2^18 multiply-adds a step). H = 97: the threads copy each
  // step's input (under 2^23 multiply-adds a step) and backward panels 2-4 packets wide; H = 33:
  // one-packet panels (3 packets over 2 or 3 threads); B 64, H 200: no copies.
  const auto shape = GENERATE(std::tuple<std::int64_t, std::int64_t, std::int64_t>{9, 8, 97},
                              std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 64, 33},
                              std::tuple<std::int64_t, std::int64_t, std::int64_t>{2, 64, 200});
  // (Not structured bindings: they are captured below, which clang before 16 cannot do with one.)
  const std::int64_t T = std::get<0>(shape), B = std::get<1>(shape), H = std::get<2>(shape);
  CAPTURE(T, B, H);
  Generator gen(14);
  const Tensor w_hh = rand_uniform({4 * H, H}, -0.3, 0.3, {}, gen), b = rand_uniform({4 * H}, -0.3, 0.3, {}, gen);
  const Tensor hs0 = rand_uniform({T + 1, B, H}, -1, 1, {}, gen), cs0 = rand_uniform({T + 1, B, H}, -1, 1, {}, gen);
  const Tensor proj = rand_uniform({T, B, 4 * H}, -1, 1, {}, gen), dy = rand_uniform({T, B, H}, -1, 1, {}, gen);
  const Tensor dh_n = rand_uniform({B, H}, -1, 1, {}, gen), dc_n = rand_uniform({B, H}, -1, 1, {}, gen);
  const auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const Tensor hs = clone(hs0), cs = clone(cs0), gates = clone(proj), dh = clone(dh_n), dc = clone(dc_n);
    const Tensor dgates = empty({T, B, 4 * H});
    kernels::cpu::lstm_forward_steps(w_hh, b, b, hs, cs, gates);
    kernels::cpu::lstm_backward_steps(dy, w_hh, hs, cs, gates, dh, dc, dgates, true);
    omp_set_num_threads(saved);
    std::vector<double> all;
    for (const Tensor* t : {&hs, &cs, &gates, &dh, &dc, &dgates}) {
      const std::vector<double> v = define::test::to_doubles(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<double> one = run(1);
  CHECK(one == run(2));
  CHECK(one == run(3));
  // And the same recurrence on the reference backend, within float32 rounding: h forward, and
  // dgates, dh_0 and dc_0 backward (from the reference's own forward).
  const Tensor hs = clone(hs0), cs = clone(cs0), gates = clone(proj), dh = clone(dh_n), dc = clone(dc_n);
  const Tensor dgates = empty({T, B, 4 * H});
  kernels::ref::lstm_forward_steps(w_hh, b, b, hs, cs, gates);
  kernels::ref::lstm_backward_steps(dy, w_hh, hs, cs, gates, dh, dc, dgates, true);
  const auto part = [&](std::size_t first, std::size_t count) {
    return std::vector<double>(one.begin() + static_cast<std::ptrdiff_t>(first),
                               one.begin() + static_cast<std::ptrdiff_t>(first + count));
  };
  const auto n = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  const std::size_t states = n((T + 1) * B * H), gate_values = n(T * B * 4 * H), state = n(B * H);
  // `one` holds hs, cs, gates, dh, dc, dgates in that order.
  CHECK(define::test::compare(part(0, states), define::test::to_doubles(hs), 1e-5, 1e-5).max_share <= 1.0);
  const std::size_t at_dh = 2 * states + gate_values;
  CHECK(define::test::compare(part(at_dh, state), define::test::to_doubles(dh), 1e-4, 1e-4).max_share <= 1.0);
  CHECK(define::test::compare(part(at_dh + state, state), define::test::to_doubles(dc), 1e-4, 1e-4).max_share <= 1.0);
  CHECK(define::test::compare(part(at_dh + 2 * state, gate_values), define::test::to_doubles(dgates), 1e-4, 1e-4)
            .max_share <= 1.0);
}
