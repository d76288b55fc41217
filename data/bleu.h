// Corpus BLEU computed by sacreBLEU 2.x's default rules (Post 2018, "A Call for Clarity in Reporting
// BLEU Scores"; the rules read from sacrebleu 2.6.0's metrics/bleu.py and tokenizers/), so that a
// translation scored here can be compared with published sacreBLEU numbers:
//   * tokenizer 13a (mteval-v13a.pl's normalisation and punctuation splitting), case-sensitive;
//   * one reference per segment, n-grams of order 1 to 4, clipped counts summed over the corpus;
//   * smoothing "exp" (mteval's: the k-th order whose match count is 0 gets precision
//     100 / (2^k * total)), no effective order;
//   * brevity penalty exp(1 - ref_len / hyp_len) when the hypothesis is shorter, 0 for an empty one.
// scripts/checks/check-bleu.sh checks the agreement with the sacrebleu Python package on Multi30k.
//
// Text is UTF-8. 13a's regular expressions only name ASCII characters, so it is applied to bytes:
// for valid UTF-8 that gives exactly what Python does on characters (bleu.cpp says why). What is
// not ASCII matters in one place, Python's str.split() / str.rstrip(), which split on Unicode
// whitespace (U+0085, U+00A0, U+2000..U+200A, U+3000, ...): those are recognised too. Bytes that
// are not valid UTF-8 never crash anything; each counts as one character that is not whitespace,
// which is what Python gives for text decoded with errors="surrogateescape".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace define::data {

inline constexpr int kBleuMaxOrder = 4;

struct BleuScore {
  double score = 0;                                // BLEU in [0, 100]
  std::array<double, kBleuMaxOrder> precisions{};  // n-gram precisions in percent, smoothed as in the score
  double bp = 0;                                   // brevity penalty
  double ratio = 0;                                // hyp_len / ref_len (0 when ref_len is 0)
  std::int64_t hyp_len = 0, ref_len = 0;           // tokens after 13a
  std::array<std::int64_t, kBleuMaxOrder> matches{}, totals{};  // clipped matches, hypothesis n-grams

  // sacreBLEU's score line with its rounding:
  // "BLEU = 35.12 66.1/41.2/27.9/19.0 (BP = 0.975 ratio = 0.975 hyp_len = 1234 ref_len = 1266)".
  std::string format() const;
};

// What was computed, in sacreBLEU's signature form. The last fields say that define implements
// sacreBLEU 2.x's rules rather than claim a sacreBLEU version:
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|rules:sacrebleu-2.x|impl:define".
std::string bleu_signature();

// sacreBLEU's Tokenizer13a on one segment: tokens separated by single spaces.
std::string tokenize_13a(std::string_view line);

// Python's str.rstrip() on UTF-8: drops trailing Unicode whitespace (sacreBLEU strips every
// segment before tokenising it).
std::string_view rstrip_unicode(std::string_view text);

// Python's str.split(): the words between runs of Unicode whitespace.
std::vector<std::string_view> split_unicode(std::string_view text);

// The lines of a text as sacreBLEU reads a file (Python, newline="\n"): split at '\n' only; a
// last line without '\n' counts; nothing follows a final '\n'. An empty text has no lines.
std::vector<std::string> split_lines(std::string_view text);

// The byte offset of the first byte that is not part of valid UTF-8, or npos when all is valid
// (sacreBLEU cannot read such a file; `define bleu` refuses it naming the line).
std::size_t first_invalid_utf8(std::string_view text);

// Corpus BLEU of hyps[i] against refs[i]. Every segment is rstrip_unicode'd and tokenised as
// sacreBLEU does. Different counts are an error naming both (sacreBLEU's command line refuses them
// too; its Python API would silently drop the extra lines).
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

}  // namespace define::data
