// define: command-line entry point. `define --help` lists the subcommands.
#include <fmt/format.h>

#include <omp.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/omp_wait.h"
#include "tools/command.h"

namespace {

using define::cli::Command;

int run_version(const std::vector<std::string>&) {
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  fmt::print("define 0.1.0\nOpenMP: up to {} threads, wait policy {}\n", omp_get_max_threads(), wait ? wait : "default");
  return 0;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"corrmap", "write the feature correlation map of a trained model's embedding or DeFINE layer as a PNG",
       define::cli::run_corrmap},
      {"demo", "train a small network on a synthetic task with autograd and print the loss curve",
       define::cli::run_demo},
      {"devices", "list the devices this build can use (cpu, the emulated CUDA device, GPUs)",
       define::cli::run_devices},
      {"eval", "perplexity of a trained language model on its corpus (optionally through the token cache)",
       define::cli::run_eval},
      {"export", "write a trained model's tensors as safetensors under their parameter names (for Python)",
       define::cli::run_export},
      {"export-cache", "write the V x m table of a trained DeFINE unit's output for every word (paper 3.4)",
       define::cli::run_export_cache},
      {"generate", "sample text from a trained language model", define::cli::run_generate},
      {"import", "load a safetensors file of a model's tensors into a run and write a checkpoint",
       define::cli::run_import},
      {"params", "print a config's parameter count split as the papers do (DeFINE, context model, input-output)",
       define::cli::run_params},
      {"train", "train a language model from a config and report validation and test perplexity",
       define::cli::run_train},
      {"version", "print the version", run_version},
  };
  return table;
}

void print_help() {
  fmt::print(
      "define: deep factorized token representations (DeFINE, DExTra) and the sequence models\n"
      "built on them.\n\nusage: define <command> [options]\n\ncommands:\n");
  for (const Command& c : commands()) fmt::print("  {:<13} {}\n", c.name, c.summary);
  fmt::print("\n`define <command> --help` describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write must fail with EFBIG, which the writers report as
  // "could not write <file>", instead of the default SIGXFSZ killing the process unannounced.
  std::signal(SIGXFSZ, SIG_IGN);
  define::prefer_passive_omp_wait(argv);  // see core/omp_wait.h: up to 2x faster training on 2 cores
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_help();
    return argc < 2 ? 1 : 0;
  }
  const std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : commands()) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const define::Error& e) {
      fmt::print(stderr, "define {}: error: {}\n", name, e.what());
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "define {}: internal error: {}\n", name, e.what());
      return 3;
    }
  }
  fmt::print(stderr, "define: unknown command '{}' (see `define --help`)\n", name);
  return 1;
}
