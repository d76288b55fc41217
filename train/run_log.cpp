#include "train/run_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/cpu_allocator.h"
#include "core/error.h"
#include "nn/safetensors.h"

namespace define::train {

std::int64_t peak_tensor_bytes() {
  return static_cast<std::int64_t>(CpuCachingAllocator::instance().stats().peak_active_bytes);
}

RunDir::RunDir(std::string path, bool resume, bool writer) : path_(std::move(path)), writer_(writer) {
  namespace fs = std::filesystem;
  if (!writer_) return;
  std::error_code ec;
  if (!resume && fs::exists(fs::path(path_) / "metrics.jsonl"))
    fail("train", "run folder '{}' already holds a run; pass --resume to continue it or choose another --run-dir", path_);
  fs::create_directories(path_, ec);
  if (ec) fail("train", "cannot create run folder '{}': {}", path_, ec.message());
  if (resume) remove_stale_temporaries(path_);
}

void RunDir::write_config(const std::string& resolved_json) const {
  if (!writer_) return;
  write_file_atomically(file("config.json"), resolved_json + "\n");
}

void RunDir::log_metrics(const std::string& event, const std::map<std::string, double>& numbers,
                         const std::map<std::string, std::string>& strings) const {
  if (!writer_) return;
  nlohmann::json j;
  j["event"] = event;
  for (const auto& [k, v] : numbers) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(fmt::format("{}", v));
  for (const auto& [k, v] : strings) j[k] = v;
  std::ofstream out(file("metrics.jsonl"), std::ios::app);
  if (!out) fail("train", "cannot append to '{}': {}", file("metrics.jsonl"), std::strerror(errno));
  out << j.dump() << '\n';
  out.flush();
  if (!out) fail("train", "cannot append to '{}' (disk full or file-size limit?): {}", file("metrics.jsonl"), std::strerror(errno));
}

std::uint64_t RunDir::metrics_size() const {
  std::error_code ec;
  const std::uintmax_t n = std::filesystem::file_size(file("metrics.jsonl"), ec);
  return ec ? 0 : static_cast<std::uint64_t>(n);
}

void RunDir::truncate_metrics(std::uint64_t size) const {
  if (!writer_) return;
  const std::uint64_t now = metrics_size();
  if (now == size) return;
  if (now < size) {
    // Edited or lost: cutting cannot restore it, and refusing would strand the checkpoint.
    fmt::print(stderr, "warning: '{}' holds {} bytes but the checkpoint saw {}; it is kept as it is\n",
               file("metrics.jsonl"), now, size);
    return;
  }
  std::error_code ec;
  std::filesystem::resize_file(file("metrics.jsonl"), size, ec);
  if (ec) fail("train", "cannot truncate '{}' to the checkpoint's {} bytes: {}", file("metrics.jsonl"), size, ec.message());
}

ProgressLine::ProgressLine() : tty_(::isatty(STDERR_FILENO) != 0) {}

namespace {
std::string duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const auto t = static_cast<std::int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}
}  // namespace

void ProgressLine::update(std::int64_t epoch, std::int64_t step, std::int64_t total_steps, double loss,
                          double tokens_per_s, double lr, double elapsed_s, double budget_s) {
  double remaining = budget_s - elapsed_s;
  if (total_steps > 0 && step > 0)
    remaining = std::min(remaining, elapsed_s * static_cast<double>(total_steps - step) / static_cast<double>(step));
  const std::string eta = duration(remaining);
  const std::string line = fmt::format("epoch {} step {}{} | loss {:.3f} ppl {:.1f} | {:.0f} tok/s | lr {:.3g} | {} elapsed, ETA {}",
                                       epoch, step, total_steps > 0 ? fmt::format("/{}", total_steps) : "", loss,
                                       std::exp(loss), tokens_per_s, lr, duration(elapsed_s), eta);
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}", line);
    open_ = true;
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

void ProgressLine::finish() {
  if (open_) fmt::print(stderr, "\n");
  open_ = false;
}

}  // namespace define::train
