#include "nn/grouped_linear.h"

#include <string>

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/grouped_linear.h"
#include "autograd/split_mix.h"
#include "autograd/views.h"
#include "core/factory.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace define::nn {

GroupedLinearNorm parse_grouped_linear_norm(std::string_view name) {
  if (name == "none") return GroupedLinearNorm::None;
  if (name == "chunk") return GroupedLinearNorm::Chunk;
  fail("GroupedLinear", "unknown norm '{}' (expected none or chunk)", name);
}

Activation parse_activation(std::string_view name) {
  if (name == "none") return Activation::None;
  if (name == "relu") return Activation::Relu;
  if (name == "gelu") return Activation::Gelu;
  if (name == "swish") return Activation::Swish;
  fail("GroupedLinear", "unknown activation '{}' (expected none, relu, gelu or swish)", name);
}

GroupedLinearInit parse_grouped_linear_init(std::string_view name) {
  if (name == "released") return GroupedLinearInit::Released;
  if (name == "xavier") return GroupedLinearInit::Xavier;
  fail("GroupedLinear", "unknown init '{}' (expected released or xavier)", name);
}

const char* to_string(GroupedLinearInit init) { return init == GroupedLinearInit::Xavier ? "xavier" : "released"; }

const char* to_string(GroupedLinearNorm norm) { return norm == GroupedLinearNorm::Chunk ? "chunk" : "none"; }

const char* to_string(Activation act) {
  switch (act) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::Swish: return "swish";
    case Activation::None: break;
  }
  return "none";
}

Tensor apply_activation(const Tensor& x, Activation act) {
  switch (act) {
    case Activation::Relu: return relu(x);
    case Activation::Gelu: return gelu(x);
    case Activation::Swish: return silu(x);  // swish = x * sigmoid(x)
    case Activation::None: break;
  }
  return x;
}

GroupedLinear::GroupedLinear(std::int64_t in_features, std::int64_t out_features, std::int64_t groups,
                         GroupedLinearOptions opt, Generator& gen)
    : Module("GroupedLinear"), in_(in_features), out_(out_features), groups_(groups), opt_(opt) {
  if (in_ <= 0 || out_ <= 0 || groups_ <= 0)
    fail("GroupedLinear", "sizes must be positive, got {} -> {} with {} groups", in_, out_, groups_);
  if (in_ % groups_ != 0 || out_ % groups_ != 0)
    fail("GroupedLinear", "groups {} must divide both in_features {} and out_features {}", groups_, in_, out_);
  check_dropout_probability("GroupedLinear", opt_.dropout);
  const std::int64_t kin = in_ / groups_, kout = out_ / groups_;
  // Released code: xavier_uniform_ on the 3-D tensor [g, in/g, out/g], whose PyTorch fans are
  // fan_in = (in/g)(out/g) and fan_out = g * (out/g) = out (spec §1 "Init" [FLAG]); Released
  // reproduces that bound, Xavier uses the per-group fans. With one group the released code builds
  // a dense layer instead (get_weight_layer, spec §1.5), whose fans are in and out: the 3-d fans
  // would start it sqrt(out) times too small, so both inits agree there.
  const bool released = opt_.init == GroupedLinearInit::Released && groups_ > 1;
  weight_ = &register_parameter(
      "weight", init::xavier_uniform({groups_, kin, kout}, released ? kin * kout : kin, released ? out_ : kout, gen));
  if (opt_.bias) bias_ = &register_parameter("bias", zeros({groups_, kout}));
  if (opt_.norm == GroupedLinearNorm::Chunk)
    norm_ = register_module("norm", std::make_shared<LayerNorm>(kout, LayerNormOptions{.eps = opt_.norm_eps}));
}

Tensor GroupedLinear::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != in_)
    fail("GroupedLinear", "expected input [..., {}], got {}", in_, shape_str(x.shape()));
  Tensor y = grouped_linear(x, *weight_, bias());
  if (opt_.shuffle && groups_ > 1) y = channel_shuffle(y, groups_);
  if (norm_) {
    // [..., out] -> [..., g, out/g]: each row is normalised with the one shared affine pair.
    Shape rows = y.shape();
    const Shape flat = rows;
    rows.back() = groups_;
    rows.push_back(out_ / groups_);
    y = reshape(norm_->forward(reshape(y, rows)), flat);
  }
  y = apply_activation(y, opt_.activation);
  return dropout(y, opt_.dropout, is_training(), generator());
}

}  // namespace define::nn
