// Drawing the next token from a language model's log-probabilities, as `define generate` does:
// temperature, then top-k, then nucleus (top-p) truncation, in the order of Hugging Face's
// samplers (TopKLogitsWarper before TopPLogitsWarper: top-p's cumulative mass is taken over the
// top-k words' renormalised probabilities).
//   temperature T  p_i ~ exp(logp_i / T); T = 0 puts all the mass on the most likely token.
//   top_k K        keeps the K most likely tokens (0: all).
//   top_p P        keeps the smallest set of most likely tokens whose probability adds up to at
//                  least P (1: all); the most likely token is always kept.
// Ties are ranked by token id (the lower first), so the kept set never depends on sort order.
#pragma once

#include <cstdint>
#include <vector>

namespace define::models {

struct SamplingOptions {
  double temperature = 1.0;
  std::int64_t top_k = 0;
  double top_p = 1.0;
};

// Throws naming the option when one is out of range (temperature < 0, top_k < 0, top_p outside
// (0, 1], or a value that is not finite).
void check_sampling_options(const SamplingOptions& o);

// The distribution a token is drawn from: one probability per token of `logp` (zero for the tokens
// the truncation removed), summing to 1. In double, after subtracting the maximum, so a low
// temperature does not overflow.
std::vector<double> sampling_distribution(const std::vector<double>& logp, const SamplingOptions& o);

// The token at u in [0, 1) of that distribution's cumulative sum in token-id order (so a
// uniform u draws from it exactly; without truncation this is plain temperature sampling).
std::int64_t sample_token(const std::vector<double>& logp, const SamplingOptions& o, double u);

}  // namespace define::models
