// define: command-line entry point. `define --help` lists the subcommands (tools/dispatch.cpp).
#include <csignal>
#include <string>
#include <vector>

#include "kernels/cpu/gemm_provider.h"
#include "kernels/cpu/denormals.h"
#include "tools/dispatch.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write must fail with EFBIG, which the writers report as
  // "could not write <file>", instead of the default SIGXFSZ killing the process unannounced.
  std::signal(SIGXFSZ, SIG_IGN);
  // Passive OpenMP waiting (core/omp_wait.h: up to 2x faster training on 2 cores) and OpenBLAS's
  // kernels for this CPU (kernels/cpu/gemm_provider.h): both read when the libraries load.
  define::kernels::cpu::restart_with_library_settings(argv);
  define::kernels::cpu::flush_denormals(true);  // see kernels/cpu/denormals.h: an LSTM's late steps up to 2x faster
  if (argc < 2) {
    define::cli::print_help();
    return 1;
  }
  return define::cli::run_command(argv[1], std::vector<std::string>(argv + 2, argv + argc));
}
