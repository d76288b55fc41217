#include "support/runs.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/common.h"

namespace define::test {

void write_tiny_corpus(const std::filesystem::path& dir, std::uint64_t seed, int train_lines, int eval_lines) {
  std::filesystem::create_directories(dir);
  std::uint64_t x = seed;
  auto next = [&] {  // a 64-bit LCG: plenty for test text, identical on every platform
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((x >> 33) % 1000);
  };
  const std::vector<std::pair<std::string, int>> splits = {
      {"train.txt", train_lines}, {"valid.txt", eval_lines}, {"test.txt", eval_lines}};
  for (const auto& [name, lines] : splits) {
    std::ofstream f(dir / name);
    int w = 0;
    for (int l = 0; l < lines; ++l) {
      for (int k = 0; k < 8; ++k) {
        w = next() < 700 ? (w + 1) % 40 : next() % 40;
        f << " w" << w;
      }
      f << " \n";
    }
  }
}

std::filesystem::path fresh_root(const std::string& name, std::uint64_t seed, int train_lines, int eval_lines) {
  const std::filesystem::path root = scratch_path(name);
  std::filesystem::remove_all(root);
  write_tiny_corpus(root / "data", seed, train_lines, eval_lines);
  return root;
}

std::vector<std::string> logged_without_clock(const std::filesystem::path& run) {
  std::ifstream f(run / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* k : {"tokens_per_s", "peak_rss_bytes", "peak_tensor_bytes", "seconds", "elapsed_s"}) j.erase(k);
    out.push_back(j.dump());
  }
  return out;
}

std::vector<nlohmann::json> events(const std::filesystem::path& run, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run / "metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["event"] == event) out.push_back(j);
  }
  return out;
}

std::vector<std::string> temporaries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return {-1, out};
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

namespace {

const char* kWords[] = {"ka", "lomi", "tor", "ein", "derun", "sch", "anve", "ru", "pel", "stogi", "nar", "quox"};

// n source sentences of 2 to 5 words (a 64-bit LCG, deterministic in seed).
std::vector<std::string> sentences(int n, std::uint64_t seed) {
  std::uint64_t x = seed;
  auto draw = [&](std::uint64_t k) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (x >> 33) % k;
  };
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string line;
    for (std::uint64_t w = 0, words = 2 + draw(4); w < words; ++w) {
      if (w > 0) line += ' ';
      line += kWords[draw(12)];
    }
    out.push_back(line);
  }
  return out;
}

void write_split(const std::filesystem::path& dir, const std::string& split, int n, std::uint64_t seed) {
  std::ofstream src(dir / (split + ".src")), tgt(dir / (split + ".tgt"));
  for (const auto& s : sentences(n, seed)) {
    src << s << '\n';
    tgt << reversed_in_capitals(s) << '\n';
  }
}

}  // namespace

std::string reversed_in_capitals(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) {
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    words.push_back(w);
  }
  std::string out;
  for (auto it = words.rbegin(); it != words.rend(); ++it) {
    if (!out.empty()) out += ' ';
    out += *it;
  }
  return out;
}

std::filesystem::path fresh_parallel_root(const std::string& name) {
  const std::filesystem::path root = scratch_path(name);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "data");
  write_split(root / "data", "train", 400, 1);
  write_split(root / "data", "val", 40, 2);
  write_split(root / "data", "test", 40, 3);
  return root;
}

}  // namespace define::test
