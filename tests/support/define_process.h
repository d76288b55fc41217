// The `define` binary run as a child process, for tests that need what only a separate process
// can show: being killed (SIGKILL) at a chosen moment, or running under a file-size limit.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace define::test {

struct ProcessOptions {
  std::string crash_at;              // DEFINE_CRASH_AT for the child (core/crash_point.h); empty: none
  std::uint64_t file_size_limit = 0;  // RLIMIT_FSIZE in bytes (SIGXFSZ ignored); 0: unchanged
  std::vector<std::string> env;       // "NAME=value" added to (or replacing in) the child's environment
};

inline ProcessOptions crash_at(std::string point) {
  ProcessOptions o;
  o.crash_at = std::move(point);
  return o;
}
inline ProcessOptions file_size_limit(std::uint64_t bytes) {
  ProcessOptions o;
  o.file_size_limit = bytes;
  return o;
}
inline ProcessOptions with_env(std::vector<std::string> env) {
  ProcessOptions o;
  o.env = std::move(env);
  return o;
}

class DefineProcess {
 public:
  // Starts `define <args...>` with stdout and stderr appended to `log`.
  DefineProcess(const std::vector<std::string>& args, const std::filesystem::path& log, const ProcessOptions& opt = {});
  // Waits for the process; returns its exit code, or -signal when a signal ended it.
  int wait();
  // True when the process has already ended (then `status` holds what wait() would return).
  bool finished(int& status);
  void kill9();

 private:
  pid_t pid_ = -1;
};

}  // namespace define::test
