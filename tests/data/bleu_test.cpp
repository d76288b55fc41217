// Corpus BLEU by sacreBLEU 2.x's default rules (data/bleu.h): the 13a tokenizer, Python's Unicode
// whitespace, small corpora whose BLEU is derived by hand below, corpora scored by the sacrebleu
// Python package (2.6.0), and the corner cases (empty lines, no match, a hypothesis longer than its
// reference, different line counts, bytes that are not UTF-8). scripts/checks/check-bleu.sh compares with
// sacrebleu on the whole Multi30k test set.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/bleu.h"

using namespace define::data;
using Catch::Contains;
using Catch::WithinAbs;

namespace {

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view w : split_unicode(text)) out.emplace_back(w);
  return out;
}

}  // namespace

// Expected outputs: sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(line) in sacrebleu 2.6.0.
TEST_CASE("bleu: 13a splits punctuation and symbols as mteval-v13a does", "[bleu]") {
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(tokenize_13a("") == "");
  // Period and comma stay inside numbers; '$' is a symbol.
  CHECK(tokenize_13a("It costs $3.50, or 3,000 yen.") == "It costs $ 3.50 , or 3,000 yen .");
  CHECK(tokenize_13a("e.g. U.S.A., 1.5.2020 and .5 or 5.") == "e . g . U . S . A . , 1.5.2020 and . 5 or 5 .");
  CHECK(tokenize_13a("1,2,3") == "1,2,3");
  CHECK(tokenize_13a("...") == ". . .");
  // A dash is split only after a digit; the apostrophe is never split.
  CHECK(tokenize_13a("A 5-year-old boy in a t-shirt.") == "A 5 - year-old boy in a t-shirt .");
  CHECK(tokenize_13a("-3 x-1 2--3") == "-3 x-1 2 - -3");
  CHECK(tokenize_13a("3-") == "3 -");
  CHECK(tokenize_13a("(x) [y] {z} @a #b 'c' `d`") == "( x ) [ y ] { z } @ a # b 'c' ` d `");
}

TEST_CASE("bleu: 13a's normalisation: <skipped>, line breaks, the four HTML entities", "[bleu]") {
  CHECK(tokenize_13a("<skipped>word <skip<skipped>ped>") == "word < skipped >");  // one pass, left to right
  CHECK(tokenize_13a("a-\nb") == "ab");  // a hyphenated line break joins the word
  CHECK(tokenize_13a("a\nb") == "a b");
  // &amp;lt; becomes &lt; and then '<': the replacements run one after the other.
  CHECK(tokenize_13a("&quot;Hi&quot; &amp; &lt;b&gt; &amp;lt;") == "\" Hi \" & < b > <");
  CHECK(tokenize_13a("&nbsp; &#39;") == "& nbsp ; & # 39 ;");  // other entities are text
}

TEST_CASE("bleu: 13a on UTF-8: German text, Unicode whitespace, bytes that are not UTF-8", "[bleu]") {
  CHECK(tokenize_13a("Zwei junge, weiße Männer sind im Freien.") == "Zwei junge , weiße Männer sind im Freien .");
  CHECK(tokenize_13a("Ein Mann – mit Hut – läuft.") == "Ein Mann – mit Hut – läuft .");  // the en dash is no symbol
  // Python's str.split() splits at U+00A0, U+3000, U+2009, \r, \x1c, \v ... but not at U+200B.
  CHECK(tokenize_13a("a\u00a0b\u3000c\u2009d") == "a b c d");
  CHECK(tokenize_13a("a\tb\rc\x1c" "d\x0b" "e") == "a b c d e");
  CHECK(tokenize_13a("a\u200bb") == "a\u200bb");
  CHECK(words("x\u0085y\u1680z\u2028w\u202fv\u205fu") == std::vector<std::string>{"x", "y", "z", "w", "v", "u"});
  CHECK(rstrip_unicode("Haus.\u3000\u00a0 \r") == "Haus.");
  CHECK(rstrip_unicode("\u00a0") == "");
  // Invalid bytes are characters that are not whitespace (Python with errors="surrogateescape"):
  // b"\xff.\xe2\x80,x \xc3(" -> b"\xff . \xe2\x80 , x \xc3 (".
  CHECK(tokenize_13a("\xff.\xe2\x80,x \xc3(") == "\xff . \xe2\x80 , x \xc3 (");
  CHECK(rstrip_unicode("a \xe2\x80") == "a \xe2\x80");
  CHECK(words("\xc2 \xe2\x80\x80\xe2") == std::vector<std::string>{"\xc2", "\xe2"});
}

TEST_CASE("bleu: UTF-8 validity and sacreBLEU's line splitting", "[bleu]") {
  CHECK(first_invalid_utf8("plain, Männer, 東京, \U0001F600") == std::string::npos);
  CHECK(first_invalid_utf8("ab\xff") == 2);
  CHECK(first_invalid_utf8("a\xc3") == 1);               // truncated
  CHECK(first_invalid_utf8("\xc0\xaf") == 0);            // overlong '/'
  CHECK(first_invalid_utf8("x\xed\xa0\x80") == 1);       // a UTF-16 surrogate
  CHECK(first_invalid_utf8("\xf4\x90\x80\x80") == 0);    // past U+10FFFF
  CHECK(split_lines("") == std::vector<std::string>{});
  CHECK(split_lines("a\nb") == std::vector<std::string>{"a", "b"});
  CHECK(split_lines("a\nb\n") == std::vector<std::string>{"a", "b"});
  CHECK(split_lines("a\n\n") == std::vector<std::string>{"a", ""});
  CHECK(split_lines("a\r\nb\rc") == std::vector<std::string>{"a\r", "b\rc"});  // '\n' only; rstrip drops the '\r'
}

// BLEU = BP * exp(mean of log p_n), p_n = clipped n-gram matches / hypothesis n-grams (percent),
// BP = exp(1 - ref_len / hyp_len) when hyp_len < ref_len, else 1. Each number below is also what
// sacrebleu 2.6.0 prints (BLEU().corpus_score(hyps, [refs]).format()).
TEST_CASE("bleu: hand-derived scores", "[bleu]") {
  SECTION("identical") {
    const BleuScore s = corpus_bleu({"the cat sat on the mat ."}, {"the cat sat on the mat ."});
    CHECK_THAT(s.score, WithinAbs(100.0, 1e-12));  // exp(log(100)): 100.00000000000004, as in Python
    CHECK(s.format() == "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 7 ref_len = 7)");
  }
  SECTION("one wrong word at the end; exp smoothing of the missing 4-gram") {
    // hyp a b c d / ref a b c e: unigrams 3/4, bigrams ab bc of ab bc cd: 2/3, trigrams abc of
    // abc bcd: 1/2, the one 4-gram abcd: 0/1 -> smoothed 100 / (2 * 1) = 50.
    // BLEU = 100 * (3/4 * 2/3 * 1/2 * 1/2)^(1/4) = 100 * (1/8)^(1/4) = 100 * 2^(-3/4) = 59.4604.
    const BleuScore s = corpus_bleu({"a b c d"}, {"a b c e"});
    CHECK(s.matches == std::array<std::int64_t, 4>{3, 2, 1, 0});
    CHECK(s.totals == std::array<std::int64_t, 4>{4, 3, 2, 1});
    CHECK_THAT(s.score, WithinAbs(100.0 * std::pow(2.0, -0.75), 1e-12));
    CHECK(s.format() == "BLEU = 59.46 75.0/66.7/50.0/50.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)");
  }
  SECTION("two zero orders: the second is smoothed twice as hard") {
    // hyp a b x c d / ref a b y c d: unigrams a b c d 4/5; bigrams ab cd of ab bx xc cd 2/4;
    // trigrams 0/3 -> 100 / (2 * 3) = 16.67; 4-grams 0/2 -> 100 / (4 * 2) = 12.5.
    // BLEU = 100 * (0.8 * 0.5 * 1/6 * 1/8)^(1/4) = 100 * (1/120)^(1/4) = 30.2138.
    const BleuScore s = corpus_bleu({"a b x c d"}, {"a b y c d"});
    CHECK_THAT(s.score, WithinAbs(100.0 * std::pow(1.0 / 120.0, 0.25), 1e-12));
    CHECK(s.format() == "BLEU = 30.21 80.0/50.0/16.7/12.5 (BP = 1.000 ratio = 1.000 hyp_len = 5 ref_len = 5)");
  }
  SECTION("hypothesis longer than the reference: clipped counts, no brevity penalty") {
    // hyp a b c d a b / ref a b c d: a and b twice but once in the ref: unigrams 4/6; bigrams ab
    // (clipped to 1) bc cd of 5: 3/5; trigrams abc bcd of 4: 2/4; 4-grams abcd of 3: 1/3.
    // BLEU = 100 * (2/3 * 3/5 * 1/2 * 1/3)^(1/4) = 100 * (1/15)^(1/4) = 50.8133; ratio 6/4.
    const BleuScore s = corpus_bleu({"a b c d a b"}, {"a b c d"});
    CHECK_THAT(s.score, WithinAbs(100.0 * std::pow(1.0 / 15.0, 0.25), 1e-12));
    CHECK(s.bp == 1.0);
    CHECK(s.format() == "BLEU = 50.81 66.7/60.0/50.0/33.3 (BP = 1.000 ratio = 1.500 hyp_len = 6 ref_len = 4)");
  }
  SECTION("an empty hypothesis line: all precisions 100, brevity penalty e^-1") {
    // Line 1 matches exactly (4 tokens), line 2 is empty against 4 tokens: hyp_len 4, ref_len 8,
    // BP = exp(1 - 8/4) = e^-1 = 0.3679, BLEU = 36.79.
    const BleuScore s = corpus_bleu({"a b c d", ""}, {"a b c d", "e f g h"});
    CHECK_THAT(s.score, WithinAbs(100.0 * std::exp(-1.0), 1e-12));
    CHECK(s.format() == "BLEU = 36.79 100.0/100.0/100.0/100.0 (BP = 0.368 ratio = 0.500 hyp_len = 4 ref_len = 8)");
  }
  SECTION("no 4-gram in the hypothesis at all: BLEU 0 (precision 0 is not smoothed)") {
    // 3 tokens: totals 3, 2, 1, 0; sacreBLEU stops at the empty order, leaving p_4 = 0, whose log
    // is floored at -9999999999, so BLEU = 0 even though every n-gram matches. BP = exp(1 - 6/3).
    const BleuScore s = corpus_bleu({"a b c"}, {"a b c d e f"});
    CHECK(s.score == 0.0);
    CHECK(s.format() == "BLEU = 0.00 100.0/100.0/100.0/0.0 (BP = 0.368 ratio = 0.500 hyp_len = 3 ref_len = 6)");
  }
  SECTION("no match at all: everything 0 but BP and ratio") {
    const BleuScore s = corpus_bleu({"x y"}, {"a b"});
    CHECK(s.format() == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 2 ref_len = 2)");
  }
  SECTION("only empty hypotheses: BP 0") {
    const BleuScore s = corpus_bleu({""}, {"a b"});
    CHECK(s.format() == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 2)");
  }
  SECTION("empty corpus: zeros, no division by zero (sacrebleu's API raises IndexError; `define bleu` refuses it)") {
    CHECK(corpus_bleu({}, {}).format() == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
  }
  SECTION("case-sensitive, tokenised before matching") {
    // "Dog." is the tokens Dog and '.'; "dog" does not match "Dog": unigrams 1/2 ('.'), no bigram.
    CHECK(corpus_bleu({"dog."}, {"Dog."}).matches == std::array<std::int64_t, 4>{1, 0, 0, 0});
  }
}

TEST_CASE("bleu: the score line rounds as Python does (ties to even)", "[bleu]") {
  BleuScore s;
  s.score = 0.125;                               // exactly half-way at 2 decimals
  s.precisions = {12.25, 12.35, 0.05, 99.95};    // 12.25 is exact in binary: a true tie
  s.bp = 0.0625;
  s.ratio = 1.0005;
  s.hyp_len = 1234;
  s.ref_len = 1266;
  // Python 3: f"{0.125:.2f}" '0.12', f"{12.25:.1f}" '12.2', f"{12.35:.1f}" '12.3' (12.35 is
  // 12.3499.. in binary), f"{0.05:.1f}" '0.1', f"{99.95:.1f}" '100.0', f"{0.0625:.3f}" '0.062',
  // f"{1.0005:.3f}" '1.000'.
  CHECK(s.format() == "BLEU = 0.12 12.2/12.3/0.1/100.0 (BP = 0.062 ratio = 1.000 hyp_len = 1234 ref_len = 1266)");
  CHECK(bleu_signature() == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|rules:sacrebleu-2.x|impl:define");
}

// Expected values printed by sacrebleu 2.6.0 with the lists below pasted in as H and R:
//   python3 -c 'from sacrebleu.metrics import BLEU; H=[...]; R=[...]; s=BLEU().corpus_score(H, [R]); print(repr(s.score), s.counts, s.totals); print(s.format())'
TEST_CASE("bleu: agrees with sacrebleu 2.6.0 on small corpora", "[bleu]") {
  const std::vector<std::string> refs = {
      "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
      "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
      "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
      "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster.",
      "Zwei Männer stehen am Herd und bereiten Essen zu."};
  const std::vector<std::string> hyps = {
      "Zwei junge Männer sind draußen in der Nähe von Büschen.", "Mehrere Männer mit Helmen bedienen ein Getriebe.",
      "Ein kleines Mädchen klettert in ein Holzspielhaus.",
      "Ein Mann im blauen Hemd steht auf einer Leiter und putzt ein Fenster.", "Zwei Männer kochen am Herd."};
  SECTION("German") {
    const BleuScore s = corpus_bleu(hyps, refs);
    CHECK_THAT(s.score, WithinAbs(42.29457391788573, 1e-10));
    CHECK(s.matches == std::array<std::int64_t, 4>{39, 25, 15, 11});
    CHECK(s.totals == std::array<std::int64_t, 4>{47, 42, 37, 32});
    CHECK(s.format() == "BLEU = 42.29 83.0/59.5/40.5/34.4 (BP = 0.826 ratio = 0.839 hyp_len = 47 ref_len = 56)");
  }
  SECTION("German, hypotheses lowercased (H=[h.lower() for h in H]): case counts") {
    std::vector<std::string> lower = {
        "zwei junge männer sind draußen in der nähe von büschen.", "mehrere männer mit helmen bedienen ein getriebe.",
        "ein kleines mädchen klettert in ein holzspielhaus.",
        "ein mann im blauen hemd steht auf einer leiter und putzt ein fenster.", "zwei männer kochen am herd."};
    const BleuScore s = corpus_bleu(lower, refs);
    CHECK_THAT(s.score, WithinAbs(8.699827391972887, 1e-10));
    CHECK(s.matches == std::array<std::int64_t, 4>{24, 8, 3, 0});
    CHECK(s.format() == "BLEU = 8.70 51.1/19.0/8.1/1.6 (BP = 0.826 ratio = 0.839 hyp_len = 47 ref_len = 56)");
  }
  SECTION("entities, numbers, quotes and brackets") {
    const BleuScore s = corpus_bleu(
        {"A man & his dog, 3.5km from the US border.", "The two-year-old girl's red ball (new)."},
        {"A man &amp; his dog, 3.5 km from the U.S. border.", "The 2-year-old girl's \"red\" ball (new)!"});
    CHECK_THAT(s.score, WithinAbs(30.573225166648797, 1e-10));
    CHECK(s.matches == std::array<std::int64_t, 4>{17, 10, 6, 4});
    CHECK(s.totals == std::array<std::int64_t, 4>{21, 19, 17, 15});
    CHECK(s.format() == "BLEU = 30.57 81.0/52.6/35.3/26.7 (BP = 0.683 ratio = 0.724 hyp_len = 21 ref_len = 29)");
  }
}

TEST_CASE("bleu: different line counts are an error naming both counts", "[bleu]") {
  CHECK_THROWS_WITH(corpus_bleu({"a"}, {"a", "b"}), Contains("1 hypothesis lines but 2 reference lines"));
  CHECK_THROWS_WITH(corpus_bleu({"a", "b", "c"}, {"a"}), Contains("3 hypothesis lines but 1 reference lines"));
  CHECK_THROWS_AS(corpus_bleu({"a"}, {}), define::Error);
}

TEST_CASE("bleu: any bytes are scored without a crash", "[bleu]") {
  // Every single byte and every pair of bytes around the characters the rules look at.
  std::vector<std::string> hyps, refs;
  const std::string specials = ".,-&;<> 0\n\xc2\xe2\x80\x85\xa0\xff";
  for (int b = 0; b < 256; ++b) {
    for (char c : specials) {
      hyps.push_back(std::string{static_cast<char>(b), c, '.'});
      refs.push_back(std::string{c, static_cast<char>(b), ','});
    }
  }
  const BleuScore s = corpus_bleu(hyps, refs);
  CHECK(s.score >= 0.0);
  CHECK(s.score <= 100.0);
  CHECK(s.hyp_len > 0);
}
