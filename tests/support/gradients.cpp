#include "support/gradients.h"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "harness/op_harness.h"

namespace define::test {

void randomise(nn::Module& m, Generator& gen) {
  NoGradGuard g;
  for (const auto& [name, p] : m.named_parameters()) {
    const bool norm_weight = name.ends_with("norm.weight");
    copy_(p, rand_uniform(p.shape(), norm_weight ? 0.5 : -0.5, norm_weight ? 1.5 : 0.5, {.dtype = p.dtype()}, gen));
  }
}

Tensor random_leaf(const Shape& shape, Generator& gen) {
  return rand_uniform(shape, -1, 1, {.dtype = DType::Float64}, gen).set_requires_grad();
}

NamedTensors with_parameters(const nn::Module& m, NamedTensors inputs) {
  for (const auto& [name, p] : m.named_parameters()) inputs.emplace_back(name, p);
  return inputs;
}

namespace {

// The element indices of a leaf of n elements that check_gradients perturbs: all of them, or with
// `sample` > 0 at most that many: the first, the last and a seeded draw of the rest, in order.
std::vector<std::int64_t> checked_elements(std::int64_t n, std::int64_t sample, std::uint64_t seed) {
  std::vector<std::int64_t> idx;
  if (sample <= 0 || n <= sample) {
    for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  taken[0] = taken[static_cast<std::size_t>(n - 1)] = 1;
  Generator g(seed);
  const std::vector<std::int64_t> draws = rand_int({4 * sample}, n, {.dtype = DType::Int64}, g).to_vector<std::int64_t>();
  std::int64_t count = 2;
  for (std::size_t k = 0; k < draws.size() && count < sample; ++k)
    if (!taken[static_cast<std::size_t>(draws[k])]) {
      taken[static_cast<std::size_t>(draws[k])] = 1;
      ++count;
    }
  for (std::int64_t i = 0; i < n; ++i)
    if (taken[static_cast<std::size_t>(i)]) idx.push_back(i);
  return idx;
}

}  // namespace

void check_gradients(const std::function<Tensor()>& f, const NamedTensors& wrt, double eps, double atol, double rtol,
                     std::int64_t sample) {
  const Tensor out = f();
  REQUIRE(out.dtype() == DType::Float64);
  Generator ug(99);
  const Tensor u = rand_uniform(out.shape(), -1.0, 1.0, {.dtype = DType::Float64}, ug);
  std::vector<Tensor> leaves;
  for (const auto& [name, t] : wrt) {
    INFO(name);
    REQUIRE(t.dtype() == DType::Float64);
    REQUIRE(t.device().is_cpu());
    REQUIRE(t.is_contiguous());
    REQUIRE(t.requires_grad());
    leaves.push_back(t);
  }
  const std::vector<Tensor> analytic = define::grad(sum(mul(out, u)), leaves);

  NoGradGuard no_grad;
  const auto loss = [&] { return sum(mul(f(), u)).item<double>(); };
  for (std::size_t j = 0; j < wrt.size(); ++j) {
    double* data = wrt[j].second.data<double>();
    const std::vector<std::int64_t> elements = checked_elements(wrt[j].second.numel(), sample, 1000 + j);
    std::vector<double> numeric;
    for (const std::int64_t i : elements) {
      const double saved = data[i];
      data[i] = saved + eps;
      const double plus = loss();
      data[i] = saved - eps;
      const double minus = loss();
      data[i] = saved;
      numeric.push_back((plus - minus) / (2 * eps));
    }
    // A leaf the output does not depend on gets no gradient: compare against zeros then.
    std::vector<double> ana(numeric.size(), 0.0);
    if (analytic[j].defined()) {
      const std::vector<double> all = values(analytic[j]);
      for (std::size_t k = 0; k < elements.size(); ++k) ana[k] = all[static_cast<std::size_t>(elements[k])];
    }
    const Comparison cmp = compare(ana, numeric, atol, rtol);
    fmt::print("  [nn grad] d L / d {} ({} of {} elements): max abs err {:.3g}, {:.1f}% of allowed\n", wrt[j].first,
               numeric.size(), wrt[j].second.numel(), cmp.max_abs_err, 100.0 * cmp.max_share);
    INFO(wrt[j].first << ": max abs err " << cmp.max_abs_err << " at element " << cmp.worst);
    CHECK(cmp.max_share <= 1.0);
  }
}

}  // namespace define::test
