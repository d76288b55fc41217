#include "models/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "autograd/grad_mode.h"
#include "autograd/softmax.h"
#include "autograd/views.h"
#include "core/error.h"
#include "core/factory.h"

namespace define::models {
namespace {

constexpr const char* kOp = "beam_search";
constexpr double kDead = -std::numeric_limits<double>::infinity();

struct Live {
  std::int64_t sentence;
  std::vector<std::int32_t> tokens;
  double log_prob;  // total so far; kDead for the filler rows of the first step
};

struct Candidate {
  double log_prob;
  std::int64_t row;
  std::int64_t token;
};

}  // namespace

void check_beam_search_options(const BeamSearchOptions& o, std::int64_t vocab) {
  if (o.beam < 1) fail(kOp, "beam must be >= 1, got {}", o.beam);
  if (o.nbest < 1 || o.nbest > o.beam) fail(kOp, "nbest must be in [1, beam = {}], got {}", o.beam, o.nbest);
  if (!std::isfinite(o.lenpen)) fail(kOp, "lenpen must be finite, got {}", o.lenpen);
  if (!(o.max_len_a >= 0.0) || !std::isfinite(o.max_len_a)) fail(kOp, "max_len_a must be >= 0, got {}", o.max_len_a);
  if (o.max_len_b < 0) fail(kOp, "max_len_b must be >= 0, got {}", o.max_len_b);
  if (o.min_len < 0) fail(kOp, "min_len must be >= 0, got {}", o.min_len);
  for (const auto& [name, id] : {std::pair{"bos", o.bos}, std::pair{"eos", o.eos}})
    if (id < 0 || id >= vocab) fail(kOp, "{} id {} is outside the vocabulary [0, {})", name, id, vocab);
}

namespace {

// Host copy of log-probabilities [N, V] in double.
std::vector<double> host_log_probs(const Tensor& logits) {
  const Tensor lp = log_softmax(logits, -1);
  return copy_to_device(to_dtype(lp, DType::Float64), Device::cpu()).to_vector<double>();
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(const TranslationModel& model, const Tensor& src,
                                                 const BeamSearchOptions& opt) {
  check_token_batch(kOp, "source", src);
  const std::int64_t V = model.vocab(), K = opt.beam, pad = model.padding_idx();
  check_beam_search_options(opt, V);
  if (model.is_training()) fail(kOp, "the model must be in eval mode");
  NoGradGuard no_grad;
  const Device device = src.device();
  const std::int64_t S = src.size(0), B = src.size(1);

  // Each sentence's most tokens before eos, from its source length without padding and eos (as
  // fairseq counts it); never below min_len, so that some hypothesis can always end.
  const std::vector<std::int64_t> host_src = copy_to_device(to_dtype(src, DType::Int64), Device::cpu()).to_vector<std::int64_t>();
  std::vector<std::int64_t> max_len(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t len = 0;
    for (std::int64_t s = 0; s < S; ++s) len += host_src[s * B + b] != pad && host_src[s * B + b] != opt.eos;
    max_len[b] = std::max(opt.min_len, static_cast<std::int64_t>(std::floor(opt.max_len_a * len)) + opt.max_len_b);
  }

  std::vector<std::vector<Hypothesis>> finished(static_cast<std::size_t>(B));
  if (B == 0) return finished;
  auto state = model.begin_decoding(src);
  // K rows per sentence; only the first is live at the first step (they would all be equal).
  std::vector<Live> live;
  std::vector<std::int64_t> rows;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t k = 0; k < K; ++k) {
      live.push_back({b, {}, k == 0 ? 0.0 : kDead});
      rows.push_back(b);
    }
  model.select_rows(*state, from_vector(rows, {static_cast<std::int64_t>(rows.size())}, device));
  std::vector<std::int64_t> prev(live.size(), opt.bos);

  std::vector<Candidate> cands;
  for (std::int64_t step = 0; !live.empty(); ++step) {
    const std::int64_t N = static_cast<std::int64_t>(live.size());
    const std::vector<double> lp = host_log_probs(model.decode_step(*state, from_vector(prev, {N}, device)));
    std::vector<Live> next;
    std::vector<std::int64_t> next_rows, next_prev;
    for (std::int64_t first = 0; first < N; first += K) {
      const std::int64_t b = live[first].sentence;
      const bool at_max = step >= max_len[b];  // step = tokens so far: only eos may follow
      const bool eos_banned = step < opt.min_len;
      cands.clear();
      for (std::int64_t r = first; r < first + K; ++r) {
        if (live[r].log_prob == kDead) continue;
        const double* row = lp.data() + r * V;
        for (std::int64_t v = 0; v < V; ++v) {
          if (v == pad || v == opt.bos || (!opt.allow_unk && v == opt.unk) || (at_max && v != opt.eos) ||
              (eos_banned && v == opt.eos))
            continue;
          const double total = live[r].log_prob + row[v];
          if (total > kDead) cands.push_back({total, r, v});
        }
      }
      const std::size_t keep = std::min<std::size_t>(cands.size(), static_cast<std::size_t>(2 * K));
      // Best first; ties by row, then token, so the search is deterministic.
      std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(),
                        [](const Candidate& x, const Candidate& y) {
                          return std::tie(y.log_prob, x.row, x.token) < std::tie(x.log_prob, y.row, y.token);
                        });
      std::vector<Hypothesis>& done = finished[b];
      const std::size_t mark = next.size();
      std::int64_t accepted = 0;
      for (std::size_t j = 0; j < keep; ++j) {
        const Candidate& c = cands[j];
        if (c.token == opt.eos) {
          // Only an eos among the best `beam` continuations finishes a hypothesis (fairseq).
          if (static_cast<std::int64_t>(j) < K && static_cast<std::int64_t>(done.size()) < K) {
            const double length = static_cast<double>(step + 1);
            done.push_back({live[c.row].tokens, c.log_prob / std::pow(length, opt.lenpen), c.log_prob});
          }
          continue;
        }
        if (accepted == K) continue;
        Live h{b, live[c.row].tokens, c.log_prob};
        h.tokens.push_back(static_cast<std::int32_t>(c.token));
        next.push_back(std::move(h));
        next_rows.push_back(c.row);
        next_prev.push_back(c.token);
        ++accepted;
      }
      if (static_cast<std::int64_t>(done.size()) >= K || at_max || accepted == 0) {
        next.resize(mark);  // the sentence is done: its rows leave the decoder
        next_rows.resize(mark);
        next_prev.resize(mark);
        continue;
      }
      for (; accepted < K; ++accepted) {  // fewer continuations than beams (tiny vocabularies): dead fillers
        next.push_back({b, {}, kDead});
        next_rows.push_back(first);
        next_prev.push_back(opt.eos);
      }
    }
    live = std::move(next);
    prev = std::move(next_prev);
    if (!live.empty())
      model.select_rows(*state, from_vector(next_rows, {static_cast<std::int64_t>(next_rows.size())}, device));
  }
  for (auto& hyps : finished) {
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (static_cast<std::int64_t>(hyps.size()) > opt.nbest) hyps.resize(static_cast<std::size_t>(opt.nbest));
  }
  return finished;
}

}  // namespace define::models
