#include "nn/attention.h"

#include <cmath>
#include <vector>

#include "autograd/attention.h"
#include "autograd/elementwise.h"
#include "autograd/grad_mode.h"
#include "autograd/views.h"
#include "nn/init.h"

namespace define::nn {

namespace {

constexpr const char* kMha = "MultiheadAttention";

// Checks x is [B, T, width] and returns T.
std::int64_t check_sequence(const char* which, const Tensor& x, std::int64_t width) {
  if (!x.defined() || x.dim() != 3 || x.size(2) != width)
    fail(kMha, "{} must be [B, T, {}], got {}", which, width, x.defined() ? shape_str(x.shape()) : "undefined");
  return x.size(1);
}

}  // namespace

MultiheadAttention::MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions opt,
                                       Generator& gen)
    : Module(kMha), embed_dim_(embed_dim), num_heads_(num_heads), dropout_(opt.dropout) {
  if (embed_dim <= 0 || num_heads <= 0)
    fail(kMha, "embed_dim and num_heads must be positive, got {} and {}", embed_dim, num_heads);
  if (embed_dim % num_heads != 0)
    fail(kMha, "embed_dim {} is not divisible by num_heads {}", embed_dim, num_heads);
  if (opt.kdim < 0 || opt.vdim < 0) fail(kMha, "kdim and vdim must be >= 0 (0: embed_dim), got {} and {}", opt.kdim, opt.vdim);
  if (!(opt.dropout >= 0.0 && opt.dropout <= 1.0)) fail(kMha, "dropout probability {} is outside [0, 1]", opt.dropout);
  const std::int64_t kdim = opt.kdim > 0 ? opt.kdim : embed_dim, vdim = opt.vdim > 0 ? opt.vdim : embed_dim;
  const LinearOptions lin{.bias = opt.bias};
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(embed_dim, embed_dim, lin, gen));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(kdim, embed_dim, lin, gen));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(vdim, embed_dim, lin, gen));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, lin, gen));
  if (kdim == embed_dim && vdim == embed_dim) {
    // fairseq's scaled Xavier for separate q, k, v projections of one width (see the header).
    NoGradGuard no_grad;
    for (const auto* proj : {&q_proj_, &k_proj_, &v_proj_})
      copy_((*proj)->weight(), init::xavier_uniform({embed_dim, embed_dim}, embed_dim, embed_dim, gen,
                                                    1.0 / std::sqrt(2.0)));
  }
}

Tensor MultiheadAttention::split_heads(const Tensor& x) const {
  return permute(view(x, {x.size(0), x.size(1), num_heads_, head_dim()}), {0, 2, 1, 3});
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask, bool causal) const {
  check_sequence("query", query, embed_dim_);
  const std::int64_t tk = check_sequence("key", key, k_proj_->in_features());
  if (check_sequence("value", value, v_proj_->in_features()) != tk)
    fail(kMha, "key {} and value {} must have the same length", shape_str(key.shape()), shape_str(value.shape()));
  const std::int64_t batch = query.size(0);
  if (key.size(0) != batch || value.size(0) != batch)
    fail(kMha, "query {}, key {} and value {} must have the same batch size", shape_str(query.shape()),
         shape_str(key.shape()), shape_str(value.shape()));
  return attend(query, project_keys(key), project_values(value), key_padding_mask, causal);
}

Tensor MultiheadAttention::project_keys(const Tensor& key) const {
  check_sequence("key", key, k_proj_->in_features());
  return split_heads(k_proj_->forward(key));
}

Tensor MultiheadAttention::project_values(const Tensor& value) const {
  check_sequence("value", value, v_proj_->in_features());
  return split_heads(v_proj_->forward(value));
}

Tensor MultiheadAttention::attend(const Tensor& query, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                                  bool causal) const {
  const std::int64_t tq = check_sequence("query", query, embed_dim_);
  const std::int64_t batch = query.size(0);
  for (const auto& [name, t] : {std::pair{"projected keys", &k}, std::pair{"projected values", &v}})
    if (!t->defined() || t->dim() != 4 || t->size(0) != batch || t->size(1) != num_heads_ || t->size(3) != head_dim())
      fail(kMha, "{} must be [B, H, Tk, E / H] = [{}, {}, Tk, {}], got {}", name, batch, num_heads_, head_dim(),
           t->defined() ? shape_str(t->shape()) : "undefined");
  const std::int64_t tk = k.size(2);
  if (v.size(2) != tk) fail(kMha, "projected keys {} and values {} differ in length", shape_str(k.shape()), shape_str(v.shape()));
  if (key_padding_mask.defined() &&
      (key_padding_mask.dim() != 2 || key_padding_mask.size(0) != batch || key_padding_mask.size(1) != tk))
    fail(kMha, "key_padding_mask must be [B, Tk] = [{},{}], got {}", batch, tk, shape_str(key_padding_mask.shape()));

  const Tensor q = split_heads(q_proj_->forward(query));  // [B, H, Tq, E/H]
  const AttentionOptions attn{.key_padding_mask = key_padding_mask,
                              .causal = causal,
                              .dropout = dropout_,
                              .training = is_training(),
                              .generator = &generator()};
  const Tensor heads = scaled_dot_product_attention(q, k, v, attn);  // [B, H, Tq, E/H]
  return out_proj_->forward(reshape(permute(heads, {0, 2, 1, 3}), {batch, tq, embed_dim_}));
}

Tensor sinusoidal_positions(std::int64_t length, std::int64_t dim, std::int64_t offset, TensorOptions opt) {
  if (dim < 2) fail("sinusoidal_positions", "dim must be at least 2, got {}", dim);
  if (length < 0) fail("sinusoidal_positions", "length must be >= 0, got {}", length);
  const std::int64_t half = dim / 2;
  const double step = half > 1 ? std::log(10000.0) / static_cast<double>(half - 1) : 0.0;
  std::vector<double> table(static_cast<std::size_t>(length * dim), 0.0);
  for (std::int64_t t = 0; t < length; ++t) {
    const double pos = static_cast<double>(offset + t);
    double* row = table.data() + t * dim;
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = pos * std::exp(-static_cast<double>(i) * step);
      row[i] = std::sin(angle);
      row[half + i] = std::cos(angle);
    }
  }
  return to_device(to_dtype(from_vector(table, Shape{length, dim}), opt.dtype), opt.device);
}

SinusoidalPositions::SinusoidalPositions(std::int64_t dim) : Module("SinusoidalPositions"), dim_(dim) {
  if (dim < 2) fail("SinusoidalPositions", "dim must be at least 2, got {}", dim);
}

Tensor SinusoidalPositions::forward(const Tensor& x, std::int64_t offset) const {
  if (!x.defined() || (x.dim() != 2 && x.dim() != 3) || x.size(-1) != dim_)
    fail("SinusoidalPositions", "expected x [B, T, {}] or [T, {}], got {}", dim_, dim_,
         x.defined() ? shape_str(x.shape()) : "undefined");
  const std::int64_t length = x.size(x.dim() - 2);
  return add(x, sinusoidal_positions(length, dim_, offset, {x.dtype(), x.device()}));
}

}  // namespace define::nn
