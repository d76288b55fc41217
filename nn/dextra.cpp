#include "nn/dextra.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "autograd/dropout.h"
#include "autograd/matmul.h"
#include "autograd/split_mix.h"
#include "core/factory.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace define::nn {

DExTraMode parse_dextra_mode(std::string_view name) {
  if (name == "define-iclr") return DExTraMode::DefineIclr;
  if (name == "dextra") return DExTraMode::DExTra;
  fail("DExTraUnit", "unknown mode '{}' (expected define-iclr or dextra)", name);
}

const char* to_string(DExTraMode mode) { return mode == DExTraMode::DefineIclr ? "define-iclr" : "dextra"; }

DExTraGroupRule parse_dextra_group_rule(std::string_view name) {
  if (name == "released") return DExTraGroupRule::Released;
  if (name == "paper") return DExTraGroupRule::Paper;
  fail("DExTraUnit", "unknown group_rule '{}' (expected released or paper)", name);
}

const char* to_string(DExTraGroupRule rule) { return rule == DExTraGroupRule::Paper ? "paper" : "released"; }

std::int64_t dextra_max_groups(std::int64_t d_m, DExTraGroupRule rule) {
  if (rule == DExTraGroupRule::Paper) {
    if (d_m < 1) fail("dextra_max_groups", "d_m = {} must be positive", d_m);
    return (d_m + 31) / 32;  // ceil(d_m / 32): every group reads at least 32 features
  }
  const std::int64_t q = d_m / 32;
  if (q < 1) fail("dextra_max_groups", "d_m = {} is below 32, so d_m // 32 = 0 has no log2", d_m);
  std::int64_t g = 1;
  while (g < q) g *= 2;  // 2^ceil(log2(q)), exactly, in integers
  return g;
}

std::vector<double> linspace(double start, double stop, std::int64_t num) {
  std::vector<double> out;
  if (num <= 0) return out;
  if (num == 1) return {start};
  const double step = (stop - start) / static_cast<double>(num - 1);
  for (std::int64_t i = 0; i + 1 < num; ++i) {
    // Rounded product, then rounded sum, as numpy does: volatile keeps the compiler from fusing
    // them into one FMA (-march=native), which could move a value across an integer boundary.
    volatile double scaled = static_cast<double>(i) * step;
    out.push_back(scaled + start);
  }
  out.push_back(stop);
  return out;
}

std::vector<std::int64_t> linspace_int(double start, double stop, std::int64_t num) {
  std::vector<std::int64_t> out;
  for (double v : linspace(start, stop, num)) out.push_back(static_cast<std::int64_t>(v));
  return out;
}

namespace {

// define_config step 1: walk a counter c, g = 2^c while g <= G, else restart at g = 1 (c = 1);
// then reverse. [2^(N-1), .., 2, 1] when 2^(N-1) <= G, cycling otherwise; always ends in 1.
std::vector<std::int64_t> define_iclr_groups(std::int64_t N, std::int64_t G) {
  std::vector<std::int64_t> g;
  std::int64_t c = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    std::int64_t v = c < 62 ? std::int64_t{1} << c : G + 1;
    if (v <= G) {
      ++c;
    } else {
      v = 1;
      c = 1;
    }
    g.push_back(v);
  }
  std::reverse(g.begin(), g.end());
  return g;
}

// Mirror a list for the reduction half of dextra_config: even N repeats the peak, odd N does not.
std::vector<std::int64_t> mirrored(std::vector<std::int64_t> v, bool even) {
  const std::vector<std::int64_t> rev(v.rbegin() + (even ? 0 : 1), v.rend());
  v.insert(v.end(), rev.begin(), rev.end());
  return v;
}

}  // namespace

DExTraSchedule dextra_schedule(const DExTraConfig& c) {
  const char* op = "DExTraUnit";
  if (c.d_in <= 0 || c.p <= 0 || c.d_out <= 0)
    fail(op, "d_in, p and d_out must be positive, got d_in={} p={} d_out={}", c.d_in, c.p, c.d_out);
  if (c.depth < 2) fail(op, "depth N = {} must be at least 2", c.depth);
  if (c.max_groups < 1) fail(op, "max_groups G = {} must be at least 1", c.max_groups);
  if (!(c.width_mult > 0) || !std::isfinite(c.width_mult)) fail(op, "width_mult w = {} must be positive", c.width_mult);
  // The released unit's own asserts (on d_in, not on p; the per-layer checks below catch p).
  if (c.d_in % 2 != 0) fail(op, "d_in = {} must be even", c.d_in);
  if (c.d_in % c.max_groups != 0) fail(op, "d_in = {} is not divisible by max_groups G = {}", c.d_in, c.max_groups);
  if (c.mode == DExTraMode::DefineIclr && c.group_rule != DExTraGroupRule::Released)
    fail(op, "group_rule '{}' applies to dextra mode; define-iclr has only the released schedule", to_string(c.group_rule));

  DExTraSchedule s;
  s.d_max = static_cast<double>(c.d_in) * c.width_mult;
  const std::int64_t N = c.depth;
  if (c.mode == DExTraMode::DefineIclr) {
    // §2.3: widths linspace(p, d_max, N) without the first: N-1 expansion layers, the N-th reduces.
    s.groups = define_iclr_groups(N, c.max_groups);
    s.widths = linspace_int(static_cast<double>(c.p), s.d_max, N);
    s.widths.erase(s.widths.begin());
  } else {
    // §2.4: expansion over h = ceil(N/2) layers with groups 2, 4, .. (released) or 1, 2, 4, ..
    // (paper), capped by G, and widths linspace(p, d_max, h) (the first keeps width p), mirrored;
    // the last width is dropped.
    const std::int64_t h = (N + 1) / 2;
    const std::int64_t first_exponent = c.group_rule == DExTraGroupRule::Paper ? 0 : 1;
    for (std::int64_t i = 1; i <= h; ++i) {
      const std::int64_t e = i - 1 + first_exponent;
      s.groups.push_back(std::min(e < 62 ? std::int64_t{1} << e : c.max_groups, c.max_groups));
    }
    s.groups = mirrored(s.groups, N % 2 == 0);
    s.widths = mirrored(linspace_int(static_cast<double>(c.p), s.d_max, h), N % 2 == 0);
    s.widths.pop_back();
  }
  // Both: o_l rounded up to a multiple of lcm(g_l, g_{l+1}, 8) for l < N, so layer l's groups
  // and the next layer's mixer can both split it (the released code's max() is the same number
  // while every G is a power of two; a G of 12 needs the common multiple), then o_N = d_out.
  for (std::int64_t l = 0; l + 1 < N; ++l) {
    const std::int64_t q = std::lcm(std::lcm(s.groups[l], s.groups[l + 1]), std::int64_t{8});
    s.widths[l] = std::max<std::int64_t>((s.widths[l] + q - 1) / q, 1) * q;
  }
  s.widths.push_back(c.d_out);
  // Every split the unit makes is checked here, so a bad config fails when the unit is built, not
  // inside a GroupedLinear: layer l's groups and its mixer cut X (p) into g_l chunks, and its output
  // must split into g_l groups (o_{l-1}, the mixer's other input, is a multiple of g_l by the
  // rounding above).
  for (std::int64_t l = 0; l < N; ++l) {
    const std::int64_t g = s.groups[l];
    s.inputs.push_back(l == 0 ? c.p : c.p + s.widths[l - 1]);
    if (c.p % g != 0) fail(op, "p = {} is not divisible by g_{} = {}", c.p, l + 1, g);
    if (s.widths[l] % g != 0)
      fail(op, "{} = {} is not divisible by g_{} = {}", l + 1 == N ? "d_out" : "width", s.widths[l], l + 1, g);
  }
  return s;
}

DExTraDense::DExTraDense(std::int64_t in_features, std::int64_t out_features, GroupedLinearNorm norm, Activation act,
                         double dropout, Generator& gen)
    : Module("DExTraDense"), in_(in_features), out_(out_features), act_(act), dropout_(dropout) {
  if (in_ <= 0 || out_ <= 0) fail("DExTraDense", "sizes must be positive, got {} -> {}", in_, out_);
  check_dropout_probability("DExTraDense", dropout_);
  weight_ = &register_parameter("weight", init::xavier_uniform({out_, in_}, in_, out_, gen));
  bias_ = &register_parameter("bias", zeros({out_}));
  if (norm == GroupedLinearNorm::Chunk) norm_ = register_module("norm", std::make_shared<LayerNorm>(out_));
}

Tensor DExTraDense::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != in_)
    fail("DExTraDense", "expected input [..., {}], got {}", in_, shape_str(x.shape()));
  Tensor y = linear(x, *weight_, *bias_);
  if (norm_) y = norm_->forward(y);
  y = apply_activation(y, act_);
  return define::dropout(y, dropout_, is_training(), generator());
}

DExTraUnit::DExTraUnit(const DExTraConfig& cfg, Generator& gen)
    : Module("DExTraUnit"), cfg_(cfg), sched_(dextra_schedule(cfg)) {
  check_dropout_probability("DExTraUnit", cfg_.dropout);
  input_layer_ = register_module(
      "input_layer", std::make_shared<DExTraDense>(cfg_.d_in, cfg_.p, cfg_.norm, cfg_.activation, cfg_.dropout, gen));
  auto list = register_module("glts", std::make_shared<ModuleList>());
  const bool shuffle = cfg_.mode == DExTraMode::DExTra && cfg_.shuffle;
  for (std::size_t l = 0; l < sched_.groups.size(); ++l) {
    const std::int64_t in = sched_.inputs[l], out = sched_.widths[l], g = sched_.groups[l];
    if (g == 1) {
      auto dense = list->push_back(std::make_shared<DExTraDense>(in, out, cfg_.norm, cfg_.activation, cfg_.dropout, gen));
      glts_.push_back([m = dense.get()](const Tensor& x) { return m->forward(x); });
    } else {
      const GroupedLinearOptions opt{
          .bias = true, .shuffle = shuffle, .norm = cfg_.norm, .activation = cfg_.activation, .dropout = cfg_.dropout};
      auto glt = list->push_back(std::make_shared<GroupedLinear>(in, out, g, opt, gen));
      glts_.push_back([m = glt.get()](const Tensor& x) { return m->forward(x); });
    }
  }
  output_layer_ = register_module(
      "output_layer",
      std::make_shared<DExTraDense>(cfg_.p + cfg_.d_out, cfg_.d_out, cfg_.norm, cfg_.activation, cfg_.dropout, gen));
}

Tensor DExTraUnit::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != cfg_.d_in)
    fail("DExTraUnit", "expected input [..., {}], got {}", cfg_.d_in, shape_str(x.shape()));
  const Tensor X = input_layer_->forward(x);
  Tensor y = glts_[0](X);
  // Group c of layer l sees [X^c, Y^c] (the input chunk first); Y is already shuffled by its GLT.
  for (std::size_t l = 1; l < glts_.size(); ++l) y = glts_[l](split_mix(X, y, sched_.groups[l]));
  return output_layer_->forward(split_mix(X, y, 1));  // g = 1: [X, Y_N]
}

}  // namespace define::nn
