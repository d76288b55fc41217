// Embedding: a [num_embeddings, dim] table; forward(indices) -> [indices..., dim].
// Parameters: num_embeddings * dim.
#pragma once

#include <cstdint>
#include <optional>

#include "nn/module.h"

namespace define::nn {

struct EmbeddingOptions {
  // Row that is zero at initialisation and never receives a gradient (padding tokens); -1: none.
  std::int64_t padding_idx = -1;
  // Rows ~ N(0, init_std^2). Unset: dim^-0.5 (fairseq / DeLighT), which gives rows of norm about
  // 1, so a model scaling embeddings by sqrt(dim) starts at unit-variance entries.
  std::optional<double> init_std{};
  // When set, rows ~ U(-init_range, init_range) instead (AWD-LSTM uses 0.1).
  std::optional<double> init_range{};
};

class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t dim, EmbeddingOptions opt = {},
            Generator& gen = default_generator());

  // indices: int32/int64 of any shape, each in [0, num_embeddings).
  Tensor forward(const Tensor& indices) const;

  const Tensor& weight() const { return *weight_; }
  std::int64_t num_embeddings() const { return num_; }
  std::int64_t dim() const { return dim_; }
  std::int64_t padding_idx() const { return padding_idx_; }

 private:
  std::int64_t num_, dim_, padding_idx_;
  Tensor* weight_;
};

}  // namespace define::nn
