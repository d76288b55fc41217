// `define bleu` (tools/bleu.cpp): the score line and signature, the hypothesis from a file or from
// standard input, and its refusals, which name the files: a missing file, different line counts,
// an empty reference, bytes that are not UTF-8. The real binary runs for the output and stdin.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/runs.h"
#include "core/error.h"
#include "support/common.h"
#include "tools/command.h"
#include "tools/dispatch.h"

using namespace define;
using Catch::Contains;
using define::test::error_of;
using define::test::run_command;

namespace {

// The hand-derived case of tests/data/bleu_test.cpp: 2^(-3/4) = 59.46.
const std::string kRef = "a b c e\n";
const std::string kHyp = "a b c d\n";
const std::string kLine = "BLEU = 59.46 75.0/66.7/50.0/50.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)";

}  // namespace

TEST_CASE("define bleu: score line and signature, hypothesis from a file or standard input", "[bleu][cli]") {
  const test::TempDir d;
  const std::string ref = d.write("ref.txt", kRef).string(), hyp = d.write("hyp.txt", kHyp).string();
  const std::string bin = std::string("'") + DEFINE_CLI_BINARY + "' bleu --ref '" + ref + "'";
  const auto from_file = run_command(bin + " --hyp '" + hyp + "' 2>&1");
  INFO(from_file.second);
  CHECK(from_file.first == 0);
  CHECK(from_file.second == kLine + "\nnrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|rules:sacrebleu-2.x|impl:define\n");
  const auto from_stdin = run_command(bin + " < '" + hyp + "' 2>&1");
  CHECK(from_stdin == from_file);
  const auto score_only = run_command(bin + " --score-only < '" + hyp + "' 2>&1");
  CHECK(score_only.second == "59.46\n");
}

TEST_CASE("define bleu: errors name the files", "[bleu][cli]") {
  const test::TempDir d;
  const std::string ref = d.write("ref.txt", "one\ntwo\nthree\n").string();
  const std::string short_hyp = d.write("short.txt", "one\ntwo\n").string();
  const std::string long_hyp = d.write("long.txt", "one\ntwo\nthree\nfour").string();
  const std::string latin1 = d.write("latin1.txt", "one\ntwo\nM\xe4nner\n").string();
  const std::string empty = d.write("empty.txt", "").string();
  const std::string missing = (d.path() / "missing.txt").string();

  CHECK_THAT(error_of([&] { cli::run_bleu({"--ref", ref, "--hyp", short_hyp}); }),
             Contains("hypothesis '" + short_hyp + "' has 2 lines but reference '" + ref + "' has 3"));
  CHECK_THAT(error_of([&] { cli::run_bleu({"--ref", ref, "--hyp", long_hyp}); }),
             Contains("hypothesis '" + long_hyp + "' has 4 lines but reference '" + ref + "' has 3"));
  CHECK_THAT(error_of([&] { cli::run_bleu({"--ref", missing, "--hyp", short_hyp}); }),
             Contains("file '" + missing + "' does not exist"));
  CHECK_THAT(error_of([&] { cli::run_bleu({"--ref", ref, "--hyp", missing}); }),
             Contains("file '" + missing + "' does not exist"));
  CHECK_THAT(error_of([&] { cli::run_bleu({"--ref", ref, "--hyp", latin1}); }),
             Contains("hypothesis '" + latin1 + "' line 3 is not valid UTF-8"));
  CHECK_THAT(error_of([&] { cli::run_bleu({"--ref", empty, "--hyp", empty}); }),
             Contains("reference '" + empty + "' has no lines"));
  CHECK_THAT(error_of([&] { cli::run_bleu({"--hyp", ref}); }), Contains("--ref is required"));
  // Through the dispatch: an error (status 2), never an internal error (3).
  CHECK(cli::run_command("bleu", {"--ref", ref, "--hyp", short_hyp}) == 2);
  CHECK(cli::run_command("bleu", {"--ref", ref, "--hyp", ref, "--help"}) == 0);

  // Standard input is named as such.
  const auto piped = run_command(std::string("'") + DEFINE_CLI_BINARY + "' bleu --ref '" + ref + "' < '" + short_hyp +
                                 "' 2>&1");
  CHECK(piped.first == 2);
  CHECK_THAT(piped.second, Contains("hypothesis (standard input) has 2 lines but reference '" + ref + "' has 3"));
}
