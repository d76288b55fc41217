// What the training benchmarks that run a PyTorch peer share (lm_train_bench, txl_train_bench,
// nmt_train_bench): the machine's float32 GEMM rate (the physical limit they print), running the
// peer script in its own process (with the OpenBLAS kernels its CPU can run) and reading its JSON
// line, the median of the rounds, the CPU model, and Zipf-distributed token ids.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "bench/bench_util.h"
#include "core/cpu_info.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"

namespace define::bench {

// define's float32 GEMM rate on 1024^3 in GFLOP/s (best of 5).
inline double sgemm_gflops() {
  Generator gen(1);
  const Tensor x = rand_normal({1024, 1024}, 0, 1, {}, gen), y = rand_normal({1024, 1024}, 0, 1, {}, gen);
  NoGradGuard g;
  const double s = best_seconds([&] { (void)matmul(x, y); });
  return 2.0 * 1024 * 1024 * 1024 / s / 1e9;
}

// Runs `command` through the shell and returns what it printed (standard output only unless the
// command redirects more); nothing when it could not start or exited non-zero.
inline std::optional<std::string> shell_output(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  if (pclose(p) != 0) return std::nullopt;
  return out;
}

// Debian 12's OpenBLAS (0.3.21), which the peer's torch calls for its GEMMs, does not recognise
// every newer x86 model and falls back to its generic "Prescott" kernels, several times slower at
// SGEMM: the peer would not run at its best. When
// the peer's OpenBLAS reports that fallback, this returns the OPENBLAS_CORETYPE assignment that
// selects the kernels the CPU can run (SkylakeX with AVX-512, Haswell with AVX2); empty when the
// detection is fine or the user set OPENBLAS_CORETYPE.
inline std::string openblas_coretype_for_peer(const char* python) {
  if (std::getenv("OPENBLAS_CORETYPE")) return {};
  const auto probe = shell_output(fmt::format("OPENBLAS_VERBOSE=2 {} -c 'import torch' 2>&1", python));
  if (!probe || probe->find("Core: Prescott") == std::string::npos) return {};
  const std::string kernels = kernels::cpu::openblas_kernels_for_cpu();
  return kernels.empty() ? std::string() : "OPENBLAS_CORETYPE=" + kernels;
}

// Runs `script args` with Debian's interpreter (where python3-torch lives; $DEFINE_PYTHON names
// another) at the peer's best thread settings (OpenMP pool of `threads`, passive waiting: Debian's
// torch and OpenBLAS share one OpenMP pool) and returns the last JSON object it printed; nothing
// when the script failed (python3-torch missing).
inline std::optional<nlohmann::json> run_python_peer(const std::string& script, const std::string& args,
                                                    std::int64_t threads) {
  const char* python = std::getenv("DEFINE_PYTHON") ? std::getenv("DEFINE_PYTHON") : "/usr/bin/python3";
  static const std::string coretype = [&] {  // probed and reported once a process
    std::string c = openblas_coretype_for_peer(python);
    if (!c.empty()) fmt::print("pytorch: its OpenBLAS would fall back to generic kernels here; run with {}\n", c);
    return c;
  }();
  const auto out = shell_output(fmt::format("{}{}OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={} {} {} {}", coretype,
                                            coretype.empty() ? "" : " ", threads, python, script, args));
  if (!out || out->find('{') == std::string::npos) return std::nullopt;
  return nlohmann::json::parse(out->substr(out->rfind('{')));
}

// [rows, cols] int64 token ids with Zipf's law over [first, first + count): id = first +
// floor(count^u) - 1 for u uniform in [0, 1), so P(id < first + c) = ln(c + 1) / ln(count), like
// words ranked by frequency. The peers draw them the same way.
inline Tensor zipf_tokens(std::int64_t rows, std::int64_t cols, std::int64_t count, Generator& gen,
                          std::int64_t first = 0) {
  const std::vector<double> u = rand_uniform({rows * cols}, 0.0, 1.0, {.dtype = DType::Float64}, gen).to_vector<double>();
  std::vector<std::int64_t> ids(u.size());
  for (std::size_t i = 0; i < u.size(); ++i)
    ids[i] = first + std::clamp<std::int64_t>(static_cast<std::int64_t>(std::pow(static_cast<double>(count), u[i])) - 1,
                                              0, count - 1);
  return from_vector(ids, {rows, cols});
}

inline constexpr const char* kNoPeer =
    "pytorch: not available (run from the repository root with python3-torch installed)\n";

// Prints the parameter counts before anything is timed. Returns the exit code to stop with when
// the peer was wanted but did not run (0, after printing kNoPeer) or counts differently (1: the
// two models are not the same, and their figures would compare different work); nothing otherwise.
inline std::optional<int> report_params(std::int64_t define_params, bool peer_wanted,
                                        const std::optional<std::int64_t>& peer_params) {
  if (peer_wanted && !peer_params) {
    fmt::print(kNoPeer);
    return 0;
  }
  if (peer_wanted && *peer_params != define_params) {
    fmt::print(stderr, "error: parameter counts differ: define {} vs pytorch {}: the two models are not the same\n",
               define_params, *peer_params);
    return 1;
  }
  fmt::print("params : define {}{}\n", define_params,
             peer_wanted ? fmt::format(", pytorch {} (equal)", *peer_params) : std::string());
  return std::nullopt;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string cpu_model() { return cpuinfo_field("model name", "unknown CPU"); }

}  // namespace define::bench
