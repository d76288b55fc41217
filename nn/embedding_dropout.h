// EmbeddingDropout (Gal & Ghahramani 2016; AWD-LSTM's embedded_dropout): drops whole rows of an
// embedding table, i.e. whole word types, for one forward: every occurrence of a dropped word in
// the batch reads zeros, and kept rows are scaled by 1 / (1 - p). A fresh row mask per forward;
// identity in eval mode. It has no parameters: it transforms the table of another module for one
// call (through ParameterSwap), so it works for any embedding-like module (Embedding,
// ProjectiveEmbedding's "embedding.weight", later DeFINE inputs) without renaming their tensors.
#pragma once

#include <string_view>

#include "nn/module.h"

namespace define::nn {

class EmbeddingDropout : public Module {
 public:
  explicit EmbeddingDropout(double p = 0.1);

  // weight [V, ...] with rows zeroed (probability p) or scaled by 1 / (1 - p); weight itself in
  // eval mode or with p == 0. Differentiable in weight.
  Tensor drop_rows(const Tensor& weight) const;

  // module.forward(indices) with its parameter `weight_name` replaced by drop_rows(it).
  template <class M>
  Tensor forward(M& module, const Tensor& indices, std::string_view weight_name = "weight") const {
    check_weight(module, weight_name);
    if (!is_training() || p_ == 0.0) return module.forward(indices);
    const ParameterSwap swap(module, weight_name, drop_rows(module.parameter(weight_name)));
    return module.forward(indices);
  }

  double p() const { return p_; }

 private:
  // Throws "EmbeddingDropout: Embedding has no parameter 'w'" (in eval mode too, so a wrong name
  // does not wait for the first training step to surface).
  void check_weight(const Module& module, std::string_view weight_name) const;
  double p_;
};

}  // namespace define::nn
