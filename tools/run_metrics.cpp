#include "tools/run_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "plot";
constexpr const char* kPartPrefix = "grad_norm ";

// The legend label: the folder's own name ("runs/a/" -> "a"), the path as given when it has none.
std::string run_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() || name == "." || name == ".." ? dir : name;
}

// RunDir::log_metrics writes a non-finite number as the string fmt gives it ("nan", "inf", "-inf").
bool number_of(const nlohmann::json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return true;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "nan" || s == "-nan")
    out = std::numeric_limits<double>::quiet_NaN();
  else if (s == "inf")
    out = std::numeric_limits<double>::infinity();
  else if (s == "-inf")
    out = -std::numeric_limits<double>::infinity();
  else
    return false;
  return true;
}

}  // namespace

RunMetrics read_run_metrics(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) fail(kOp, "run folder '{}' does not exist (or is not a folder)", run_dir);
  RunMetrics run;
  run.name = run_name(run_dir);
  run.file = (fs::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(run.file, std::ios::binary);
  if (!in)
    fail(kOp, "'{}' has no metrics.jsonl: not a run folder of `define train`, or it has not logged yet", run_dir);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) fail(kOp, "cannot read '{}'", run.file);

  int line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const bool terminated = end < text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      if (!terminated) {
        fmt::print(stderr,
                   "warning: {}:{}: the last line is incomplete (still being written, or cut by a kill); left out\n",
                   run.file, line_no);
        break;
      }
      fail(kOp, "{}:{}: damaged line, not JSON ({})", run.file, line_no, e.what());
    }
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string())
      fail(kOp, "{}:{}: damaged line, not a JSON object with a string \"event\"", run.file, line_no);
    MetricsRecord r;
    r.event = j["event"].get<std::string>();
    r.line = line_no;
    for (const auto& [key, value] : j.items()) {
      double v = 0;
      if (key != "event" && number_of(value, v)) r.numbers[key] = v;
    }
    run.records.push_back(std::move(r));
  }
  const bool any = std::any_of(run.records.begin(), run.records.end(),
                               [](const MetricsRecord& r) { return r.event == "train" || r.event == "valid"; });
  if (!any)
    fail(kOp, "{} holds no training or validation records (the run has not reached its first log_interval yet?)",
         run.file);
  return run;
}

std::vector<Point> extract_series(const RunMetrics& run, const std::string& event, const std::string& x_key,
                                  const std::string& y_key) {
  std::vector<Point> out;
  for (const MetricsRecord& r : run.records) {
    if (r.event != event) continue;
    const auto x = r.numbers.find(x_key), y = r.numbers.find(y_key);
    if (x == r.numbers.end() || y == r.numbers.end()) continue;
    if (!std::isfinite(x->second) || !std::isfinite(y->second)) continue;
    out.push_back({x->second, y->second});
  }
  return out;
}

std::vector<std::string> grad_norm_parts(const RunMetrics& run) {
  std::vector<std::string> parts;
  const std::string prefix = kPartPrefix;
  for (const MetricsRecord& r : run.records) {
    if (r.event != "train") continue;
    for (const auto& [key, value] : r.numbers) {
      if (key.rfind(prefix, 0) != 0) continue;
      const std::string part = key.substr(prefix.size());
      if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
    }
  }
  return parts;
}

}  // namespace define::cli
