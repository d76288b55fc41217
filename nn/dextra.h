// DExTraUnit: the DExTra / DeFINE unit as the authors RELEASED it (spec §2), in its two modes:
//
//   define-iclr  the released DeFINE (`--define-iclr`, spec §2.3): reversed cyclic group schedule
//                [.., 4, 2, 1] capped by G, expansion over N-1 layers, the N-th GLT is the reduce,
//                no shuffle.
//   dextra       DeLighT's DExTra (spec §2.4, the default): groups 2, 4, .. up to G and mirrored
//                (or the paper's 1, 2, 4, .., group_rule below), widths expand over ceil(N/2)
//                layers and mirror back, transpose shuffle in every GLT with more than one group.
//
// This is not the paper form of DeFINE (nn/define_unit.h, spec §11); the two are separate, named
// layers and never mixed.
//
// Structure (both modes, spec §2.1):
//   X   = input_layer(x)                      dense d_in -> p
//   Y_1 = glts.0(X)                           groups g_1
//   Y_l = glts.{l-1}( Mix_{g_l}(X, Y_{l-1}) )  l = 2..N; Mix = [X^1, Y^1, X^2, Y^2, ..] (split_mix)
//   out = output_layer( [X, Y_N] )            dense (p + d_out) -> d_out
// Every layer (dense or GLT) is matmul + bias -> norm -> activation -> dropout. The norm is the
// released per-chunk LayerNorm (over out/g features, one shared affine pair; a dense layer's
// chunk is its whole output). A GLT with one group is a dense layer, as the released
// get_weight_layer substitutes (Xavier fans in/out of the [out, in] matrix, not the 3-d ones).
//
// Parameter names: input_layer.weight, glts.2.weight, glts.2.norm.weight, output_layer.bias, ...
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "nn/grouped_linear.h"
#include "nn/layer_norm.h"
#include "nn/module.h"

namespace define::nn {

enum class DExTraMode { DefineIclr, DExTra };

// "define-iclr" / "dextra"; anything else throws naming the string.
DExTraMode parse_dextra_mode(std::string_view name);
const char* to_string(DExTraMode mode);

// How dextra mode picks its groups (spec §4.1). The two disagree:
//   released  the released code: g_l = min(2^l, G) for l = 1..ceil(N/2) (from 2), mirrored, and
//             G = 2^ceil(log2(d_m // 32)); the default, so counts match the released models.
//   paper     the DeLighT paper: g_l = min(2^(l-1), g_max) (from 1), mirrored, and
//             g_max = ceil(d_m / 32), which is not a power of two for d_m = 384 (12) or 640 (20).
// define-iclr mode has only the released schedule.
enum class DExTraGroupRule { Released, Paper };
DExTraGroupRule parse_dextra_group_rule(std::string_view name);  // "released" / "paper"
const char* to_string(DExTraGroupRule rule);
// G for a model width d_m under `rule`; throws for d_m < 32 under released (d_m // 32 = 0 has no
// log2) and for d_m < 1 under paper.
std::int64_t dextra_max_groups(std::int64_t d_m, DExTraGroupRule rule);

struct DExTraConfig {
  std::int64_t d_in = 0;        // in_features: input width
  std::int64_t p = 0;           // in_proj_features: width of X after the input layer
  std::int64_t d_out = 0;       // out_features
  double width_mult = 1.0;      // w: the widest GLT has d_max = d_in * w features (d_in, not p)
  std::int64_t depth = 0;       // N >= 2 GLTs
  std::int64_t max_groups = 1;  // G
  DExTraMode mode = DExTraMode::DExTra;
  DExTraGroupRule group_rule = DExTraGroupRule::Released;  // dextra mode's group schedule
  GroupedLinearNorm norm = GroupedLinearNorm::Chunk;              // released: LayerNorm in every layer
  Activation activation = Activation::Swish;  // released: every registered arch sets swish
  double dropout = 0.0;                       // after every layer of the unit (delight_dropout)
  bool shuffle = true;  // dextra mode only (false = --no-glt-shuffle); define-iclr never shuffles
};

// The layer schedule of a config (validated: throws "DExTraUnit: ..." naming the offending
// values). Exposed so that widths, groups and counts can be checked without building a unit.
struct DExTraSchedule {
  double d_max = 0;                  // d_in * w (a float, as in the released code)
  std::vector<std::int64_t> groups;  // g_1 .. g_N
  std::vector<std::int64_t> widths;  // o_1 .. o_N (o_N = d_out: the reduce); o_l for l < N is a
                                     // multiple of lcm(g_l, g_{l+1}, 8), so layer l+1's mixer can split it
  std::vector<std::int64_t> inputs;  // in_1 = p, in_l = p + o_{l-1}
};
DExTraSchedule dextra_schedule(const DExTraConfig& cfg);

// numpy.linspace(start, stop, num) with numpy's arithmetic (i * step + start, the last value
// exactly stop), and the same truncated to integers (dtype=int), so truncation lands where the
// released code's does.
std::vector<double> linspace(double start, double stop, std::int64_t num);
std::vector<std::int64_t> linspace_int(double start, double stop, std::int64_t num);

// A dense layer of the unit: Linear (Xavier, zero bias) -> LayerNorm over out (optional) ->
// activation -> dropout. Parameters: in*out + out (+ 2*out with the norm).
class DExTraDense : public Module {
 public:
  DExTraDense(std::int64_t in_features, std::int64_t out_features, GroupedLinearNorm norm, Activation act,
              double dropout, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) const;
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

 private:
  std::int64_t in_, out_;
  Activation act_;
  double dropout_;
  Tensor* weight_;  // [out, in]
  Tensor* bias_;    // [out]
  std::shared_ptr<LayerNorm> norm_;
};

class DExTraUnit : public Module {
 public:
  explicit DExTraUnit(const DExTraConfig& cfg, Generator& gen = default_generator());

  // x [..., d_in] -> [..., d_out].
  Tensor forward(const Tensor& x) const;

  const DExTraConfig& config() const { return cfg_; }
  const DExTraSchedule& schedule() const { return sched_; }
  const std::vector<std::int64_t>& groups() const { return sched_.groups; }
  const std::vector<std::int64_t>& widths() const { return sched_.widths; }
  std::int64_t in_features() const { return cfg_.d_in; }
  std::int64_t out_features() const { return cfg_.d_out; }

 private:
  DExTraConfig cfg_;
  DExTraSchedule sched_;
  std::shared_ptr<DExTraDense> input_layer_, output_layer_;
  // glts.{l}: a GroupedLinear, or a DExTraDense where g_l == 1; forward through one list.
  std::vector<std::function<Tensor(const Tensor&)>> glts_;
};

}  // namespace define::nn
