// Reference relative-attention row kernels (see kernels/ref/rel_attention.h). Row r of the
// [B*H*Tq, Tk] view belongs to query i = r % Tq; M = Tk - Tq.
#include "kernels/ref/rel_attention.h"

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

void rel_attention_softmax(const Tensor& ac, const Tensor& bd, const Tensor& probs, const Tensor& dropped,
                           std::int64_t window, double scale, double p, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t tq = ac.size(2), tk = ac.size(3), mem = tk - tq;
  const std::int64_t rows = ac.numel() / tk;
  DEFINE_DISPATCH_FLOAT(ac.dtype(), "rel_attention_softmax", [&] {
    const scalar_t* a = ac.data<scalar_t>();
    const scalar_t* b = bd.data<scalar_t>();
    scalar_t* out = probs.data<scalar_t>();
    scalar_t* drop = dropped.defined() ? dropped.data<scalar_t>() : nullptr;
    const scalar_t drop_scale = dropout_scale<scalar_t>(p);
    std::vector<double> s(static_cast<std::size_t>(tk));
    std::vector<char> visible(static_cast<std::size_t>(tk));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = r % tq;
      double max = -std::numeric_limits<double>::infinity();
      bool any = false;
      for (std::int64_t j = 0; j < tk; ++j) {
        const std::int64_t dist = i + mem - j;
        const auto jj = static_cast<std::size_t>(j);
        visible[jj] = dist >= 0 && (window <= 0 || dist < window);
        if (!visible[jj]) continue;
        // The score as the header writes it: the position term of distance dist sits at Tk-1-dist.
        s[jj] = scale * (double(a[r * tk + j]) + double(b[r * tk + (tk - 1 - dist)]));
        any = true;
        max = std::max(max, s[jj]);
      }
      // Visible scores all -inf (only infinite inputs make one): the row counts as fully masked.
      any = any && max != -std::numeric_limits<double>::infinity();
      double sum = 0;
      for (std::int64_t j = 0; j < tk; ++j)
        if (visible[static_cast<std::size_t>(j)]) sum += std::exp(s[static_cast<std::size_t>(j)] - max);
      for (std::int64_t j = 0; j < tk; ++j) {
        const std::int64_t e = r * tk + j;
        const auto jj = static_cast<std::size_t>(j);
        out[e] = static_cast<scalar_t>(any && visible[jj] ? std::exp(s[jj] - max) / sum : 0.0);
        // The same expression as dropout_apply on the rounded probability.
        if (drop) drop[e] = kept(seed, offset, e, p) ? static_cast<scalar_t>(out[e] * drop_scale) : scalar_t(0);
      }
    }
  });
}

void rel_attention_unshift(const Tensor& grad_scores, const Tensor& grad_bd) {
  const std::int64_t tq = grad_scores.size(2), tk = grad_scores.size(3), mem = tk - tq;
  const std::int64_t rows = grad_scores.numel() / tk;
  DEFINE_DISPATCH_FLOAT(grad_scores.dtype(), "rel_attention_unshift", [&] {
    const scalar_t* gs = grad_scores.data<scalar_t>();
    scalar_t* gb = grad_bd.data<scalar_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = r % tq;
      for (std::int64_t pos = 0; pos < tk; ++pos) {
        const std::int64_t j = pos + i + mem - (tk - 1);  // the key whose score read bd[i, pos]
        gb[r * tk + pos] = j >= 0 && j < tk ? gs[r * tk + j] : scalar_t(0);
      }
    }
  });
}

}  // namespace define::kernels::ref
