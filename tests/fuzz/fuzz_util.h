// Shared by the fuzz targets: what counts as an expected outcome, and a private scratch folder for
// readers that take paths.
//
// Expected: the reader returns, or throws define::Error (bad input refused with a message).
// A finding: any other exception escaping (nlohmann::json's, std::out_of_range, std::bad_alloc,
// ...: the reader let an internal error through instead of naming the problem), and everything
// the sanitizers and libFuzzer catch: a crash, undefined behaviour, a leak, an allocation over
// -malloc_limit_mb, a hang over -timeout.
//
// FUZZ_VERBOSE=1 prints each define::Error message (to see why a seed is refused).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "core/error.h"

namespace define::fuzz {

template <typename F>
bool expect_define_error(F&& f) {
  try {
    f();
    return true;
  } catch (const define::Error& e) {
    static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "define::Error: %s\n", e.what());
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FINDING: an exception other than define::Error escaped: %s: %s\n", typeid(e).name(),
                 e.what());
    std::abort();
  }
}

// Stops the run when a property that must hold does not.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "FINDING: %s\n", what);
  std::abort();
}

// A folder of this process's own under the system's temporary folder, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "define-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    return std::filesystem::path(tmpl);
  }();
  // Registered once `dir` is constructed, so that it runs before `dir` is destroyed (exit runs
  // handlers and static destructors in the reverse order of their registration).
  static const bool removed_at_exit = std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
  }) == 0;
  (void)removed_at_exit;
  return dir;
}

// Writes bytes to scratch_dir() / name and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::filesystem::path p = scratch_dir() / name;
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror("write_scratch");
    std::abort();
  }
  return p.string();
}

// The input split on a separator byte (a NUL: text formats have none to give).
inline std::vector<std::string_view> split(const std::uint8_t* data, std::size_t size, char sep = '\0') {
  std::vector<std::string_view> parts;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = all.find(sep, start);
    parts.push_back(all.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

}  // namespace define::fuzz
