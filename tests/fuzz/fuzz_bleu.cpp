// Fuzz target: BLEU's text readers (data/bleu.h): line splitting, the UTF-8 check, the 13a
// tokenizer and the n-gram statistics, on any bytes (`define bleu` refuses files that are not
// UTF-8, but the library takes any bytes).
//
// Input: NUL-separated parts: a hypothesis text and a reference text; both are split into lines
// and the first min(lines) of each scored. Properties checked: the score, precisions and BP are in
// range, matches never exceed totals, a text scored against itself gets 100 when it has a 4-gram,
// and tokenized text holds no whitespace but single spaces.
// Expected outcomes and findings: tests/fuzz/fuzz_util.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/bleu.h"
#include "fuzz_util.h"

namespace {

using define::fuzz::check;
using namespace define::data;

void check_score(const BleuScore& s) {
  check(s.score >= 0.0 && s.score <= 100.0 + 1e-9, "BLEU outside [0, 100]");
  check(s.bp >= 0.0 && s.bp <= 1.0, "brevity penalty outside [0, 1]");
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    check(s.matches[n] >= 0 && s.matches[n] <= s.totals[n], "more matches than n-grams");
    check(s.precisions[n] >= 0.0 && s.precisions[n] <= 100.0, "a precision outside [0, 100]");
  }
  check(s.totals[0] == s.hyp_len, "unigram count differs from the hypothesis length");
  (void)s.format();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> parts = define::fuzz::split(data, size);
  const std::string_view hyp_text = parts[0], ref_text = parts.size() > 1 ? parts[1] : std::string_view{};
  (void)first_invalid_utf8(hyp_text);
  std::vector<std::string> hyps = split_lines(hyp_text), refs = split_lines(ref_text);
  for (const std::string& line : hyps) {
    const std::string tokens = tokenize_13a(line);
    check(split_unicode(tokens).size() == static_cast<std::size_t>(std::count(tokens.begin(), tokens.end(), ' ')) +
                                             (tokens.empty() ? 0 : 1),
          "tokenized text holds whitespace other than single spaces");
  }
  const std::size_t n = std::min(hyps.size(), refs.size());
  hyps.resize(n);
  refs.resize(n);
  define::fuzz::expect_define_error([&] { check_score(corpus_bleu(hyps, refs)); });
  define::fuzz::expect_define_error([&] {
    const BleuScore self = corpus_bleu(hyps, hyps);
    check_score(self);
    check(self.totals[3] == 0 || self.score > 100.0 - 1e-9, "a text scored against itself is not 100");
  });
  return 0;
}
