// Fuzz target: the command line of every `define` subcommand (tools/dispatch.h, tools/options.h and
// each run_* function's checks of its options).
//
// Input: NUL-separated: the subcommand's name, then its arguments, run through
// cli::run_command exactly as `define <name> <args...>` would.
//   * Each command runs in an empty scratch folder, and inputs with a '/' in any argument are
//     skipped: no argument can name a file that exists, so every command stops at its option
//     checks or at its first file read (missing config, missing run folder). The file readers have
//     their own targets (fuzz_config, fuzz_safetensors, fuzz_corpus).
//   * `demo` needs no file and would train a network per input: its options are parsed and checked
//     (cli::parse_demo_options, what run_demo does first) without the training.
//   * stdout and stderr (help texts, the one-line error messages) go to /dev/null; the sanitizers
//     and libFuzzer still report on file descriptor 2.
// Expected: any exit status but 3, which run_command gives when an exception other than
// define::Error escaped a command (an "internal error": a bug). Findings are also what
// tests/fuzz/fuzz_util.h lists.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "tools/command.h"
#include "tools/dispatch.h"

namespace {

std::FILE* null_file() {
  static std::FILE* f = std::fopen("/dev/null", "w");
  return f;
}

// The commands run in an empty folder of their own; libFuzzer's paths (corpus folders, crash
// files) stay relative to the folder it was started in, so the change lasts one call only.
class InEmptyFolder {
 public:
  InEmptyFolder() : back_(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    static const std::filesystem::path empty = [] {
      const std::filesystem::path p = define::fuzz::scratch_dir() / "cwd";
      std::filesystem::create_directory(p);
      return p;
    }();
    if (back_ < 0 || ::chdir(empty.c_str()) != 0) {
      std::perror("InEmptyFolder");
      std::abort();
    }
  }
  ~InEmptyFolder() {
    if (::fchdir(back_) != 0) std::abort();
    ::close(back_);
  }

 private:
  int back_;
};

// glibc's stdout and stderr are ordinary variables (the glibc manual says they may be assigned):
// pointing them at /dev/null silences the commands' fmt::print without touching file descriptor
// 2, where sanitizer reports go.
int run_quietly(const std::string& name, const std::vector<std::string>& args) {
  std::FILE* const out = stdout;
  std::FILE* const err = stderr;
  stdout = null_file();
  stderr = null_file();
  const int status = define::cli::run_command(name, args);
  stdout = out;
  stderr = err;
  return status;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> parts = define::fuzz::split(data, size);
  for (const std::string_view p : parts)
    if (p.find('/') != std::string_view::npos) return 0;
  const std::string name(parts[0]);
  const std::vector<std::string> args(parts.begin() + 1, parts.end());
  if (name == "demo") {
    define::fuzz::expect_define_error([&] { define::cli::parse_demo_options(args); });
    return 0;
  }
  const InEmptyFolder in_empty_folder;
  if (run_quietly(name, args) == 3) {
    define::cli::run_command(name, args);  // again, for the message on stderr
    define::fuzz::check(false, "a command ended with an internal error (exit status 3)");
  }
  // Nothing may have been written: every argument named a file that does not exist.
  define::fuzz::check(std::filesystem::is_empty(std::filesystem::current_path()),
                      "a command created a file in its empty working folder");
  return 0;
}
