// The `define` command line: one entry per subcommand. A new subcommand is a file defining its
// run_* function and a line in the table of tools/dispatch.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/checkpoint.h"

namespace define::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

int run_demo(const std::vector<std::string>& args);
// `define demo`'s options, parsed and checked apart from the training so that the command-line
// fuzzer (tests/fuzz/fuzz_cli.cpp) covers them without training a network per input.
struct DemoSettings {
  std::int64_t steps = 1500;
  std::int64_t hidden = 64;
  double lr = 2.0;
  std::int64_t seed = 1;
  bool help = false;
};
DemoSettings parse_demo_options(const std::vector<std::string>& args);
int run_devices(const std::vector<std::string>& args);
int run_params(const std::vector<std::string>& args);
int run_memory(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_export_cache(const std::vector<std::string>& args);
int run_corrmap(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_import(const std::vector<std::string>& args);
int run_bleu(const std::vector<std::string>& args);
int run_average(const std::vector<std::string>& args);
int run_translate(const std::vector<std::string>& args);
int run_plot(const std::vector<std::string>& args);  // tools/plot.cpp

// The mean of the checkpoints' model tensors (weights only; vocabulary / subword labels kept):
// what `define average` writes. Throws naming two files that do not match.
nn::Checkpoint average_checkpoints(const std::vector<std::string>& paths);

}  // namespace define::cli
