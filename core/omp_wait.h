// OpenMP idle threads: passive by default for the programs (`define`, the benchmarks); and any
// other setting a library reads only when it is loaded (OpenBLAS's core type).
//
// libgomp's default lets an idle worker spin for a while before it sleeps. Training calls many
// short parallel regions (per-step GEMMs at batch 20, element-wise kernels) with serial work in
// between, so the workers spin most of the time. On a machine whose two logical CPUs share one
// physical core, a spinning worker takes issue slots from the thread doing the work: measured on
// the 2-core build machine, the PTB LSTM trained at 4,500 tokens/s with 2 threads by default,
// 6,000 with 1 thread and 9,500 with 2 threads and OMP_WAIT_POLICY=PASSIVE (ACTIVE: 2,000).
//
// libgomp reads its environment once, when it is loaded, before main() runs, so the only way to
// change the policy of the running program is to start it again with the variable set.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace define {

// When OMP_WAIT_POLICY is unset, sets it to PASSIVE, sets the `more` variables (name, value; an
// empty value means none is needed), and re-executes the program (same argv) so the libraries see
// them; the same when only a variable of `more` is wanting. Returns normally when nothing is to
// be set (the user's choices, or after the re-exec) or when re-executing fails (the program then
// runs with the libraries' defaults). Call first thing in main(); the programs pass
// {"OPENBLAS_CORETYPE", kernels::cpu::openblas_coretype_override()}.
void prefer_passive_omp_wait(char** argv, const std::vector<std::pair<std::string, std::string>>& more = {});

}  // namespace define
