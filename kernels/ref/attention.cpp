// Reference attention row kernels (see kernels/ref/attention.h). Row r of the [B*H*Tq, Tk] view
// belongs to batch r / (H * Tq) and query r % Tq.
#include "kernels/ref/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "kernels/dropout.h"

namespace define::kernels::ref {
namespace {

bool kept(std::uint64_t seed, std::uint64_t offset, std::int64_t element, double p) {
  return philox::u32_to_unit_float(philox::random_u32(seed, offset, static_cast<std::uint64_t>(element))) >= p;
}

}  // namespace

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t heads = scores.size(1), tq = scores.size(2), tk = scores.size(3);
  const std::int64_t rows = scores.numel() / tk;
  const std::int32_t* pad = key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr;
  DEFINE_DISPATCH_FLOAT(scores.dtype(), "attention_softmax", [&] {
    const scalar_t* s = scores.data<scalar_t>();
    scalar_t* out = probs.data<scalar_t>();
    scalar_t* drop = dropped.defined() ? dropped.data<scalar_t>() : nullptr;
    const scalar_t drop_scale = dropout_scale<scalar_t>(p);
    std::vector<char> valid(static_cast<std::size_t>(tk));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t batch = r / (heads * tq), query = r % tq;
      double max = -std::numeric_limits<double>::infinity();
      bool any = false;
      for (std::int64_t j = 0; j < tk; ++j) {
        const bool padded = pad != nullptr && pad[batch * tk + j] != 0;
        const bool future = causal && j > query + (tk - tq);
        valid[static_cast<std::size_t>(j)] = !padded && !future;
        if (!valid[static_cast<std::size_t>(j)]) continue;
        any = true;
        max = std::max(max, double(s[r * tk + j]));
      }
      // A row whose valid scores are all -inf (only infinite inputs make one) counts as fully masked.
      any = any && max != -std::numeric_limits<double>::infinity();
      double sum = 0;
      for (std::int64_t j = 0; j < tk; ++j)
        if (valid[static_cast<std::size_t>(j)]) sum += std::exp(double(s[r * tk + j]) - max);
      for (std::int64_t j = 0; j < tk; ++j) {
        const std::int64_t e = r * tk + j;
        const double value = any && valid[static_cast<std::size_t>(j)] ? std::exp(double(s[e]) - max) / sum : 0.0;
        out[e] = static_cast<scalar_t>(value);
        // The same expression as dropout_apply on the rounded probability.
        if (drop) drop[e] = kept(seed, offset, e, p) ? static_cast<scalar_t>(out[e] * drop_scale) : scalar_t(0);
      }
    }
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool, double p, std::uint64_t seed, std::uint64_t offset,
                                double scale) {
  const std::int64_t tk = probs.size(3);
  const std::int64_t rows = probs.numel() / tk;
  DEFINE_DISPATCH_FLOAT(probs.dtype(), "attention_softmax_backward", [&] {
    const scalar_t* pr = probs.data<scalar_t>();
    const scalar_t* gd = grad_dropped.data<scalar_t>();
    scalar_t* gs = grad_scores.data<scalar_t>();
    scalar_t* drop = dropped.defined() ? dropped.data<scalar_t>() : nullptr;
    const bool dropping = drop != nullptr;
    const scalar_t drop_scale = dropout_scale<scalar_t>(p);
    const double drop_scale_d = dropping && p < 1.0 ? 1.0 / (1.0 - p) : 1.0;
    std::vector<double> grad_probs(static_cast<std::size_t>(tk));
    for (std::int64_t r = 0; r < rows; ++r) {
      double dot = 0;  // rowsum(dP * P)
      for (std::int64_t j = 0; j < tk; ++j) {
        const std::int64_t e = r * tk + j;
        const bool keep = !dropping || kept(seed, offset, e, p);
        const double g = keep ? double(gd[e]) * drop_scale_d : 0.0;
        grad_probs[static_cast<std::size_t>(j)] = g;
        dot += g * double(pr[e]);
        if (drop) drop[e] = keep ? static_cast<scalar_t>(pr[e] * drop_scale) : scalar_t(0);
      }
      for (std::int64_t j = 0; j < tk; ++j) {
        const std::int64_t e = r * tk + j;
        gs[e] = static_cast<scalar_t>(scale * double(pr[e]) * (grad_probs[static_cast<std::size_t>(j)] - dot));
      }
    }
  });
}

}  // namespace define::kernels::ref
