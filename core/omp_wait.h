// OpenMP idle threads: passive by default for the programs (`define`, the benchmarks).
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

namespace define {

// When OMP_WAIT_POLICY is unset, sets it to PASSIVE and re-executes the program (same argv) so
// libgomp sees it; returns normally when the variable was already set (the user's choice, or
// after the re-exec) or when re-executing fails (the program then runs with libgomp's default).
// Call first thing in main().
void prefer_passive_omp_wait(char** argv);

}  // namespace define
