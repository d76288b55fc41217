// Elementwise ops: op-harness cases (cpu fast path vs reference, float64 Jacobians vs central
// differences) for every op, then exact-value, in-place and error-message checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/elementwise.h"
#include "kernels/tensor_iterator.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;
using V = const std::vector<Tensor>&;
using Fill = InputSpec::Fill;

namespace {

// Shorthand builders for the InputSpecs these cases use.
InputSpec uniform(Shape s, double lo = -1.0, double hi = 1.0) {
  InputSpec i;
  i.shape = std::move(s);
  i.lo = lo;
  i.hi = hi;
  return i;
}
InputSpec positive(Shape s) {
  InputSpec i;
  i.shape = std::move(s);
  i.fill = Fill::Positive;
  return i;
}
InputSpec no_grad(InputSpec s) {
  s.grad = false;
  return s;
}
InputSpec strided(InputSpec s) {
  s.non_contiguous = true;
  return s;
}
InputSpec fixed(Shape s, std::vector<double> v, bool grad = true) {
  InputSpec i;
  i.shape = std::move(s);
  i.fill = Fill::Fixed;
  i.grad = grad;
  i.values = std::move(v);
  return i;
}
// A float input with explicit values that takes no gradient (masks, conditions in float).
InputSpec fixed_float(Shape s, std::vector<double> v) {
  InputSpec i = fixed(s, std::move(v), false);
  i.dtype = DType::Float32;
  return i;
}

// The standard broadcasting/layout cases of a binary op. `rhs` builds the second operand's spec
// for a shape (Positive for divisors and the like).
std::vector<OpCase> binary_cases(const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f,
                                 std::function<InputSpec(Shape)> lhs, std::function<InputSpec(Shape)> rhs) {
  auto fwd = [f](V x) { return f(x[0], x[1]); };
  return {
      {.name = name + "/same_shape", .inputs = {lhs({3, 4}), rhs({3, 4})}, .forward = fwd},
      {.name = name + "/broadcast_3x1_1x4", .inputs = {lhs({3, 1}), rhs({1, 4})}, .forward = fwd},
      {.name = name + "/broadcast_234_4", .inputs = {lhs({2, 3, 4}), rhs({4})}, .forward = fwd},
      {.name = name + "/broadcast_4_234", .inputs = {lhs({4}), rhs({2, 3, 4})}, .forward = fwd},
      {.name = name + "/scalar_operand", .inputs = {lhs({2, 3}), rhs({})}, .forward = fwd},
      {.name = name + "/scalar_lhs", .inputs = {lhs({}), rhs({2, 3})}, .forward = fwd},
      {.name = name + "/non_contiguous", .inputs = {strided(lhs({3, 5})), rhs({3, 5})}, .forward = fwd},
      {.name = name + "/non_contiguous_both", .inputs = {strided(lhs({4, 3})), strided(rhs({4, 3}))}, .forward = fwd},
      {.name = name + "/odd_33", .inputs = {lhs({33}), rhs({33})}, .forward = fwd},
  };
}

void append(std::vector<OpCase>& all, std::vector<OpCase> more) {
  for (auto& c : more) all.push_back(std::move(c));
}

std::vector<OpCase> unary_cases(const std::string& name, std::function<Tensor(const Tensor&)> f,
                                std::function<InputSpec(Shape)> in) {
  auto fwd = [f](V x) { return f(x[0]); };
  return {
      {.name = name + "/matrix", .inputs = {in({3, 4})}, .forward = fwd},
      {.name = name + "/non_contiguous", .inputs = {strided(in({4, 5}))}, .forward = fwd},
      {.name = name + "/odd_33", .inputs = {in({33})}, .forward = fwd},
      {.name = name + "/scalar", .inputs = {in({})}, .forward = fwd},
  };
}

std::vector<double> to_vec(const Tensor& t) { return define::test::to_doubles(t); }

}  // namespace

TEST_CASE("ops: binary arithmetic", "[ops][harness][elementwise][family:elementwise]") {
  std::vector<OpCase> cases;
  auto u = [](Shape s) { return uniform(s); };
  auto p = [](Shape s) { return positive(s); };
  append(cases, binary_cases("add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, u, u));
  append(cases, binary_cases("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, u, u));
  append(cases, binary_cases("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, u, u));
  append(cases, binary_cases("div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, u, p));
  append(cases, binary_cases("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, u, u));
  append(cases, binary_cases("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, u, u));
  append(cases, binary_cases("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, p, u));
  cases.push_back({.name = "operators/mixed",
                   .inputs = {uniform({2, 3}), positive({3})},
                   .forward = [](V x) { return (x[0] + x[1]) * x[0] - x[0] / x[1] + (-x[1]); }});
  cases.push_back({.name = "add/same_tensor_twice", .inputs = {uniform({2, 3})},
                   .forward = [](V x) { return add(x[0], x[0]); }});
  cases.push_back({.name = "mul/same_tensor_twice", .inputs = {uniform({2, 3})},
                   .forward = [](V x) { return mul(x[0], x[0]); }});
  cases.push_back({.name = "add/no_grad_rhs", .inputs = {uniform({2, 3}), no_grad(uniform({3}))},
                   .forward = [](V x) { return add(x[0], x[1]); }});
  define::test::run_op_cases(cases);
}

TEST_CASE("ops: tensor-scalar arithmetic", "[ops][harness][elementwise][family:elementwise]") {
  auto u = [](Shape s) { return uniform(s); };
  auto p = [](Shape s) { return positive(s); };
  std::vector<OpCase> cases;
  append(cases, unary_cases("add_scalar", [](const Tensor& a) { return add(a, 1.5); }, u));
  append(cases, unary_cases("sub_scalar", [](const Tensor& a) { return sub(a, 0.25); }, u));
  append(cases, unary_cases("mul_scalar", [](const Tensor& a) { return mul(a, -3.0); }, u));
  append(cases, unary_cases("div_scalar", [](const Tensor& a) { return div(a, 4.0); }, u));
  append(cases, unary_cases("scalar_minus", [](const Tensor& a) { return 2.0 - a; }, u));
  append(cases, unary_cases("scalar_over", [](const Tensor& a) { return 3.0 / a; }, p));
  append(cases, unary_cases("scalar_operators", [](const Tensor& a) { return 2.0 * a + 1.0 - a * 0.5 + a / 2.0 + (3.0 + a); }, u));
  append(cases, unary_cases("pow_scalar/2.5", [](const Tensor& a) { return pow(a, 2.5); }, p));
  append(cases, unary_cases("pow_scalar/-1.5", [](const Tensor& a) { return pow(a, -1.5); }, p));
  append(cases, unary_cases("pow_scalar/2", [](const Tensor& a) { return pow(a, 2.0); }, u));
  append(cases, unary_cases("pow_scalar/3", [](const Tensor& a) { return pow(a, 3.0); }, u));
  append(cases, unary_cases("pow_scalar/0.5", [](const Tensor& a) { return pow(a, 0.5); }, p));
  define::test::run_op_cases(cases);
}

TEST_CASE("ops: unary math", "[ops][harness][elementwise][family:elementwise]") {
  auto u = [](Shape s) { return uniform(s); };
  auto wide = [](Shape s) { return uniform(s, -4.0, 4.0); };
  auto p = [](Shape s) { return positive(s); };
  std::vector<OpCase> cases;
  append(cases, unary_cases("neg", [](const Tensor& a) { return neg(a); }, u));
  append(cases, unary_cases("exp", [](const Tensor& a) { return exp(a); }, wide));
  append(cases, unary_cases("log", [](const Tensor& a) { return log(a); }, p));
  append(cases, unary_cases("sqrt", [](const Tensor& a) { return sqrt(a); }, p));
  append(cases, unary_cases("abs", [](const Tensor& a) { return abs(a); }, u));
  append(cases, unary_cases("tanh", [](const Tensor& a) { return tanh(a); }, wide));
  append(cases, unary_cases("sigmoid", [](const Tensor& a) { return sigmoid(a); }, wide));
  append(cases, unary_cases("relu", [](const Tensor& a) { return relu(a); }, u));
  append(cases, unary_cases("gelu", [](const Tensor& a) { return gelu(a); }, wide));
  append(cases, unary_cases("silu", [](const Tensor& a) { return silu(a); }, wide));
  append(cases, unary_cases("clamp", [](const Tensor& a) { return clamp(a, -0.5, 0.25); }, u));
  // Saturated regions: large |x| must neither overflow nor lose the (tiny) gradient.
  const std::vector<double> extremes = {-40, -20, -9.5, -3, -0.3, 0.7, 3, 9.5, 20, 40};
  for (const char* name : {"tanh", "sigmoid", "gelu", "silu"}) {
    const std::string n = name;
    cases.push_back({.name = n + "/large_abs_x", .inputs = {fixed({10}, extremes)}, .forward = [n](V x) {
                       if (n == "tanh") return tanh(x[0]);
                       if (n == "sigmoid") return sigmoid(x[0]);
                       if (n == "gelu") return gelu(x[0]);
                       return silu(x[0]);
                     }});
  }
  cases.push_back({.name = "chain/broadcast_then_unary", .inputs = {uniform({3, 1}), uniform({4})},
                   .forward = [](V x) { return gelu(mul(sigmoid(x[0]), tanh(x[1]))); }});
  define::test::run_op_cases(cases);
}

TEST_CASE("ops: comparisons, where, masked_fill", "[ops][harness][elementwise][family:elementwise]") {
  using BF = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, BF>> cmps = {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }}};
  std::vector<OpCase> cases;
  const std::vector<double> left = {1, 2, 3, 4, 5, 6}, right = {1, 3, 2, 4, 6, 5};
  for (const auto& [name, f] : cmps) {
    auto fwd = [f = f](V x) { return f(x[0], x[1]); };
    cases.push_back({.name = name + "/broadcast_float", .inputs = {uniform({3, 1}), uniform({1, 4})}, .forward = fwd,
                     .gradcheck = false});
    cases.push_back({.name = name + "/ties_float", .inputs = {fixed_float({2, 3}, left), fixed_float({2, 3}, right)},
                     .forward = fwd, .gradcheck = false});
    cases.push_back({.name = name + "/int64", .inputs = {fixed({2, 3}, left, false), fixed({3}, {1, 3, 3}, false)},
                     .forward = fwd, .gradcheck = false});
    cases.push_back({.name = name + "/non_contiguous", .inputs = {strided(uniform({3, 4})), uniform({4})}, .forward = fwd,
                     .gradcheck = false});
  }
  cases.push_back({.name = "compare_scalar/float", .inputs = {fixed_float({6}, {0.5, 1, 1.5, -1, 0.5, 2})},
                   .forward = [](V x) {
                     return eq(x[0], 0.5) + ne(x[0], 1.0) * 2.0 + lt(x[0], 1.0) * 4.0 + le(x[0], 1.0) * 8.0 +
                            gt(x[0], 0.5) * 16.0 + ge(x[0], 0.5) * 32.0;
                   },
                   .gradcheck = false});
  cases.push_back({.name = "where/broadcast_all", .inputs = {fixed({3, 4}, {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0}, false),
                                                             uniform({3, 1}), uniform({1, 4})},
                   .forward = [](V x) { return where(x[0], x[1], x[2]); }});
  cases.push_back({.name = "where/float_cond_scalar_b", .inputs = {fixed_float({4}, {0.5, 0, -2, 0}), uniform({2, 4}), uniform({})},
                   .forward = [](V x) { return where(x[0], x[1], x[2]); }});
  cases.push_back({.name = "where/non_contiguous", .inputs = {fixed({4, 3}, {1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1}, false),
                                                              strided(uniform({4, 3})), uniform({4, 3})},
                   .forward = [](V x) { return where(x[0], x[1], x[2]); }});
  cases.push_back({.name = "masked_fill/row_mask", .inputs = {uniform({3, 4}), fixed({1, 4}, {0, 1, 0, 1}, false)},
                   .forward = [](V x) { return masked_fill(x[0], x[1], -1e4); }});
  cases.push_back({.name = "masked_fill/non_contiguous", .inputs = {strided(uniform({3, 5})), fixed({3, 1}, {1, 0, 1}, false)},
                   .forward = [](V x) { return masked_fill(x[0], x[1], 2.5); }});
  cases.push_back({.name = "masked_fill/float_mask_full", .inputs = {uniform({2, 3}), fixed_float({2, 3}, {0, 1, 0, 0, 0, 1})},
                   .forward = [](V x) { return masked_fill(x[0], x[1], 0.0); }});
  define::test::run_op_cases(cases);
}

// Sizes that leave partial warps and blocks in the CUDA kernels (256 threads per block): 1, 31,
// 33, 257 elements, a [3,33] operand broadcast with [33] (both ways), a scalar, and transposed
// (non-contiguous) operands, for a selection of ops covering each kernel shape: unary maps and
// their backward formulas, binary maps, comparisons, where and masked_fill.
TEST_CASE("ops: odd sizes and layouts", "[ops][harness][elementwise][family:elementwise]") {
  auto u = [](Shape s) { return uniform(s); };
  auto wide = [](Shape s) { return uniform(s, -4.0, 4.0); };
  auto p = [](Shape s) { return positive(s); };
  using UF = std::function<Tensor(const Tensor&)>;
  using BF = std::function<Tensor(const Tensor&, const Tensor&)>;
  using SpecFn = std::function<InputSpec(Shape)>;
  std::vector<OpCase> cases;

  const std::vector<std::tuple<std::string, UF, SpecFn>> unary_ops = {
      {"gelu", [](const Tensor& a) { return gelu(a); }, wide},
      {"silu", [](const Tensor& a) { return silu(a); }, wide},
      {"tanh", [](const Tensor& a) { return tanh(a); }, wide},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }, p},
      {"pow_scalar_2.5", [](const Tensor& a) { return pow(a, 2.5); }, p},
      {"clamp", [](const Tensor& a) { return clamp(a, -0.5, 0.25); }, u},
      {"abs", [](const Tensor& a) { return abs(a); }, u},
  };
  for (const auto& [name, f, in] : unary_ops) {
    auto fwd = [f = f](V x) { return f(x[0]); };
    cases.push_back({.name = name + "/size_1", .inputs = {in({1})}, .forward = fwd});
    cases.push_back({.name = name + "/size_31", .inputs = {in({31})}, .forward = fwd});
    cases.push_back({.name = name + "/size_257", .inputs = {in({257})}, .forward = fwd});
    cases.push_back({.name = name + "/non_contiguous_5x33", .inputs = {strided(in({5, 33}))}, .forward = fwd});
  }

  const std::vector<std::tuple<std::string, BF, SpecFn, SpecFn>> binary_ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, u, u},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, u, u},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, u, p},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, u, u},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, p, u},
  };
  for (const auto& [name, f, lhs, rhs] : binary_ops) {
    auto fwd = [f = f](V x) { return f(x[0], x[1]); };
    cases.push_back({.name = name + "/size_1", .inputs = {lhs({1}), rhs({1})}, .forward = fwd});
    cases.push_back({.name = name + "/size_31", .inputs = {lhs({31}), rhs({31})}, .forward = fwd});
    cases.push_back({.name = name + "/size_257", .inputs = {lhs({257}), rhs({257})}, .forward = fwd});
    cases.push_back({.name = name + "/size_257_scalar", .inputs = {lhs({257}), rhs({})}, .forward = fwd});
    cases.push_back({.name = name + "/broadcast_3x33_33", .inputs = {lhs({3, 33}), rhs({33})}, .forward = fwd});
    cases.push_back({.name = name + "/broadcast_33_3x33", .inputs = {lhs({33}), rhs({3, 33})}, .forward = fwd});
    cases.push_back({.name = name + "/non_contiguous_7x33_33", .inputs = {strided(lhs({7, 33})), rhs({33})},
                     .forward = fwd});
  }

  // Comparisons on float and int64 operands (values with many ties), where and masked_fill.
  auto pattern = [](std::int64_t n, int mod) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>((i * 7 + 3) % mod);
    return v;
  };
  cases.push_back({.name = "gt/broadcast_3x33_33", .inputs = {uniform({3, 33}), uniform({33})},
                   .forward = [](V x) { return gt(x[0], x[1]); }, .gradcheck = false});
  cases.push_back({.name = "le/int64_257", .inputs = {fixed({257}, pattern(257, 5), false), fixed({257}, pattern(257, 3), false)},
                   .forward = [](V x) { return le(x[0], x[1]); }, .gradcheck = false});
  cases.push_back({.name = "eq/int64_3x33_33", .inputs = {fixed({3, 33}, pattern(99, 4), false), fixed({33}, pattern(33, 3), false)},
                   .forward = [](V x) { return eq(x[0], x[1]); }, .gradcheck = false});
  cases.push_back({.name = "lt_scalar/int64_31", .inputs = {fixed({31}, pattern(31, 6), false)},
                   .forward = [](V x) { return lt(x[0], 2.5); }, .gradcheck = false});
  cases.push_back({.name = "where/broadcast_3x33_33_3x1", .inputs = {fixed({3, 33}, pattern(99, 2), false), uniform({33}), uniform({3, 1})},
                   .forward = [](V x) { return where(x[0], x[1], x[2]); }});
  cases.push_back({.name = "where/size_257_non_contiguous", .inputs = {fixed({257}, pattern(257, 3), false), strided(uniform({257})), uniform({257})},
                   .forward = [](V x) { return where(x[0], x[1], x[2]); }});
  cases.push_back({.name = "masked_fill/non_contiguous_3x33_row_mask", .inputs = {strided(uniform({3, 33})), fixed({33}, pattern(33, 2), false)},
                   .forward = [](V x) { return masked_fill(x[0], x[1], -2.0); }});
  cases.push_back({.name = "masked_fill/size_1", .inputs = {uniform({1}), fixed({1}, {1}, false)},
                   .forward = [](V x) { return masked_fill(x[0], x[1], 0.5); }});
  define::test::run_op_cases(cases);
}

TEST_CASE("elementwise: exact values", "[ops][elementwise][family:elementwise]") {
  const Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor b = from_vector<float>({10, 20}, {2});
  CHECK(add(a, b).to_vector<float>() == std::vector<float>{11, 22, 13, 24});
  CHECK(sub(a, b).shape() == Shape{2, 2});
  CHECK(mul(a, from_vector<float>({2}, {})).to_vector<float>() == std::vector<float>{2, 4, 6, 8});
  CHECK(div(b, 4.0).to_vector<float>() == std::vector<float>{2.5f, 5});
  CHECK((1.0 - a).to_vector<float>() == std::vector<float>{0, -1, -2, -3});
  CHECK(relu(from_vector<float>({-1, 0, 2})).to_vector<float>() == std::vector<float>{0, 0, 2});
  CHECK(clamp(from_vector<float>({-3, 0.5f, 3}), -1, 1).to_vector<float>() == std::vector<float>{-1, 0.5f, 1});
  CHECK(sigmoid(from_vector<float>({-200, 0, 200})).to_vector<float>() == std::vector<float>{0, 0.5f, 1});
  CHECK(gelu(from_vector<float>({-50, 0, 50})).to_vector<float>() == std::vector<float>{-0.0f, 0, 50});
  CHECK(gelu(from_vector<double>({1.0})).item<double>() == Approx(0.8413447460685429).epsilon(1e-14));
  CHECK(silu(from_vector<double>({2.0})).item<double>() == Approx(2.0 / (1.0 + std::exp(-2.0))).epsilon(1e-14));

  // Comparisons: 0/1 in the operands' dtype, including integers.
  const Tensor i = from_vector<std::int64_t>({1, 5, 3}), j = from_vector<std::int64_t>({1, 4, 4});
  CHECK(eq(i, j).dtype() == DType::Int64);
  CHECK(eq(i, j).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 0});
  CHECK(gt(i, j).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 0});
  CHECK(le(i, 3.0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
  CHECK(lt(i, 2.5).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 0});
  CHECK(ge(a, 2.0).to_vector<float>() == std::vector<float>{0, 1, 1, 1});

  // where / masked_fill on integers and with any-dtype conditions.
  const Tensor cond = from_vector<float>({0, 1, 0.5f});
  CHECK(where(cond, i, j).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 5, 3});
  CHECK(masked_fill(i, from_vector<std::int32_t>({1, 0, 1}), -7).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-7, 5, -7});
}

TEST_CASE("elementwise: gradients at kinks and ties", "[ops][elementwise][family:elementwise]") {
  // maximum/minimum split ties evenly.
  Tensor a = from_vector<double>({1, 2, 3}).set_requires_grad();
  Tensor b = from_vector<double>({1, 5, 0}).set_requires_grad();
  backward(sum(maximum(a, b)));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 0, 1});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 1, 0});
  Tensor c = from_vector<double>({1, 2, 3}).set_requires_grad();
  Tensor d = from_vector<double>({1, 5, 0}).set_requires_grad();
  backward(sum(minimum(c, d)));
  CHECK(c.grad().to_vector<double>() == std::vector<double>{0.5, 1, 0});
  CHECK(d.grad().to_vector<double>() == std::vector<double>{0.5, 0, 1});

  // relu and abs have gradient 0 at 0; clamp passes the gradient at its bounds.
  Tensor x = from_vector<double>({-1, 0, 2}).set_requires_grad();
  backward(sum(relu(x)) + sum(abs(x)));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{-1, 0, 2});
  Tensor y = from_vector<double>({-2, -1, 0, 1, 2}).set_requires_grad();
  backward(sum(clamp(y, -1, 1)));
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1, 1, 1, 0});

  // Broadcast gradients are summed back to the operand's shape.
  Tensor row = from_vector<double>({1, 2, 3}, {1, 3}).set_requires_grad();
  Tensor col = from_vector<double>({1, 1}, {2, 1}).set_requires_grad();
  backward(sum(mul(row, col)));
  CHECK(row.grad().to_vector<double>() == std::vector<double>{2, 2, 2});
  CHECK(col.grad().to_vector<double>() == std::vector<double>{6, 6});
  CHECK(col.grad().shape() == Shape{2, 1});

  // pow(a, b): d/db at a == 0 is taken as 0, not NaN.
  Tensor base = from_vector<double>({0, 2}).set_requires_grad();
  Tensor ex = from_vector<double>({2, 3}).set_requires_grad();
  backward(sum(pow(base, ex)));
  CHECK(ex.grad().to_vector<double>()[0] == 0.0);
  CHECK(ex.grad().to_vector<double>()[1] == Approx(8 * std::log(2.0)));
  CHECK(base.grad().to_vector<double>() == std::vector<double>{0, 12});

  // Comparisons record nothing.
  Tensor p = from_vector<float>({1, 2}).set_requires_grad();
  CHECK_FALSE(gt(p, 1.5).requires_grad());
  CHECK_FALSE(eq(p, p).requires_grad());
}

TEST_CASE("elementwise: in-place ops", "[ops][elementwise][inplace][family:elementwise]") {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::uint64_t v = a.version();
  add_(a, from_vector<float>({1, 1, 1}), 2.0);
  CHECK(a.to_vector<float>() == std::vector<float>{3, 4, 5, 6, 7, 8});
  CHECK(a.version() > v);
  v = a.version();
  mul_(a, 0.5);
  CHECK(a.to_vector<float>() == std::vector<float>{1.5f, 2, 2.5f, 3, 3.5f, 4});
  CHECK(a.version() > v);
  v = a.version();
  mul_(a, from_vector<float>({2, 0}, {2, 1}));
  CHECK(a.to_vector<float>() == std::vector<float>{3, 4, 5, 0, 0, 0});
  CHECK(a.version() > v);
  v = a.version();
  masked_fill_(a, from_vector<std::int64_t>({1, 0, 1}), -1);
  CHECK(a.to_vector<float>() == std::vector<float>{-1, 4, -1, -1, 0, -1});
  CHECK(a.version() > v);
  v = a.version();
  fill_(a, 7);
  CHECK(a.to_vector<float>() == std::vector<float>(6, 7.0f));
  CHECK(a.version() > v);
  v = a.version();
  zero_(a);
  CHECK(a.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(a.version() > v);

  // In place on a non-contiguous view writes through to the base.
  Tensor base = zeros({3, 2});
  Tensor col = transpose(base, 0, 1);  // [2,3], strides [1,2]
  add_(col, from_vector<float>({1, 2, 3}));
  CHECK(base.to_vector<float>() == std::vector<float>{1, 1, 2, 2, 3, 3});
  fill_(narrow(base, 0, 1, 1), 9);
  CHECK(base.to_vector<float>() == std::vector<float>{1, 1, 9, 9, 3, 3});

  // Tensors that require grad are refused while grad mode is on, accepted under NoGradGuard.
  Tensor w = ones({2}).set_requires_grad();
  REQUIRE_THROWS_WITH(add_(w, ones({2})), Catch::Contains("add_: in-place operation on a tensor that requires grad"));
  REQUIRE_THROWS_WITH(mul_(w, 2.0), Catch::Contains("mul_: in-place operation on a tensor that requires grad"));
  REQUIRE_THROWS_WITH(mul_(w, w), Catch::Contains("mul_: in-place operation on a tensor that requires grad"));
  REQUIRE_THROWS_WITH(fill_(w, 1), Catch::Contains("fill_: in-place operation on a tensor that requires grad"));
  REQUIRE_THROWS_WITH(zero_(w), Catch::Contains("zero_: in-place operation on a tensor that requires grad"));
  REQUIRE_THROWS_WITH(masked_fill_(w, ones({2}), 0),
                      Catch::Contains("masked_fill_: in-place operation on a tensor that requires grad"));
  {
    NoGradGuard guard;
    add_(w, ones({2}), -0.5);
  }
  CHECK(w.to_vector<float>() == std::vector<float>{0.5f, 0.5f});

  // A tensor saved for backward and then modified in place is caught at backward time.
  Tensor x = from_vector<float>({1, 2}).set_requires_grad();
  Tensor e = exp(x);
  Tensor s = sum(e);
  {
    NoGradGuard guard;
    mul_(e, 2.0);
  }
  REQUIRE_THROWS_WITH(backward(s), Catch::Contains("modified in place"));

  // The target is never resized by broadcasting.
  REQUIRE_THROWS_WITH(add_(ones({3}), ones({2, 3})), Catch::Contains("add_: result of shape [2,3] cannot be written"));
}

TEST_CASE("elementwise: errors", "[ops][elementwise][errors][family:elementwise]") {
  const Tensor f32 = ones({2, 3}), f64 = ones({2, 3}, {.dtype = DType::Float64});
  const Tensor i64 = ones({2, 3}, {.dtype = DType::Int64});
  REQUIRE_THROWS_WITH(add(f32, f64), Catch::Contains("add: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(mul(f64, f32), Catch::Contains("mul: dtypes float64 and float32 do not match"));
  REQUIRE_THROWS_WITH(maximum(f32, f64), Catch::Contains("maximum: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(where(ones({3}), f32, f64), Catch::Contains("where: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(eq(f32, i64), Catch::Contains("eq: dtypes float32 and int64 do not match"));
  REQUIRE_THROWS_WITH(add(f32, ones({4})), Catch::Contains("add: shapes [2,3] and [4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(div(ones({2, 3}), ones({3, 2})), Catch::Contains("div: shapes [2,3] and [3,2] cannot be broadcast"));
  REQUIRE_THROWS_WITH(where(ones({2}), f32, f32), Catch::Contains("where: shapes [2] and [2,3] cannot be broadcast"));
  REQUIRE_THROWS_WITH(masked_fill(f32, ones({2, 3, 1}), 0),
                      Catch::Contains("masked_fill: mask of shape [2,3,1] cannot be broadcast to the tensor's shape [2,3]"));
  REQUIRE_THROWS_WITH(add(i64, i64),
                      Catch::Contains("add: expected a floating-point tensor (float32, float64, float16 or bfloat16), got int64"));
  REQUIRE_THROWS_WITH(exp(i64), Catch::Contains("exp: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(mul(i64, 2.0), Catch::Contains("mul: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(sub(i64, 2.0), Catch::Contains("sub: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(div(i64, 2.0), Catch::Contains("div: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(pow(i64, 2.0), Catch::Contains("pow: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(clamp(f32, 1, -1), Catch::Contains("clamp: lower bound 1 is above upper bound -1"));
  REQUIRE_THROWS_WITH(add_(f32, f64), Catch::Contains("add_: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(masked_fill_(f32, ones({4}), 0), Catch::Contains("masked_fill_: mask of shape [4] cannot be broadcast to the tensor's shape [2,3]"));
  if (has_device(DeviceType::CUDA)) {
    const Tensor g = ones({2, 3}, {.device = Device::cuda()});
    REQUIRE_THROWS_WITH(add(f32, g), Catch::Contains("add: tensors on cpu and cuda:0"));
    REQUIRE_THROWS_WITH(where(f32, f32, g), Catch::Contains("where: tensors on cpu and cuda:0"));
  }
}

TEST_CASE("elementwise: empty tensors", "[ops][elementwise][family:elementwise]") {
  Tensor e = zeros({0, 3}).set_requires_grad();
  Tensor y = add(e, ones({3}));
  CHECK(y.shape() == Shape{0, 3});
  CHECK(gelu(e).numel() == 0);
  CHECK(where(zeros({0, 1}), e, ones({3})).shape() == Shape{0, 3});
  backward(sum(mul(y, 2.0)));
  CHECK(e.grad().shape() == Shape{0, 3});
}

TEST_CASE("elementwise: large tensors, cpu path vs reference", "[ops][elementwise][family:elementwise]") {
  // Big enough for the OpenMP split and for every inner-loop variant of the cpu path.
  Generator gen(5);
  const Tensor a = rand_uniform({257, 301}, -2, 2, {}, gen);
  const Tensor row = rand_uniform({301}, -2, 2, {}, gen);
  const Tensor col = rand_uniform({257, 1}, 0.5, 2, {}, gen);
  const Tensor at = transpose(rand_uniform({301, 257}, -2, 2, {}, gen), 0, 1);
  auto check = [](const std::function<Tensor()>& f) {
    Tensor fast, ref;
    {
      kernels::CpuBackendGuard g(kernels::Backend::Cpu);
      fast = f();
    }
    {
      kernels::CpuBackendGuard g(kernels::Backend::Ref);
      ref = f();
    }
    const auto cmp = define::test::compare(to_vec(fast), to_vec(ref), 1e-5, 1e-5);
    INFO("max abs err " << cmp.max_abs_err);
    CHECK(cmp.max_share <= 1.0);
  };
  check([&] { return add(a, row); });
  check([&] { return div(row, col); });
  check([&] { return mul(a, at); });
  check([&] { return gelu(at); });
  check([&] { return where(gt(a, 0.0), a, at); });
  check([&] { return masked_fill(at, lt(row, 0.0), 3.0); });
  check([&] { return kernels::binary(kernels::BinaryOp::GeluBackward, a, at); });
}

TEST_CASE("elementwise: float32 sigmoid and Swish through the vector exp", "[ops][elementwise][family:elementwise]") {
  // The cpu path computes these with a polynomial exp, 8 or 4 lanes at a time on contiguous
  // operands and lane by lane elsewhere. Three things must hold: a few ulp from the true value, the
  // underflow and overflow ends right, and the same bits from the vector and the scalar loops
  // (otherwise an element's value would depend on where a thread's range begins).
  kernels::CpuBackendGuard cpu(kernels::Backend::Cpu);
  std::vector<float> xs;
  for (int i = 0; i <= 4000; ++i) xs.push_back(-100.0f + 0.05f * static_cast<float>(i) + 1e-3f);
  for (float v : {-200.0f, -88.5f, -88.0f, -87.5f, -20.0f, -1e-6f, 0.0f, 1e-6f, 20.0f, 87.5f, 88.5f, 200.0f}) xs.push_back(v);
  const std::int64_t n = static_cast<std::int64_t>(xs.size());
  const Tensor x = from_vector<float>(xs);
  const std::vector<float> sig = sigmoid(x).to_vector<float>(), sw = silu(x).to_vector<float>();
  // Relative error where the result is well inside float's normal range; below it (x < -83) only an
  // absolute error of about float's smallest normal, which covers flushed denormals.
  double worst_sig = 0, worst_swish = 0, worst_tiny = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = xs[i], s = 1.0 / (1.0 + std::exp(-v));
    if (s > 1e-36) {
      worst_sig = std::max(worst_sig, std::abs(sig[i] - s) / s);
      worst_swish = std::max(worst_swish, std::abs(sw[i] - v * s) / std::abs(v * s));
    } else {
      worst_tiny = std::max({worst_tiny, std::abs(sig[i] - s), std::abs(sw[i] - v * s) / std::abs(v)});
    }
  }
  INFO("largest relative error: sigmoid " << worst_sig << ", silu " << worst_swish << "; tiny results: " << worst_tiny);
  CHECK(worst_sig < 5e-7);  // about 4 ulp at float's 2^-23 spacing
  CHECK(worst_swish < 5e-7);
  CHECK(worst_tiny <= 2 * static_cast<double>(std::numeric_limits<float>::min()));
  CHECK(sigmoid(from_vector<float>({-89.0f, -1000.0f, 1000.0f})).to_vector<float>() == std::vector<float>{0.0f, 0.0f, 1.0f});
  CHECK(std::isnan(sigmoid(from_vector<float>({std::numeric_limits<float>::quiet_NaN()})).item<float>()));

  // Vector loop against scalar loop: a [n, 3] matrix read through a transpose takes the strided
  // (scalar) loop, its contiguous copy the vector one.
  std::vector<float> rows;
  for (int r = 0; r < 3; ++r)
    for (float v : xs) rows.push_back(v * (1.0f - 0.3f * static_cast<float>(r)));
  const Tensor m = from_vector<float>(rows, {3, n});
  const Tensor strided_view = transpose(m, 0, 1), packed = contiguous(strided_view);
  REQUIRE(!strided_view.is_contiguous());
  Generator gen(3);
  const Tensor g = rand_uniform({n, 3}, -2, 2, {}, gen);
  CHECK(sigmoid(strided_view).to_vector<float>() == sigmoid(packed).to_vector<float>());
  CHECK(silu(strided_view).to_vector<float>() == silu(packed).to_vector<float>());
  CHECK(kernels::binary(kernels::BinaryOp::SiluBackward, g, strided_view).to_vector<float>() ==
        kernels::binary(kernels::BinaryOp::SiluBackward, g, packed).to_vector<float>());

  // The Swish gradient against the reference backend's.
  Tensor fast_grad = kernels::binary(kernels::BinaryOp::SiluBackward, g, packed), ref_grad;
  {
    kernels::CpuBackendGuard ref(kernels::Backend::Ref);
    ref_grad = kernels::binary(kernels::BinaryOp::SiluBackward, g, packed);
  }
  const auto cmp = define::test::compare(to_vec(fast_grad), to_vec(ref_grad), 1e-6, 1e-5);
  INFO("silu backward: max abs err " << cmp.max_abs_err);
  CHECK(cmp.max_share <= 1.0);
}

TEST_CASE("tensor iterator: coalescing", "[ops][elementwise][family:elementwise]") {
  const Tensor out = empty({2, 3, 4});
  const kernels::TensorIterator bias("test", {out, out, empty({4})});
  CHECK(bias.shape() == Shape{6, 4});
  CHECK(bias.inner_stride(2) == 1);
  CHECK(bias.stride(2, 0) == 0);
  const kernels::TensorIterator flat("test", {out, out, out});
  CHECK(flat.is_flat());
  CHECK(flat.shape() == Shape{24});
  const kernels::TensorIterator col("test", {empty({3, 4}), empty({3, 1})});
  CHECK(col.shape() == Shape{3, 4});
  CHECK(col.inner_stride(1) == 0);
  const kernels::TensorIterator scalar("test", {empty({1, 1}), empty({})});
  CHECK(scalar.numel() == 1);
  // Element ranges split mid-row still visit every element exactly once, in order.
  std::vector<std::int64_t> seen;
  for (std::int64_t b = 0; b < 24; b += 5)
    bias.for_each_range(b, std::min<std::int64_t>(24, b + 5), [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
      for (std::int64_t i = 0; i < n; ++i) seen.push_back(off[0] + i * st[0]);
    });
  std::vector<std::int64_t> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  CHECK(seen == want);
}
