#include "tools/dispatch.h"

#include <fmt/format.h>

#include <omp.h>

#include <cstdlib>
#include <exception>

#include "core/error.h"
#include "distributed/communicator.h"
#include "kernels/cpu/gemm_provider.h"
#include "tools/command.h"

namespace define::cli {
namespace {

int run_version(const std::vector<std::string>&) {
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  fmt::print("define 0.1.0\nOpenMP: up to {} threads, wait policy {}, spin count {}\n", omp_get_max_threads(),
             wait ? wait : "default", spin ? spin : "default");
  const std::string blas = kernels::cpu::openblas_core();
  fmt::print("OpenBLAS: {}\n", blas.empty() ? "not in this build" : "kernels " + blas);
  const std::string onednn = kernels::cpu::onednn_version();
  fmt::print("oneDNN: {}\n", onednn.empty() ? "not in this build" : onednn);
  return 0;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"average", "average the weights of a run's last N epoch checkpoints (translation models, as fairseq)",
       run_average},
      {"bleu", "corpus BLEU of a translation against its reference, by sacreBLEU 2.x's default rules", run_bleu},
      {"corrmap", "write the feature correlation map of a trained model's embedding or DeFINE layer as a PNG",
       run_corrmap},
      {"demo", "train a small network on a synthetic task with autograd and print the loss curve", run_demo},
      {"devices", "list the devices this build can use (cpu, the emulated CUDA device, GPUs)", run_devices},
      {"eval", "perplexity of a trained language model on its corpus (optionally through the token cache)", run_eval},
      {"export", "write a trained model's tensors as safetensors under their parameter names (for Python)", run_export},
      {"export-cache", "write the V x m table of a trained DeFINE unit's output for every word (paper 3.4)",
       run_export_cache},
      {"generate", "sample text from a trained language model", run_generate},
      {"import", "load a safetensors file of a model's tensors into a run and write a checkpoint", run_import},
      {"memory", "predict the device memory a rank of a training run needs, and what makes it fit a card", run_memory},
      {"params", "print a config's parameter count split as the papers do (DeFINE, context model, input-output)",
       run_params},
      {"plot", "draw the training curves of one or more runs from their metrics.jsonl (SVG or PNG)", run_plot},
      {"train", "train a language or translation model from a config and report validation and test perplexity",
       run_train},
      {"translate", "translate text with a trained translation model (beam search)", run_translate},
      {"version", "print the version", run_version},
  };
  return table;
}

}  // namespace

void print_help() {
  fmt::print(
      "define: deep factorized token representations (DeFINE, DExTra) and the sequence models\n"
      "built on them.\n\nusage: define <command> [options]\n\ncommands:\n");
  for (const Command& c : commands()) fmt::print("  {:<13} {}\n", c.name, c.summary);
  fmt::print("\n`define <command> --help` describes a command's options.\n");
}

int run_command(const std::string& name, const std::vector<std::string>& args) {
  if (name == "--help" || name == "-h" || name == "help") {
    print_help();
    return 0;
  }
  for (const Command& c : commands()) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const define::Error& e) {
      fmt::print(stderr, "define {}: error: {}\n", name, e.what());
      dist::end_job_on_error(e.what());  // the other ranks of a distributed run must not wait for this one
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "define {}: internal error: {}\n", name, e.what());
      dist::end_job_on_error(e.what());
      return 3;
    }
  }
  fmt::print(stderr, "define: unknown command '{}' (see `define --help`)\n", name);
  return 1;
}

}  // namespace define::cli
