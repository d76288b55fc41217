// Shared by the CLI tests: a tiny generated corpus to train on in a fraction of a second.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace define::test {

// Writes train.txt / valid.txt / test.txt of a 40-word language in which each word is followed by
// the next one with probability 0.7 (else a uniformly random word): entropy about 1.72 nats, so a
// model that learns reaches perplexity near 5.6, while the uniform guess is 41. Deterministic per
// seed; train_lines sentences of 8 words (valid and test get 30 each unless given).
void write_tiny_corpus(const std::filesystem::path& dir, std::uint64_t seed, int train_lines, int eval_lines = 30);

// A fresh scratch folder scratch_path(name) (support/common.h; removed first if it exists) holding a tiny
// corpus in name / "data", written by write_tiny_corpus(seed, train_lines, eval_lines).
std::filesystem::path fresh_root(const std::string& name, std::uint64_t seed, int train_lines, int eval_lines = 30);

// A fresh scratch folder scratch_path(name) with a small generated parallel corpus in
// name / "data" ({train,val,test}.{src,tgt}: 400 / 40 / 40 pairs of 2 to 5 words from a
// 12-word vocabulary; the target is the source's words in reverse order, in capitals).
std::filesystem::path fresh_parallel_root(const std::string& name);
// The target of a source line in that corpus.
std::string reversed_in_capitals(const std::string& line);

// The lines of <run>/metrics.jsonl without the fields that depend on the clock or the process
// (tokens/s, memory, seconds): what two runs of the same training must log identically.
std::vector<std::string> logged_without_clock(const std::filesystem::path& run);

// The entries of <run>/metrics.jsonl whose "event" is `event` ("train", "valid", "final", ...), in order.
std::vector<nlohmann::json> events(const std::filesystem::path& run, const std::string& event);

// The names in `dir` of files that look like temporaries (".tmp" in the name): what a crash-safe
// writer must not leave behind.
std::vector<std::string> temporaries(const std::filesystem::path& dir);

// Runs a shell command; returns (exit status, or -1 when it did not exit normally; its stdout).
std::pair<int, std::string> run_command(const std::string& cmd);

}  // namespace define::test
