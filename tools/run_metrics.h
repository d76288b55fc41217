// A run folder's metrics.jsonl (train/run_log.h writes it: one JSON object a line, {"event": ...,
// numbers}) read back, and the (x, y) series that `define plot` draws from it.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace define::cli {

// The field that gives a record's wall time: seconds since the run started, resumed sessions
// included (what the progress line shows as "elapsed").
inline constexpr const char* kWallTimeKey = "elapsed_s";

struct MetricsRecord {
  std::string event;                      // "train", "valid", "final", "overflow", ...
  std::map<std::string, double> numbers;  // its numeric fields; "nan" / "inf" strings as those values
  int line = 0;                           // 1-based line in metrics.jsonl
};

struct RunMetrics {
  std::string name;  // the label in a legend: the run folder's name
  std::string file;  // path of its metrics.jsonl
  std::vector<MetricsRecord> records;
};

// Reads `run_dir`/metrics.jsonl. Errors (define::Error, op "plot"): no such folder, no
// metrics.jsonl, a line that is not a JSON object with a string "event" (named file:line), and a
// log without a single "train" or "valid" record. An unterminated last line that does not parse is
// a line being written (a live run) or cut by a kill: it is left out with a warning on stderr.
RunMetrics read_run_metrics(const std::string& run_dir);

struct Point {
  double x = 0, y = 0;
};

// The (x, y) of every `event` record that holds both fields, in file order. Non-finite values are
// left out: a point at infinity cannot be drawn.
std::vector<Point> extract_series(const RunMetrics& run, const std::string& event, const std::string& x_key,
                                  const std::string& y_key);

// The parameter parts with a gradient norm in the run's "train" records ("grad_norm <part>"
// fields), in order of first appearance.
std::vector<std::string> grad_norm_parts(const RunMetrics& run);

}  // namespace define::cli
