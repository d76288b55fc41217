#include "nn/projective_embedding.h"

namespace define::nn {

ProjectiveEmbedding::ProjectiveEmbedding(std::int64_t num_embeddings, std::int64_t embedding_dim,
                                         std::int64_t output_dim, ProjectiveEmbeddingOptions opt, Generator& gen)
    : Module("ProjectiveEmbedding") {
  embedding_ = register_module(
      "embedding", std::make_shared<Embedding>(num_embeddings, embedding_dim,
                                               EmbeddingOptions{.padding_idx = opt.padding_idx, .init_std = opt.init_std}, gen));
  projection_ = register_module("projection", std::make_shared<Linear>(embedding_dim, output_dim,
                                                                       LinearOptions{.bias = opt.projection_bias}, gen));
}

Tensor ProjectiveEmbedding::forward(const Tensor& indices) const {
  return projection_->forward(embedding_->forward(indices));
}

}  // namespace define::nn
