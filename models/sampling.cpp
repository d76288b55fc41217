#include "models/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace define::models {

constexpr const char* kOp = "sampling";

void check_sampling_options(const SamplingOptions& o) {
  if (!(o.temperature >= 0.0) || !std::isfinite(o.temperature))
    fail(kOp, "the temperature must be a finite number >= 0, got {}", o.temperature);
  if (o.top_k < 0) fail(kOp, "top-k must be >= 0 (0: no limit), got {}", o.top_k);
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) fail(kOp, "top-p must be in (0, 1] (1: no limit), got {}", o.top_p);
}

std::vector<double> sampling_distribution(const std::vector<double>& logp, const SamplingOptions& o) {
  check_sampling_options(o);
  if (logp.empty()) fail(kOp, "no tokens to sample from");
  const std::size_t n = logp.size();
  // Tokens from the most to the least likely, ties by id.
  std::vector<std::size_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) { return logp[a] > logp[b]; });
  std::vector<double> p(n, 0.0);
  if (o.temperature == 0.0) {
    p[rank[0]] = 1.0;
    return p;
  }
  std::size_t kept = o.top_k > 0 ? std::min<std::size_t>(n, static_cast<std::size_t>(o.top_k)) : n;
  double total = 0;
  for (std::size_t r = 0; r < kept; ++r) {
    p[rank[r]] = std::exp((logp[rank[r]] - logp[rank[0]]) / o.temperature);
    total += p[rank[r]];
  }
  if (o.top_p < 1.0) {
    // The smallest prefix of the ranking whose renormalised mass reaches top_p.
    double mass = 0;
    std::size_t prefix = 0;
    while (prefix < kept) {
      mass += p[rank[prefix]] / total;
      ++prefix;
      if (mass >= o.top_p) break;
    }
    for (std::size_t r = prefix; r < kept; ++r) p[rank[r]] = 0.0;
    kept = prefix;
    total = 0;
    for (std::size_t r = 0; r < kept; ++r) total += p[rank[r]];
  }
  for (double& v : p) v /= total;
  return p;
}

std::int64_t sample_token(const std::vector<double>& logp, const SamplingOptions& o, double u) {
  const std::vector<double> p = sampling_distribution(logp, o);
  double acc = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    acc += p[i];
    if (u < acc) return static_cast<std::int64_t>(i);
  }
  // Rounding can leave u at the very top: the last token with any probability.
  for (std::size_t i = p.size(); i-- > 0;)
    if (p[i] > 0) return static_cast<std::int64_t>(i);
  return 0;
}

}  // namespace define::models
