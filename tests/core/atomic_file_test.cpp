// core/atomic_file.h: a file is replaced whole or not at all. A full disk (simulated with the
// file-size limit, which makes write() fail with EFBIG as a full file system fails with ENOSPC)
// leaves the previous file intact and says which file could not be written and why.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <string>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = test::scratch_path(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int files_in(const fs::path& d) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++n;
  return n;
}

// Lowers this process's file-size limit for its lifetime (SIGXFSZ ignored, so write() fails
// with EFBIG instead of the signal killing the test).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lower = saved_;
    lower.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lower);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("atomic file: replaces the file whole and leaves no temporary", "[atomic_file]") {
  const fs::path d = fresh_dir("define_atomic_file_test");
  const std::string path = (d / "a.bin").string();
  write_file_atomically(path, "first");
  write_file_atomically(path, std::string(100000, 'x'));
  CHECK(test::read_all(path) == std::string(100000, 'x'));
  CHECK(files_in(d) == 1);
  CHECK_THROWS_WITH(write_file_atomically((d / "missing" / "b").string(), "x"),
                    Contains("could not write '" + (d / "missing" / "b").string() + "' (creating its temporary"));
  fs::remove_all(d);
}

TEST_CASE("atomic file: a full disk keeps the previous file and names the file and the cause", "[atomic_file]") {
  const fs::path d = fresh_dir("define_atomic_file_full");
  const std::string path = (d / "latest.ckpt").string();
  const std::string old(4096, 'o');
  write_file_atomically(path, old);
  std::string error;
  {
    FileSizeLimit limit(8192);
    error = test::error_of([&] { write_file_atomically(path, std::string(65536, 'n')); });
  }
  CHECK_THAT(error, Contains("could not write '" + path + "' (writing its temporary"));
  CHECK_THAT(error, Contains("File too large"));
  CHECK_THAT(error, Contains("the previous 'latest.ckpt', if any, is unchanged"));
  CHECK(test::read_all(path) == old);
  CHECK(files_in(d) == 1);  // the partial temporary is gone
  fs::remove_all(d);
}

TEST_CASE("atomic file: temporaries of killed writers are removed, live ones kept", "[atomic_file]") {
  const fs::path d = fresh_dir("define_atomic_file_stale");
  // A process id that is certainly dead: a child that has exited and been reaped.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  write_file_atomically((d / fmt::format(".latest.ckpt.tmp.{}", child)).string(), "half");
  write_file_atomically((d / fmt::format(".best.ckpt.tmp.{}", getpid())).string(), "mine");
  write_file_atomically((d / "notes.tmp.txt").string(), "not a temporary of ours");
  CHECK(remove_stale_temporaries(d.string()) == 1);
  CHECK_FALSE(fs::exists(d / fmt::format(".latest.ckpt.tmp.{}", child)));
  CHECK(fs::exists(d / fmt::format(".best.ckpt.tmp.{}", getpid())));
  CHECK(fs::exists(d / "notes.tmp.txt"));
  fs::remove_all(d);
}
