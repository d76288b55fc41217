// What a training run leaves behind and shows while it runs:
//   RunDir        the run folder: config.json (the resolved config), metrics.jsonl (one JSON object
//                 per line: step, loss, perplexity, tokens/s, learning rate, memory), checkpoints.
//   ProgressLine  the live status line (epoch, step, loss, perplexity, tokens/s, ETA) on stderr;
//                 redrawn in place on a terminal, one line per update otherwise (logs, CI).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace define::train {

// Bytes the CPU caching allocator has handed out at most (tensor memory).
std::int64_t peak_tensor_bytes();

class RunDir {
 public:
  // Creates the folder (and parents). Refuses an existing folder holding a run unless
  // `resume` (so a new run never overwrites another's checkpoints). On resume, removes the
  // temporaries of checkpoint writes that a killed process left behind. A reader (`writer`
  // false: the ranks other than 0 of a data-parallel run) only reads the folder rank 0 writes:
  // it creates, checks, logs and truncates nothing.
  RunDir(std::string path, bool resume, bool writer = true);
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write_config(const std::string& resolved_json) const;
  // Appends one JSON line: {"event": ..., <fields>}; numbers as given, strings quoted.
  // A line that cannot be written in full (disk full, file-size limit) is an error naming the file.
  void log_metrics(const std::string& event, const std::map<std::string, double>& numbers,
                   const std::map<std::string, std::string>& strings = {}) const;
  // Bytes in metrics.jsonl (0 when there is none). A checkpoint records it, so that a resumed run
  // cuts the log back to what the checkpoint had seen: lines logged after it (and a line half
  // written when the process was killed) are logged again by the resumed run, not twice.
  std::uint64_t metrics_size() const;
  // A log shorter than `size` (edited or lost) is kept, with a warning.
  void truncate_metrics(std::uint64_t size) const;

 private:
  std::string path_;
  bool writer_ = true;
};

class ProgressLine {
 public:
  ProgressLine();
  // total_steps may be 0 when unknown; the ETA is the sooner of the step count's and the time
  // budget's end (budget_s: infinity when there is none).
  void update(std::int64_t epoch, std::int64_t step, std::int64_t total_steps, double loss, double tokens_per_s,
              double lr, double elapsed_s, double budget_s);
  void finish();  // ends the in-place line

 private:
  bool tty_;
  bool open_ = false;
};

}  // namespace define::train
