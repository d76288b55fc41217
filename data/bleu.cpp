#include "data/bleu.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"

namespace define::data {

namespace {

// ---- Python's idea of whitespace, on UTF-8 bytes.

// The byte length of the whitespace character starting at s[i] (Python's str.isspace(): ASCII
// \t\n\v\f\r, the separators \x1c-\x1f, space; U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000), or 0. Each multi-byte form starts with a lead byte (C2, E1,
// E2, E3), which can never continue an earlier character, so matching the bytes anywhere finds
// exactly the characters Python decodes, invalid bytes nearby included.
std::size_t space_len_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;
  if (c == 0xE2 && b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8A) || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF))
    return 3;
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;
  return 0;
}

// ---- Python's str.replace (all non-overlapping occurrences, left to right).
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  for (std::size_t at = s.find(from); at != std::string_view::npos; at = s.find(from, i)) {
    out.append(s, i, at - i);
    out.append(to);
    i = at + from.size();
  }
  out.append(s, i);
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// 13a's first regex, [\{-\~\[-\` -\&\(-\+\:-\@\/]: the ASCII symbols it puts spaces around
// (everything printable but letters, digits, the apostrophe, '-', '.' and ','; space included).
bool is_13a_symbol(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// One re.sub pass of a two-character pattern whose second character is taken one byte at a time.
// Python scans characters left to right and resumes after each match. On bytes this is the same:
// every pattern's ASCII part ([.,], [0-9], '-') can only be a whole character, and [^0-9] matches
// every byte of a non-ASCII character, so a match never starts or ends inside one in a way that
// differs (a continuation byte is never '.', ',' or a digit; the matched byte before '.' is the
// last of its character, the one after '.' the first).
template <typename Match, typename Emit>
std::string sub_pairs(std::string_view s, Match&& match, Emit&& emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// ---- n-gram statistics of one segment pair (sacreBLEU's _compute_segment_statistics).

// Key: the n-gram's tokens joined by ' ' (tokens never hold whitespace, so the order is implied).
using NgramCounts = std::unordered_map<std::string, std::int64_t>;

NgramCounts count_ngrams(const std::vector<std::string_view>& tokens) {
  NgramCounts counts;
  for (std::size_t n = 1; n <= kBleuMaxOrder; ++n) {
    for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
      std::string key(tokens[i]);
      for (std::size_t k = 1; k < n; ++k) {
        key += ' ';
        key += tokens[i + k];
      }
      ++counts[key];
    }
  }
  return counts;
}

std::size_t order_of(const std::string& key) { return static_cast<std::size_t>(std::count(key.begin(), key.end(), ' ')); }

}  // namespace

std::string_view rstrip_unicode(std::string_view text) {
  for (bool stripped = true; stripped && !text.empty();) {
    stripped = false;
    for (std::size_t len = 1; len <= 3 && len <= text.size(); ++len) {
      if (space_len_at(text, text.size() - len) == len) {
        text.remove_suffix(len);
        stripped = true;
        break;
      }
    }
  }
  return text;
}

std::vector<std::string_view> split_unicode(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0, start = 0;
  while (i < text.size()) {
    const std::size_t space = space_len_at(text, i);
    if (space == 0) {
      ++i;
      continue;
    }
    if (i > start) words.push_back(text.substr(start, i - start));
    i += space;
    start = i;
  }
  if (i > start) words.push_back(text.substr(start, i - start));
  return words;
}

std::string tokenize_13a(std::string_view line) {
  // mteval-v13a's language-independent part, in sacreBLEU's order.
  std::string s = replace_all(line, "<skipped>", "");
  s = replace_all(s, "-\n", "");
  s = replace_all(s, "\n", " ");
  if (s.find('&') != std::string::npos) {
    s = replace_all(s, "&quot;", "\"");
    s = replace_all(s, "&amp;", "&");
    s = replace_all(s, "&lt;", "<");
    s = replace_all(s, "&gt;", ">");
  }
  // TokenizerRegexp on " " + line + " ": its four substitutions, then whitespace collapsed.
  s = " " + s + " ";
  std::string spaced;
  spaced.reserve(s.size() + s.size() / 2);
  for (char c : s) {
    if (is_13a_symbol(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  // ([^0-9])([\.,]) -> \1 \2 : period and comma split unless preceded by a digit.
  s = sub_pairs(
      spaced, [](char a, char b) { return !is_digit(a) && is_period_or_comma(b); },
      [](std::string& out, char a, char b) { out.append({a, ' ', b, ' '}); });
  // ([\.,])([^0-9]) -> " \1 \2": ... and unless followed by one.
  s = sub_pairs(
      s, [](char a, char b) { return is_period_or_comma(a) && !is_digit(b); },
      [](std::string& out, char a, char b) { out.append({' ', a, ' ', b}); });
  // ([0-9])(-) -> \1 \2 : a dash after a digit.
  s = sub_pairs(
      s, [](char a, char b) { return is_digit(a) && b == '-'; },
      [](std::string& out, char a, char b) { out.append({a, ' ', b, ' '}); });
  std::string joined;
  for (std::string_view w : split_unicode(s)) {
    if (!joined.empty()) joined += ' ';
    joined += w;
  }
  return joined;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = std::min(text.find('\n', i), text.size());
    lines.emplace_back(text.substr(i, end - i));
    i = end + 1;
  }
  return lines;
}

std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const auto continuation = [&](std::size_t k) { return k < text.size() && (byte(k) & 0xC0) == 0x80; };
  while (i < text.size()) {
    const unsigned c = byte(i);
    std::size_t len = 0;
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xF0 && c <= 0xF4) len = 4;
    else return i;  // a continuation byte alone, an overlong lead (C0, C1) or one past U+10FFFF
    for (std::size_t k = 1; k < len; ++k)
      if (!continuation(i + k)) return i;
    if (len >= 3) {
      const unsigned c1 = byte(i + 1);
      // Overlong forms, the UTF-16 surrogates U+D800..U+DFFF and code points past U+10FFFF.
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))
        return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string BleuScore::format() const {
  // fmt, like Python's format(), rounds the exact binary value with ties to even: a precision of
  // 49/400 = 12.25% prints as "12.2" in both (a unit test holds this).
  return fmt::format("BLEU = {:.2f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})",
                     score, precisions[0], precisions[1], precisions[2], precisions[3], bp, ratio, hyp_len, ref_len);
}

std::string bleu_signature() { return "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|rules:sacrebleu-2.x|impl:define"; }

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size())
    fail("corpus_bleu", "{} hypothesis lines but {} reference lines: expected one hypothesis a reference",
         hyps.size(), refs.size());
  BleuScore r;
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    const std::string hyp = tokenize_13a(rstrip_unicode(hyps[i]));
    const std::string ref = tokenize_13a(rstrip_unicode(refs[i]));
    const std::vector<std::string_view> hyp_tokens = split_unicode(hyp), ref_tokens = split_unicode(ref);
    const NgramCounts ref_counts = count_ngrams(ref_tokens);
    for (const auto& [ngram, count] : count_ngrams(hyp_tokens)) {
      const std::size_t n = order_of(ngram);
      r.totals[n] += count;
      if (auto it = ref_counts.find(ngram); it != ref_counts.end()) r.matches[n] += std::min(count, it->second);
    }
    r.hyp_len += static_cast<std::int64_t>(hyp_tokens.size());
    r.ref_len += static_cast<std::int64_t>(ref_tokens.size());  // one reference: the closest is it
  }
  // sacreBLEU's compute_bleu, operation for operation so the doubles agree.
  const double hyp_len = static_cast<double>(r.hyp_len), ref_len = static_cast<double>(r.ref_len);
  r.bp = 1.0;
  if (r.hyp_len < r.ref_len) r.bp = r.hyp_len > 0 ? std::exp(1.0 - ref_len / hyp_len) : 0.0;
  r.ratio = r.ref_len > 0 ? hyp_len / ref_len : 0.0;
  if (std::all_of(r.matches.begin(), r.matches.end(), [](std::int64_t m) { return m == 0; })) return r;  // score 0
  double smooth = 1.0;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    if (r.totals[n] == 0) break;  // the precisions of this order and above stay 0
    if (r.matches[n] == 0) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * static_cast<double>(r.totals[n]));
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(r.matches[n]) / static_cast<double>(r.totals[n]);
    }
  }
  // my_log: log(0) is floored at -9999999999, which makes the score 0 after exp.
  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  r.score = r.bp * std::exp(log_sum / kBleuMaxOrder);
  return r;
}

}  // namespace define::data
