#include "nn/define_unit.h"

#include <algorithm>
#include <string>
#include <utility>

#include "autograd/elementwise.h"
#include "autograd/index.h"
#include "autograd/split_mix.h"
#include "nn/container.h"

namespace define::nn {

namespace {

constexpr std::pair<DefineVariant, const char*> kVariantNames[] = {
    {DefineVariant::Define, "define"},         {DefineVariant::DefineNoMix, "define-nomix"},
    {DefineVariant::Hgt, "hgt"},               {DefineVariant::Glt, "glt"},
    {DefineVariant::GltShuffle, "glt-shuffle"}, {DefineVariant::Linear, "linear"},
    {DefineVariant::DefineResidual, "define-residual"}, {DefineVariant::NoReduce, "no-reduce"},
};

bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// How layer l >= 2 reads its input (the variants differ only here and in groups/widths).
enum class Skip { None, Mix, Concat, Residual };

Skip skip_of(DefineVariant v) {
  switch (v) {
    case DefineVariant::Define:
    case DefineVariant::NoReduce: return Skip::Mix;
    case DefineVariant::DefineNoMix: return Skip::Concat;
    case DefineVariant::DefineResidual: return Skip::Residual;
    default: return Skip::None;
  }
}

}  // namespace

DefineVariant parse_define_variant(std::string_view name) {
  for (const auto& [v, s] : kVariantNames)
    if (name == s) return v;
  fail("DefineUnit",
       "unknown variant '{}' (expected define, define-nomix, hgt, glt, glt-shuffle, linear, define-residual "
       "or no-reduce)",
       name);
}

const char* to_string(DefineVariant v) {
  for (const auto& [vv, s] : kVariantNames)
    if (vv == v) return s;
  return "?";
}

DefineSchedule define_schedule(const DefineConfig& c) {
  if (c.n <= 0 || c.k <= 0 || c.N <= 0 || c.m <= 0)
    fail("DefineUnit", "n, k, N and m must be positive, got n={} k={} N={} m={}", c.n, c.k, c.N, c.m);
  if (!is_power_of_two(c.g_max)) fail("DefineUnit", "g_max must be a power of two, got {}", c.g_max);
  DefineSchedule s;
  // 1. Groups: halving from g_max (paper), constant g_max (glt), 1 (linear).
  for (std::int64_t l = 1; l <= c.N; ++l) {
    std::int64_t g = std::max<std::int64_t>(l - 1 < 63 ? c.g_max >> (l - 1) : 0, 1);
    if (c.variant == DefineVariant::Glt || c.variant == DefineVariant::GltShuffle) g = c.g_max;
    if (c.variant == DefineVariant::Linear) g = 1;
    s.groups.push_back(g);
  }
  if (c.n % s.groups.front() != 0)
    fail("DefineUnit", "n = {} must be divisible by the first layer's groups g_1 = {}", c.n, s.groups.front());
  // 2. Widths.
  if (c.variant == DefineVariant::DefineResidual) {
    // Every layer k/2 wide; g_1 is the largest group count and the others divide it.
    if (c.k % 2 != 0 || (c.k / 2) % s.groups.front() != 0)
      fail("DefineUnit", "define-residual needs k/2 divisible by g_1 = {}, got k = {}", s.groups.front(), c.k);
    s.widths.assign(c.N, c.k / 2);
  } else {
    if (c.k % s.groups.back() != 0)
      fail("DefineUnit", "k = {} must be divisible by the last layer's groups g_N = {}", c.k, s.groups.back());
    for (std::int64_t l = 1; l < c.N; ++l) {
      // o_l = n + (k - n) l / N rounded UP to a multiple of q = max(g_l, 8), in exact integers:
      // ceil((n N + (k - n) l) / (N q)) * q. Negative numerators (k < n) still round up.
      const std::int64_t q = std::max<std::int64_t>(s.groups[l - 1], 8);
      const std::int64_t num = c.n * c.N + (c.k - c.n) * l, den = c.N * q;
      const std::int64_t units = num >= 0 ? (num + den - 1) / den : -((-num) / den);
      s.widths.push_back(std::max<std::int64_t>(units, 1) * q);
    }
    s.widths.push_back(c.k);
  }
  // 3. Input widths from the skip rule.
  const Skip skip = skip_of(c.variant);
  for (std::int64_t l = 0; l < c.N; ++l) {
    if (l == 0) s.inputs.push_back(c.n);
    else if (skip == Skip::Mix || skip == Skip::Concat) s.inputs.push_back(c.n + s.widths[l - 1]);
    else s.inputs.push_back(s.widths[l - 1]);
  }
  return s;
}

DefineUnit::DefineUnit(const DefineConfig& cfg, Generator& gen)
    : Module("DefineUnit"), cfg_(cfg), sched_(define_schedule(cfg)) {
  auto list = register_module("layers", std::make_shared<ModuleList>());
  const GroupedLinearOptions opt{.bias = true,
                               .shuffle = cfg_.variant == DefineVariant::GltShuffle,
                               .norm = cfg_.norm,
                               .activation = cfg_.activation,
                               .dropout = cfg_.dropout,
                               .init = cfg_.init};
  for (std::size_t l = 0; l < sched_.groups.size(); ++l) {
    auto layer = std::make_shared<GroupedLinear>(sched_.inputs[l], sched_.widths[l], sched_.groups[l], opt, gen);
    list->push_back(layer);
    layers_.push_back(std::move(layer));
  }
  if (cfg_.reduce_skip && cfg_.variant == DefineVariant::NoReduce)
    fail("DefineUnit", "reduce_skip needs a reduce layer (variant no-reduce has none)");
  const std::int64_t reduce_in = sched_.widths.back() + (cfg_.reduce_skip ? cfg_.n : 0);
  if (cfg_.variant != DefineVariant::NoReduce)
    reduce_ = register_module("reduce", std::make_shared<nn::Linear>(reduce_in, cfg_.m, LinearOptions{}, gen));
}

std::int64_t DefineUnit::out_features() const { return reduce_ ? cfg_.m : sched_.widths.back(); }

std::vector<Tensor> DefineUnit::layer_outputs(const Tensor& e) const {
  if (e.dim() < 1 || e.size(-1) != cfg_.n)
    fail("DefineUnit", "expected input [..., {}], got {}", cfg_.n, shape_str(e.shape()));
  const Skip skip = skip_of(cfg_.variant);
  std::vector<Tensor> ys{layers_[0]->forward(e)};
  for (std::size_t l = 1; l < layers_.size(); ++l) {
    const Tensor& y = ys.back();
    switch (skip) {
      // Group c of layer l sees [e^c, y^c] (input chunk first).
      case Skip::Mix: ys.push_back(layers_[l]->forward(split_mix(e, y, sched_.groups[l]))); break;
      case Skip::Concat: ys.push_back(layers_[l]->forward(concat({e, y}, -1))); break;
      case Skip::Residual: ys.push_back(add(layers_[l]->forward(y), y)); break;
      case Skip::None: ys.push_back(layers_[l]->forward(y)); break;
    }
  }
  return ys;
}

Tensor DefineUnit::forward(const Tensor& e) const {
  const Tensor y = layer_outputs(e).back();
  if (!reduce_) return y;
  return reduce_->forward(cfg_.reduce_skip ? concat({e, y}, -1) : y);
}

}  // namespace define::nn
