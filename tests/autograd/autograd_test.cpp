// Tape autograd: accumulation into .grad, shared subexpressions, retain_graph, NoGradGuard,
// detach, deterministic replay order, and the in-place-modification error.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "autograd/function.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"

using namespace define;
using Catch::Contains;

namespace {
Tensor vec(std::vector<double> v) { return from_vector(v); }
std::vector<double> g(const Tensor& t) { return t.grad().to_vector<double>(); }
}  // namespace

TEST_CASE("autograd: gradients accumulate across backward calls and uses", "[autograd]") {
  Tensor x = vec({1, 2, 3}).set_requires_grad();
  CHECK(x.is_leaf());
  Tensor y = sum(mul(x, x));  // d/dx = 2x
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  backward(y);
  CHECK(g(x) == std::vector<double>{2, 4, 6});
  backward(sum(mul(x, 3.0)));  // accumulates: + 3
  CHECK(g(x) == std::vector<double>{5, 7, 9});
  // x used twice in one graph: both paths add up.
  x.set_grad(Tensor());
  backward(sum(add(mul(x, x), x)));
  CHECK(g(x) == std::vector<double>{3, 5, 7});
}

TEST_CASE("autograd: a gradient shared by two leaves is not aliased", "[autograd]") {
  Tensor a = vec({1, 2}).set_requires_grad();
  Tensor b = vec({3, 4}).set_requires_grad();
  backward(sum(add(a, b)));
  CHECK(g(a) == std::vector<double>{1, 1});
  CHECK(g(b) == std::vector<double>{1, 1});
  CHECK_FALSE(a.grad().shares_storage_with(b.grad()));
  backward(sum(mul(a, 2.0)));  // only a's gradient moves
  CHECK(g(a) == std::vector<double>{3, 3});
  CHECK(g(b) == std::vector<double>{1, 1});
}

TEST_CASE("autograd: a gradient nobody else holds is adopted, any other is copied", "[autograd]") {
  // is_exclusive: the only handle, the only view, the whole storage, no autograd history.
  Tensor t = vec({1, 2, 3, 4});
  CHECK(t.is_exclusive());
  {
    Tensor other = t;
    CHECK_FALSE(t.is_exclusive());  // a second handle
  }
  CHECK(t.is_exclusive());
  {
    Tensor view = reshape(t, {2, 2});
    CHECK_FALSE(t.is_exclusive());  // a second view of the storage
  }
  CHECK_FALSE(narrow(vec({1, 2, 3}), 0, 0, 2).is_exclusive());  // part of its storage only
  CHECK_FALSE(vec({1}).set_requires_grad().is_exclusive());     // autograd metadata

  // Ops whose backward returns a fresh gradient (kept: false) or one it also holds (kept: true);
  // `made` collects where each returned gradient's elements live.
  std::vector<const void*> made;
  auto op = [&made](const Tensor& in, bool kept) {
    Tensor out = kernels::cast(in, in.dtype());
    Tensor held = from_vector(std::vector<double>{10, 20});
    record("test_op", {in}, {out}, [&made, kept, held](const BackwardArgs& a) {
      Tensor gin = kept ? held : kernels::mul(a.grad(), 1.0);
      made.push_back(gin.raw_data());
      return std::vector<Tensor>{gin};
    });
    return out;
  };
  Tensor a = vec({1, 2}).set_requires_grad();
  backward(sum(op(a, false)));
  REQUIRE(made.size() == 1);
  CHECK(a.grad().raw_data() == made[0]);  // adopted, not copied
  CHECK(g(a) == std::vector<double>{1, 1});

  // Two fresh gradients reaching one leaf are summed into the first, which is then adopted.
  made.clear();
  a.set_grad(Tensor());
  Tensor first = op(a, false), second = op(a, false);
  backward(sum(add(first, second)));
  REQUIRE(made.size() == 2);
  CHECK(a.grad().raw_data() == made[0]);
  CHECK(g(a) == std::vector<double>{2, 2});

  // A gradient its op still holds (retain_graph keeps the closure) is copied, and so is a sum
  // that starts from it: writing .grad must not change what the op keeps.
  made.clear();
  a.set_grad(Tensor());
  Tensor fresh_path = op(a, false);
  Tensor kept_path = op(a, true);  // recorded later, so its backward runs first
  Tensor y = add(fresh_path, kept_path);
  backward(sum(y), Tensor(), {.retain_graph = true});
  REQUIRE(made.size() == 2);
  CHECK(a.grad().raw_data() != made[0]);
  CHECK(a.grad().raw_data() != made[1]);
  CHECK(g(a) == std::vector<double>{11, 21});
  made.clear();
  a.set_grad(Tensor());
  Tensor held_path = op(a, true);
  backward(sum(held_path), Tensor(), {.retain_graph = true});
  REQUIRE(made.size() == 1);
  CHECK(a.grad().raw_data() != made[0]);
  kernels::fill(a.grad(), 0.0);
  backward(sum(held_path));  // the op's tensor is unchanged: 0 + {10, 20}
  CHECK(g(a) == std::vector<double>{10, 20});

  // A root gradient the caller holds is copied, so writing .grad leaves it alone.
  Tensor b = vec({1, 2}).set_requires_grad();
  Tensor root_grad = vec({5, 7});
  backward(mul(b, 1.0), root_grad);
  CHECK_FALSE(b.grad().shares_storage_with(root_grad));
  kernels::fill(b.grad(), 0.0);
  CHECK(root_grad.to_vector<double>() == std::vector<double>{5, 7});
}

TEST_CASE("autograd: a node may add into a gradient already waiting for its input", "[autograd]") {
  // `fresh` returns a new gradient; `adder` adds its own into one already waiting for its input
  // when the engine offers it (BackwardArgs::pending) and then returns none.
  std::vector<bool> offered;
  std::vector<const void*> made;
  auto fresh = [&made](const Tensor& in) {
    Tensor out = kernels::cast(in, in.dtype());
    record("fresh", {in}, {out}, [&made](const BackwardArgs& a) {
      Tensor gin = kernels::mul(a.grad(), 2.0);
      made.push_back(gin.raw_data());
      return std::vector<Tensor>{gin};
    });
    return out;
  };
  auto adder = [&offered](const Tensor& in) {
    Tensor out = kernels::cast(in, in.dtype());
    record("adder", {in}, {out}, [&offered](const BackwardArgs& a) {
      const Tensor& into = a.pending(0);
      offered.push_back(into.defined());
      if (!into.defined()) return std::vector<Tensor>{a.grad()};
      kernels::accumulate_into(into, a.grad());
      return std::vector<Tensor>{Tensor()};
    });
    return out;
  };
  Tensor x = vec({1, 2, 3}).set_requires_grad();
  Tensor early = adder(x);  // recorded first: its backward runs after fresh's
  Tensor late = fresh(x);
  backward(sum(add(mul(early, vec({1, 10, 100})), late)));
  REQUIRE(offered == std::vector<bool>{true});
  CHECK(x.grad().raw_data() == made.at(0));  // the sum stayed in fresh's tensor
  CHECK(g(x) == std::vector<double>{3, 12, 102});

  // The other order: nothing is waiting when the adder runs, so it returns its gradient.
  offered.clear();
  Tensor y = vec({1, 2}).set_requires_grad();
  Tensor y_late = fresh(y);
  Tensor y_early = adder(y);
  backward(sum(add(y_late, y_early)));
  CHECK(offered == std::vector<bool>{false});
  CHECK(g(y) == std::vector<double>{3, 3});

  // A waiting gradient another slot also holds is not offered: add(z, q) sends one tensor to
  // both z and q, and q's accumulator (created by its first use, before the adder) runs later.
  offered.clear();
  Tensor z = vec({1, 2, 3, 4}).set_requires_grad();
  Tensor q = vec({0, 0, 0, 0}).set_requires_grad();
  const Tensor q_use = mul(q, 1.0);  // while it lives, q's accumulator precedes the adder on the tape
  Tensor z_early = adder(z);
  backward(sum(add(z_early, mul(add(z, q), vec({1, 2, 3, 4})))));
  CHECK(offered == std::vector<bool>{false});
  CHECK(g(z) == std::vector<double>{2, 3, 4, 5});
  CHECK(g(q) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("autograd: retain_graph allows a second backward, otherwise a clear error", "[autograd]") {
  Tensor x = vec({0.5, -1}).set_requires_grad();
  Tensor y = sum(exp(x));
  backward(y, Tensor(), {.retain_graph = true});
  backward(y);
  const auto gx = g(x);
  CHECK(gx[0] == Approx(2 * std::exp(0.5)));
  CHECK(gx[1] == Approx(2 * std::exp(-1.0)));
  REQUIRE_THROWS_WITH(backward(y), Contains("already freed") && Contains("retain_graph=true"));
}

TEST_CASE("autograd: NoGradGuard records nothing and detach cuts the tape", "[autograd]") {
  Tensor x = vec({1, 2}).set_requires_grad();
  {
    NoGradGuard guard;
    CHECK_FALSE(GradMode::enabled());
    Tensor y = mul(x, x);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      NoGradGuard nested;
    }
    CHECK_FALSE(GradMode::enabled());
  }
  CHECK(GradMode::enabled());
  Tensor d = detach(x);
  CHECK_FALSE(d.requires_grad());
  CHECK(d.shares_storage_with(x));
  Tensor z = sum(mul(d, x));  // only the x factor is differentiated
  backward(z);
  CHECK(g(x) == std::vector<double>{1, 2});
  REQUIRE_THROWS_WITH(backward(sum(d)), Contains("backward: the tensor does not require grad"));
}

TEST_CASE("autograd: modifying a saved tensor in place is detected", "[autograd]") {
  Tensor x = vec({1, 2}).set_requires_grad();
  Tensor w = vec({3, 4});  // no grad, saved by mul for x's gradient
  Tensor y = sum(mul(x, w));
  mul_(w, 2.0);
  REQUIRE_THROWS_WITH(backward(y), Contains("mul backward: a tensor saved for backward") &&
                                       Contains("modified in place") && Contains("version 0 at save, now 1"));

  Tensor e = exp(x);  // exp saves its output
  Tensor s = sum(e);
  {
    NoGradGuard guard;  // in-place on a tensor that requires grad needs grad mode off
    add_(e, ones({2}, {DType::Float64}));
  }
  REQUIRE_THROWS_WITH(backward(s), Contains("exp backward") && Contains("modified in place"));
  REQUIRE_THROWS_WITH(mul_(x, 2.0), Contains("mul_: in-place operation on a tensor that requires grad"));
}

TEST_CASE("autograd: non-scalar roots need a gradient, shapes are checked", "[autograd]") {
  Tensor x = vec({1, 2, 3}).set_requires_grad();
  Tensor y = mul(x, 2.0);
  REQUIRE_THROWS_WITH(backward(y), Contains("backward: a gradient must be given for a root of shape [3]"));
  REQUIRE_THROWS_WITH(backward(y, ones({2}, {DType::Float64})), Contains("backward: gradient shape [2] does not match root shape [3]"));
  backward(y, vec({1, 10, 100}));
  CHECK(g(x) == std::vector<double>{2, 20, 200});
  REQUIRE_THROWS_WITH(arange(3, {DType::Int64}).set_requires_grad(), Contains("requires_grad: only floating-point tensors"));
  REQUIRE_THROWS_WITH(y.set_requires_grad(), Contains("requires_grad: can only be set on leaf tensors"));
}

TEST_CASE("autograd: the tape replays in reverse recording order", "[autograd]") {
  // A diamond: y = a*b + a*c with a = exp(x). The node for `a` must run after both products.
  Tensor x = vec({0.3}).set_requires_grad();
  Tensor a = exp(x);
  Tensor b = vec({2}), c = vec({5});
  Tensor y = sum(add(mul(a, b), mul(a, c)));
  CHECK(y.grad_fn()->seq() > a.grad_fn()->seq());
  backward(y);
  CHECK(g(x)[0] == Approx(7 * std::exp(0.3)));
}

TEST_CASE("autograd: grad() returns gradients without touching .grad", "[autograd]") {
  Tensor x = vec({1, 2}).set_requires_grad();
  Tensor y = sum(mul(mul(x, x), x));  // 3x^2
  std::vector<Tensor> gs = define::grad(y, {x});
  CHECK(gs[0].to_vector<double>() == std::vector<double>{3, 12});
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("autograd: gradients through views", "[autograd][views]") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  Tensor t = transpose(x, 0, 1);                    // [3,2]
  Tensor n = narrow(t, 0, 1, 2);                    // rows 1..2 of the transpose
  Tensor e = expand(unsqueeze(select(n, 1, 0), 0), {4, 2});  // column 0, repeated 4 times
  backward(sum(mul(reshape(e, {8}), 1.0)));
  // Each of x[0][1], x[0][2] is read 4 times; everything else not at all.
  CHECK(g(x) == std::vector<double>{0, 4, 4, 0, 0, 0});
}
