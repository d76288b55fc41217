// What the training benchmarks that run a PyTorch peer share (lm_train_bench, txl_train_bench):
// the machine's float32 GEMM rate (the physical limit they print), running the peer script in its
// own process and reading its JSON line, the median of the rounds, and the CPU model.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "bench/bench_util.h"
#include "core/factory.h"

namespace define::bench {

// define's float32 GEMM rate on 1024^3 in GFLOP/s (best of 5).
inline double sgemm_gflops() {
  Generator gen(1);
  const Tensor x = rand_normal({1024, 1024}, 0, 1, {}, gen), y = rand_normal({1024, 1024}, 0, 1, {}, gen);
  NoGradGuard g;
  const double s = best_seconds([&] { (void)matmul(x, y); });
  return 2.0 * 1024 * 1024 * 1024 / s / 1e9;
}

// Runs `script args` with Debian's interpreter (where python3-torch lives; $DEFINE_PYTHON names
// another) at the peer's best thread settings (OpenMP pool of `threads`, passive waiting: Debian's
// torch and OpenBLAS share one OpenMP pool) and returns the last JSON object it printed; nothing
// when the script failed (python3-torch missing).
inline std::optional<nlohmann::json> run_python_peer(const std::string& script, const std::string& args,
                                                    std::int64_t threads) {
  const char* python = std::getenv("DEFINE_PYTHON") ? std::getenv("DEFINE_PYTHON") : "/usr/bin/python3";
  const std::string cmd =
      fmt::format("OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={} {} {} {}", threads, python, script, args);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (!p || pclose(p) != 0 || out.empty()) return std::nullopt;
  return nlohmann::json::parse(out.substr(out.rfind('{')));
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

}  // namespace define::bench
