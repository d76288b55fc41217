// ProjectiveEmbedding: a V x n table followed by an n -> m linear projection (Transformer-XL /
// adaptive-input style factorisation): the table costs V * n instead of V * m, and the model
// still sees width m. Parameters: V * n + n * m (+ m with the projection bias).
// Children: "embedding" (Embedding) and "projection" (Linear).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "nn/embedding.h"
#include "nn/linear.h"

namespace define::nn {

struct ProjectiveEmbeddingOptions {
  std::int64_t padding_idx = -1;
  // Off by default: a bias would add the same vector to every token's representation, which the
  // layers above can learn themselves.
  bool projection_bias = false;
  std::optional<double> init_std{};  // the table's N(0, std^2); unset: n^-0.5 (see Embedding)
};

class ProjectiveEmbedding : public Module {
 public:
  ProjectiveEmbedding(std::int64_t num_embeddings, std::int64_t embedding_dim, std::int64_t output_dim,
                      ProjectiveEmbeddingOptions opt = {}, Generator& gen = default_generator());

  // indices of any shape -> [indices..., output_dim].
  Tensor forward(const Tensor& indices) const;

  const std::shared_ptr<Embedding>& embedding() const { return embedding_; }
  const std::shared_ptr<Linear>& projection() const { return projection_; }

 private:
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<Linear> projection_;
};

}  // namespace define::nn
