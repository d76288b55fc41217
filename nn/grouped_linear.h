// GroupedLinear: the group linear transformation (GLT) of DeFINE / DExTra (spec §1).
//
//   x [..., in] -> grouped matmul + bias -> (transpose shuffle) -> per-chunk LayerNorm
//               -> activation -> dropout -> [..., out]
//
// The last dim of x is split into `groups` contiguous chunks; chunk i goes through its own
// [in/g, out/g] matrix and bias. The optional shuffle interleaves the groups' outputs
// ([a0..a3 | b0..b3] -> [a0 b0 a1 b1 ...]). The optional norm views the (shuffled) output as
// `groups` rows of out/g features and normalises each row with ONE shared affine pair, as the
// released code does, so it costs 2 * out/g parameters. groups == 1 is a dense layer through the
// same code path.
//
// Parameters: weight [g, in/g, out/g], bias [g, out/g] (when enabled), norm.weight / norm.bias
// [out/g] (when norm is chunk). Count: in*out/g + out + 2*out/g.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "nn/layer_norm.h"
#include "nn/module.h"

namespace define::nn {

enum class GroupedLinearNorm { None, Chunk };
enum class Activation { None, Relu, Gelu, Swish };
// Weight init. Released: the released code's xavier_uniform_ over the 3-D tensor, bound
// sqrt(6 / ((in/g)(out/g) + out)) (spec §1 "Init"): a layer's output variance is
// 2(in/g) / ((out/g)(in/g + g)) times its input's (1/24 for 128 -> 256 in 8 groups), so a stack of
// such layers starts with a vanishing signal. Xavier: each group initialised as its own
// [in/g, out/g] layer, bound sqrt(6 / (in/g + out/g)), variance gain 2(in/g) / (in/g + out/g) (2/3).
// A one-group layer is a dense layer under either init (fans in and out), as the released code
// substitutes nn.Linear for a GLT with one group.
enum class GroupedLinearInit { Released, Xavier };

// "none" / "chunk" and "none" / "relu" / "gelu" / "swish"; anything else throws naming the string.
GroupedLinearNorm parse_grouped_linear_norm(std::string_view name);
Activation parse_activation(std::string_view name);
GroupedLinearInit parse_grouped_linear_init(std::string_view name);  // "released" / "xavier"
const char* to_string(GroupedLinearNorm norm);
const char* to_string(Activation act);
const char* to_string(GroupedLinearInit init);
// act(x) for the element-wise choices above (None returns x itself).
Tensor apply_activation(const Tensor& x, Activation act);

struct GroupedLinearOptions {
  bool bias = true;
  bool shuffle = false;           // transpose channel shuffle of the output (spec §1 step 3)
  GroupedLinearNorm norm = GroupedLinearNorm::None;   // per-chunk LayerNorm with a shared affine pair
  Activation activation = Activation::None;
  double dropout = 0.0;           // after the activation; uses generator(), off in eval mode
  double norm_eps = 1e-5;
  GroupedLinearInit init = GroupedLinearInit::Released;
};

class GroupedLinear : public Module {
 public:
  // Throws when groups does not divide in or out (naming all three values).
  GroupedLinear(std::int64_t in_features, std::int64_t out_features, std::int64_t groups,
              GroupedLinearOptions opt = {}, Generator& gen = default_generator());

  Tensor forward(const Tensor& x) const;

  const Tensor& weight() const { return *weight_; }
  const Tensor& bias() const { return bias_ ? *bias_ : none_; }  // undefined without a bias
  const std::shared_ptr<LayerNorm>& norm() const { return norm_; }  // null without a norm
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  std::int64_t groups() const { return groups_; }
  const GroupedLinearOptions& options() const { return opt_; }

 private:
  std::int64_t in_, out_, groups_;
  GroupedLinearOptions opt_;
  Tensor* weight_;                // slots owned by Module (read through, never copied)
  Tensor* bias_ = nullptr;
  std::shared_ptr<LayerNorm> norm_;
  Tensor none_;
};

}  // namespace define::nn
