// DefineUnit: the DeFINE unit in the paper's form as define implements it (spec §11), plus the
// paper's ablations as variants.
//
//   e [..., n] -> N grouped-linear layers (hierarchical groups g_l = max(g_max / 2^(l-1), 1),
//   widths growing linearly from n to k) -> reduce: dense k -> m -> [..., m]
//   (with reduce_skip the reduce reads [e, y_N]: dense n + k -> m)
//
// Layer l >= 2 of `define` reads mix(e, y_{l-1}) = [e^1, y^1, e^2, y^2, ...] with g_l chunks of
// each, so group c of layer l sees [e^c, y^c] (split_mix). Every layer is GLT + bias ->
// per-chunk LayerNorm (shared affine) -> activation -> dropout; the reduce has no norm and no
// activation.
//
// Variants (spec §11 "Ablations"; widths as `define` unless stated):
//   define           hierarchical groups, mixer
//   define-nomix     skip by plain concatenation [e, y_{l-1}] (same parameters as define)
//   hgt              hierarchical groups, no skip (layer l reads y_{l-1})
//   glt              g_l = g_max at every layer, no skip
//   glt-shuffle      glt with the transpose shuffle after every layer
//   linear           g_l = 1 at every layer, no skip
//   define-residual  every width k/2; y_l = F_l(y_{l-1}) + y_{l-1} for l >= 2; reduce k/2 -> m
//   no-reduce        define without the reduce: the unit outputs y_N (width k)
//
// Submodules: layers.0 .. layers.{N-1} (GroupedLinear), reduce (Linear), so parameter names read
// `layers.2.weight`, `layers.2.norm.weight`, `reduce.weight`.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "nn/grouped_linear.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace define::nn {

enum class DefineVariant { Define, DefineNoMix, Hgt, Glt, GltShuffle, Linear, DefineResidual, NoReduce };

// Names as in the list above; anything else throws naming the string.
DefineVariant parse_define_variant(std::string_view name);
const char* to_string(DefineVariant v);

struct DefineConfig {
  std::int64_t n = 0;      // input (map) width
  std::int64_t k = 0;      // max width (output of the last HGT layer)
  std::int64_t N = 0;      // number of HGT layers
  std::int64_t m = 0;      // output width (after reduce)
  std::int64_t g_max = 1;  // groups of the first layer; a power of two
  DefineVariant variant = DefineVariant::Define;
  GroupedLinearNorm norm = GroupedLinearNorm::Chunk;
  Activation activation = Activation::Swish;
  double dropout = 0.0;    // after each HGT layer's activation
  GroupedLinearInit init = GroupedLinearInit::Released;  // of the HGT layers (the reduce is a dense Xavier layer)
  // The reduce reads [e, y_N] instead of y_N (+ n*m weights), as the released code's output layer
  // reads [X, Y_N]: a linear path from the table to the output, so the unit starts out close to a
  // projection and learns its deep part on top. With init = xavier it took the PTB LSTM's
  // 20-minute test perplexity from 198.8 to 141.5 (README, Status). Not with no-reduce.
  bool reduce_skip = false;
};

// The layer schedule §11 derives from a config (validated: throws "DefineUnit: ..." naming the
// offending values). Exposed so counts can be checked without building a unit.
struct DefineSchedule {
  std::vector<std::int64_t> groups;  // g_1 .. g_N
  std::vector<std::int64_t> widths;  // o_1 .. o_N
  std::vector<std::int64_t> inputs;  // in_1 .. in_N (input width of each layer)
};
DefineSchedule define_schedule(const DefineConfig& cfg);

class DefineUnit : public Module {
 public:
  explicit DefineUnit(const DefineConfig& cfg, Generator& gen = default_generator());

  // e [..., n] -> [..., m] ([..., k] for no-reduce, [..., m] with k/2 inside for define-residual).
  Tensor forward(const Tensor& e) const;
  // y_1 .. y_N, the outputs of the HGT layers (before the reduce), for inspection (corrmap).
  std::vector<Tensor> layer_outputs(const Tensor& e) const;

  const DefineConfig& config() const { return cfg_; }
  const std::vector<std::int64_t>& groups() const { return sched_.groups; }
  const std::vector<std::int64_t>& widths() const { return sched_.widths; }
  std::int64_t out_features() const;
  const std::vector<std::shared_ptr<GroupedLinear>>& layers() const { return layers_; }
  const std::shared_ptr<nn::Linear>& reduce() const { return reduce_; }  // null for no-reduce

 private:
  DefineConfig cfg_;
  DefineSchedule sched_;
  std::vector<std::shared_ptr<GroupedLinear>> layers_;
  std::shared_ptr<nn::Linear> reduce_;
};

}  // namespace define::nn
