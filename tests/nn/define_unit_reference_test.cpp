// DefineUnit against an independent float64 forward written from the paper form's equations
// (docs/spec.md §11): plain loops over std::vector, its own group and width schedule, nothing
// shared with nn/define_unit.cpp, nn/grouped_linear.cpp or the kernels. The module's parameters (randomised,
// so zero biases and unit LayerNorm weights hide nothing) are read by name; every variant, both
// norms, three activations and reduce_skip are compared. A swapped mixer order ([y, e]), a
// residual added to the wrong tensor or a shuffle in the wrong direction changes the output far
// beyond the tolerance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nn/define_unit.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using define::test::randomise;
using define::test::values;

namespace {

using Vec = std::vector<double>;

// One grouped layer's parameters: weight [g][in/g][out/g], bias [g][out/g], LayerNorm affine
// [out/g] (empty without a norm).
struct GroupLayer {
  std::int64_t in = 0, out = 0, g = 1;
  Vec weight, bias, gamma, beta;
};

double activate(double v, Activation act) {
  switch (act) {
    case Activation::Relu: return v > 0 ? v : 0.0;
    case Activation::Gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::Swish: return v / (1.0 + std::exp(-v));
    case Activation::None: break;
  }
  return v;
}

// F_G(x): group c maps x's c-th contiguous chunk with its own matrix; optionally the transpose
// shuffle ([a0 a1 | b0 b1] -> [a0 b0 a1 b1]); then LayerNorm over each contiguous out/g chunk
// with the one shared affine pair; then the activation.
Vec group_transform(const Vec& x, const GroupLayer& L, bool shuffle, Activation act) {
  const std::int64_t ig = L.in / L.g, og = L.out / L.g;
  Vec y(static_cast<std::size_t>(L.out));
  for (std::int64_t c = 0; c < L.g; ++c)
    for (std::int64_t j = 0; j < og; ++j) {
      double s = L.bias[static_cast<std::size_t>(c * og + j)];
      for (std::int64_t i = 0; i < ig; ++i)
        s += x[static_cast<std::size_t>(c * ig + i)] * L.weight[static_cast<std::size_t>((c * ig + i) * og + j)];
      y[static_cast<std::size_t>(c * og + j)] = s;
    }
  if (shuffle) {
    Vec z(y.size());
    for (std::int64_t c = 0; c < L.g; ++c)
      for (std::int64_t j = 0; j < og; ++j) z[static_cast<std::size_t>(j * L.g + c)] = y[static_cast<std::size_t>(c * og + j)];
    y = z;
  }
  if (!L.gamma.empty()) {
    for (std::int64_t r = 0; r < L.g; ++r) {
      double mean = 0, var = 0;
      for (std::int64_t j = 0; j < og; ++j) mean += y[static_cast<std::size_t>(r * og + j)];
      mean /= double(og);
      for (std::int64_t j = 0; j < og; ++j) var += std::pow(y[static_cast<std::size_t>(r * og + j)] - mean, 2);
      var /= double(og);
      for (std::int64_t j = 0; j < og; ++j) {
        double& v = y[static_cast<std::size_t>(r * og + j)];
        v = (v - mean) / std::sqrt(var + 1e-5) * L.gamma[static_cast<std::size_t>(j)] + L.beta[static_cast<std::size_t>(j)];
      }
    }
  }
  for (double& v : y) v = activate(v, act);
  return y;
}

// Group c of a mixed input is [e^c, y^c]: e and y each cut into g contiguous chunks, input first.
Vec mix(const Vec& e, const Vec& y, std::int64_t g) {
  const std::size_t ec = e.size() / static_cast<std::size_t>(g), yc = y.size() / static_cast<std::size_t>(g);
  Vec out;
  for (std::size_t c = 0; c < static_cast<std::size_t>(g); ++c) {
    out.insert(out.end(), e.begin() + long(c * ec), e.begin() + long((c + 1) * ec));
    out.insert(out.end(), y.begin() + long(c * yc), y.begin() + long((c + 1) * yc));
  }
  return out;
}

Vec join(const Vec& a, const Vec& b) {
  Vec out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// The unit of spec §11 for one token, with its own schedule: g_l = max(g_max / 2^(l-1), 1)
// (g_max everywhere for glt, 1 for linear); o_l = n + (k - n) l / N rounded up to a multiple of
// max(g_l, 8), o_N = k (k/2 everywhere for define-residual).
struct ReferenceUnit {
  DefineConfig cfg;
  std::vector<GroupLayer> layers;
  Vec reduce_w, reduce_b;  // [m][in], [m]

  ReferenceUnit(const DefineConfig& c, const Module& unit) : cfg(c) {
    const DefineVariant v = c.variant;
    const bool residual = v == DefineVariant::DefineResidual;
    const bool reads_input = v == DefineVariant::Define || v == DefineVariant::DefineNoMix || v == DefineVariant::NoReduce;
    std::int64_t prev = 0;
    for (std::int64_t l = 1; l <= c.N; ++l) {
      GroupLayer L;
      L.g = std::max<std::int64_t>(c.g_max >> (l - 1), 1);
      if (v == DefineVariant::Glt || v == DefineVariant::GltShuffle) L.g = c.g_max;
      if (v == DefineVariant::Linear) L.g = 1;
      const std::int64_t q = std::max<std::int64_t>(L.g, 8);
      const double linear_width = double(c.n) + double(c.k - c.n) * double(l) / double(c.N);
      L.out = residual ? c.k / 2 : l == c.N ? c.k : std::int64_t(std::ceil(linear_width / double(q))) * q;
      L.in = l == 1 ? c.n : (reads_input ? c.n + prev : prev);
      const std::string name = "layers." + std::to_string(l - 1) + ".";
      L.weight = values(unit.parameter(name + "weight"));
      L.bias = values(unit.parameter(name + "bias"));
      REQUIRE(L.weight.size() == static_cast<std::size_t>(L.in * L.out / L.g));
      if (c.norm == GroupedLinearNorm::Chunk) {
        L.gamma = values(unit.parameter(name + "norm.weight"));
        L.beta = values(unit.parameter(name + "norm.bias"));
      }
      prev = L.out;
      layers.push_back(L);
    }
    if (v != DefineVariant::NoReduce) {
      reduce_w = values(unit.parameter("reduce.weight"));
      reduce_b = values(unit.parameter("reduce.bias"));
    }
  }

  Vec forward(const Vec& e) const {
    const bool shuffle = cfg.variant == DefineVariant::GltShuffle;
    Vec y = group_transform(e, layers[0], shuffle, cfg.activation);
    for (std::size_t l = 1; l < layers.size(); ++l) {
      const GroupLayer& L = layers[l];
      switch (cfg.variant) {
        case DefineVariant::Define:
        case DefineVariant::NoReduce: y = group_transform(mix(e, y, L.g), L, false, cfg.activation); break;
        case DefineVariant::DefineNoMix: y = group_transform(join(e, y), L, false, cfg.activation); break;
        case DefineVariant::DefineResidual: {
          const Vec f = group_transform(y, L, false, cfg.activation);
          for (std::size_t i = 0; i < y.size(); ++i) y[i] += f[i];
          break;
        }
        default: y = group_transform(y, L, shuffle, cfg.activation); break;
      }
    }
    if (cfg.variant == DefineVariant::NoReduce) return y;
    const Vec in = cfg.reduce_skip ? join(e, y) : y;
    Vec out(static_cast<std::size_t>(cfg.m));
    for (std::size_t i = 0; i < out.size(); ++i) {
      double s = reduce_b[i];
      for (std::size_t j = 0; j < in.size(); ++j) s += reduce_w[i * in.size() + j] * in[j];
      out[i] = s;
    }
    return out;
  }
};

void compare_with_reference(const DefineConfig& cfg) {
  Generator gen(21);
  DefineUnit unit(cfg, gen);
  unit.to(DType::Float64);
  randomise(unit, gen);
  const std::int64_t rows = 3;
  const Tensor e = rand_uniform({rows, cfg.n}, -1, 1, {.dtype = DType::Float64}, gen);
  const Vec ev = values(e), got = values(unit.forward(e));
  const ReferenceUnit ref(cfg, unit);
  const std::size_t width = got.size() / rows;
  REQUIRE(got.size() == static_cast<std::size_t>(rows * unit.out_features()));
  for (std::int64_t r = 0; r < rows; ++r) {
    const Vec er(ev.begin() + r * cfg.n, ev.begin() + (r + 1) * cfg.n);
    const Vec want = ref.forward(er);
    REQUIRE(want.size() == width);
    for (std::size_t i = 0; i < width; ++i) {
      INFO("row " << r << " feature " << i);
      CHECK(got[static_cast<std::size_t>(r) * width + i] == Approx(want[i]).epsilon(1e-10).margin(1e-11));
    }
  }
}

}  // namespace

TEST_CASE("define: every DefineUnit variant equals a float64 forward written from the paper's equations", "[define]") {
  for (const char* v : {"define", "define-nomix", "hgt", "glt", "glt-shuffle", "linear", "define-residual", "no-reduce"}) {
    DYNAMIC_SECTION(v) {
      compare_with_reference({.n = 8, .k = 32, .N = 3, .m = 6, .g_max = 4, .variant = parse_define_variant(v)});
    }
  }
  SECTION("four layers, g_max 8, gelu, no norm") {
    compare_with_reference({.n = 16, .k = 48, .N = 4, .m = 10, .g_max = 8, .norm = GroupedLinearNorm::None,
                            .activation = Activation::Gelu});
  }
  SECTION("relu and reduce_skip") {
    compare_with_reference({.n = 8, .k = 32, .N = 3, .m = 6, .g_max = 4, .activation = Activation::Relu,
                            .reduce_skip = true});
  }
}
