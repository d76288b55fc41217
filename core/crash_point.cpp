#include "core/crash_point.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

namespace define {
namespace {

struct CrashSpec {
  std::string point;  // empty: no crash point is armed
  long nth = 0;
};

// Read once: the variable is set by the test that starts this process, never changed later.
const CrashSpec& armed() {
  static const CrashSpec spec = [] {
    CrashSpec s;
    const char* v = std::getenv("DEFINE_CRASH_AT");
    if (!v) return s;
    const char* colon = std::strrchr(v, ':');
    if (!colon) return s;
    s.point.assign(v, colon);
    s.nth = std::strtol(colon + 1, nullptr, 10);
    if (s.nth < 1) s.point.clear();
    return s;
  }();
  return spec;
}

}  // namespace

void crash_point(const char* name) {
  const CrashSpec& spec = armed();
  if (spec.point.empty() || spec.point != name) return;
  static std::atomic<long> reached{0};
  if (reached.fetch_add(1) + 1 == spec.nth) std::raise(SIGKILL);
}

}  // namespace define
