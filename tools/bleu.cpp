// `define bleu --ref FILE [--hyp FILE] [--score-only]`: corpus BLEU of a translation, as sacreBLEU
// 2.x computes it by default (data/bleu.h). One segment a line in both files, in the same order;
// the hypothesis comes from standard input when --hyp is not given. Prints sacreBLEU's score line
// and the signature of what was computed.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/bleu.h"
#include "data/text_file.h"
#include "tools/command.h"
#include "tools/options.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "bleu";

// A file's lines, read as sacreBLEU reads a file (data::split_lines). `name` says which file it
// was in errors. Bytes that are not UTF-8 are refused, as sacreBLEU refuses them (it cannot decode
// them), naming the line.
std::vector<std::string> lines_of(const std::string& text, const std::string& name) {
  if (const std::size_t bad = data::first_invalid_utf8(text); bad != std::string::npos) {
    const auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n') + 1;
    fail(kOp, "{} line {} is not valid UTF-8 (byte {} of the file)", name, line, bad);
  }
  return data::split_lines(text);
}

}  // namespace

int run_bleu(const std::vector<std::string>& args) {
  const Options opts =
      parse_options(kOp, args, {.required = {"ref"}, .repeated = {}, .optional = {"hyp"}, .flags = {"score-only"}});
  if (opts.help) {
    fmt::print(
        "usage: define bleu --ref FILE [--hyp FILE] [--score-only]\n"
        "Corpus BLEU of the hypothesis (--hyp, else standard input) against the reference FILE, one\n"
        "segment a line in the same order, computed by sacreBLEU 2.x's default rules: tokenizer 13a,\n"
        "case-sensitive, n-grams up to 4, exp smoothing, one reference. Prints sacreBLEU's score line\n"
        "with 2 decimals (what `sacrebleu -w 2` prints; its default is 1),\n"
        "  BLEU = 35.12 66.1/41.2/27.9/19.0 (BP = 0.975 ratio = 0.975 hyp_len = 1234 ref_len = 1266)\n"
        "and the signature of the computation; --score-only prints the score alone (2 decimals).\n"
        "Files must be UTF-8 and have the same number of lines.\n");
    return 0;
  }
  // The reference first: a missing one is reported before waiting on standard input.
  const std::string ref_name = fmt::format("reference '{}'", opts.get("ref"));
  const std::vector<std::string> refs = lines_of(data::read_text_file(opts.get("ref"), kOp), ref_name);
  std::string hyp_name = "hypothesis (standard input)";
  std::string hyp_text;
  if (opts.has("hyp")) {
    hyp_name = fmt::format("hypothesis '{}'", opts.get("hyp"));
    hyp_text = data::read_text_file(opts.get("hyp"), kOp);
  } else {
    // Read like a file: lines end at '\n' only (sacreBLEU's own stdin reading would also end them
    // at '\r' and split them at tabs into several systems).
    hyp_text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) fail(kOp, "error while reading the hypothesis from standard input");
  }
  const std::vector<std::string> hyps = lines_of(hyp_text, hyp_name);
  if (refs.empty()) fail(kOp, "{} has no lines: nothing to score", ref_name);
  if (hyps.size() != refs.size())
    fail(kOp, "{} has {} lines but {} has {}: expected one hypothesis line for each reference line", hyp_name,
         hyps.size(), ref_name, refs.size());
  const data::BleuScore score = data::corpus_bleu(hyps, refs);
  if (opts.has("score-only")) {
    fmt::print("{:.2f}\n", score.score);
  } else {
    fmt::print("{}\n{}\n", score.format(), data::bleu_signature());
  }
  return 0;
}

}  // namespace define::cli
