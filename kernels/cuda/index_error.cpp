// Host half of kernels/cuda/index_error.h, compiled once (plain C++) and shared by the nvcc build
// and the emulator build of the kernels.
#include "kernels/cuda/index_error.h"

#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace define::kernels {
namespace {

// Op names are string literals of a few dozen call sites: interned once, never removed.
std::mutex& names_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& names() {
  static auto* v = new std::vector<std::string>{"?"};  // id 0: no op (an unclaimed record)
  return *v;
}

}  // namespace

std::int32_t index_error_op_id(const char* op) {
  const std::lock_guard<std::mutex> lock(names_mutex());
  std::vector<std::string>& n = names();
  for (std::size_t i = 1; i < n.size(); ++i)
    if (n[i] == op) return static_cast<std::int32_t>(i);
  n.emplace_back(op);
  return static_cast<std::int32_t>(n.size() - 1);
}

std::string index_error_message(const IndexErrorRecord& r) {
  std::string op;
  {
    const std::lock_guard<std::mutex> lock(names_mutex());
    const std::vector<std::string>& n = names();
    op = r.op > 0 && static_cast<std::size_t>(r.op) < n.size() ? n[static_cast<std::size_t>(r.op)] : "?";
  }
  switch (static_cast<IndexErrorKind>(r.kind)) {
    case IndexErrorKind::Rows: return fmt::format("{}: index {} out of range for {} rows", op, r.index, r.bound);
    case IndexErrorKind::Dim:
      return fmt::format("{}: index {} out of range for dim {} of size {}", op, r.index, r.detail, r.bound);
    case IndexErrorKind::Classes: return fmt::format("{}: target {} out of range for {} classes", op, r.index, r.bound);
    case IndexErrorKind::TailRow:
      return fmt::format("{}: tail {} lists row {}, outside [0, {})", op, r.detail, r.index, r.bound);
    case IndexErrorKind::TailTarget:
      return fmt::format("{}: row {} (target {}) is listed for tail {} [{}, {})", op, r.index, r.extra, r.detail,
                         r.bound, r.bound2);
  }
  return fmt::format("{}: index {} out of range (bound {}, unknown check kind {})", op, r.index, r.bound, r.kind);
}

}  // namespace define::kernels
