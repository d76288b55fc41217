#include "support/runs.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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
  const std::filesystem::path root = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(root);
  write_tiny_corpus(root / "data", seed, train_lines, eval_lines);
  return root;
}

std::vector<std::string> logged_without_clock(const std::filesystem::path& run) {
  std::ifstream f(run / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* k : {"tokens_per_s", "peak_rss_bytes", "peak_tensor_bytes", "seconds"}) j.erase(k);
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

}  // namespace define::test
