// OpenMP idle threads: passive by default for the programs (`define`, the benchmarks), with a
// short spin where no two of the process's CPUs share a physical core; and any other setting a
// library reads only when it is loaded (OpenBLAS's core type).
//
// libgomp's default lets an idle worker spin for a while (about 3 ms) before it sleeps. Training
// calls many short parallel regions (per-step GEMMs at batch 20, element-wise kernels) with serial
// work in between, so the workers spin most of the time. On a machine whose two logical CPUs share
// one physical core, a spinning worker takes issue slots from the thread doing the work: measured
// on the 2-core build machine, the PTB LSTM trained at 4,500 tokens/s with 2 threads by default,
// 6,000 with 1 thread and 9,500 with 2 threads and OMP_WAIT_POLICY=PASSIVE (ACTIVE: 2,000).
//
// Fully passive workers sleep at once, so every parallel region starts with a futex wake-up, and
// a region that follows the last within microseconds pays it again. Where the CPUs are separate
// cores a worker that spins takes nothing from the others, and a short spin (GOMP_SPINCOUNT=3000,
// about 30 us by libgomp's estimate; longer on CPUs with a slow `pause`) lets back-to-back regions
// find their workers awake, which trains the models a few percent faster (docs/results.md).
//
// libgomp reads its environment once, when it is loaded, before main() runs, so the only way to
// change the policy of the running program is to start it again with the variable set.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace define {

// When OMP_WAIT_POLICY is unset, sets it to PASSIVE (and, when GOMP_SPINCOUNT is unset too, no two
// CPUs the process may run on are SMT siblings and no MPI launcher put other ranks on this
// machine, GOMP_SPINCOUNT to the short spin above), sets the `more` variables (name, value; an
// empty value means none is needed), and re-executes the program (same argv) so the libraries see
// them; the same when only a variable of `more` is wanting. Returns normally when nothing is to be
// set (the user's choices, or after the re-exec) or when re-executing fails (the program then
// runs with the libraries' defaults). Call first thing in main(); the programs pass
// {"OPENBLAS_CORETYPE", kernels::cpu::openblas_coretype_override()}.
void prefer_passive_omp_wait(char** argv, const std::vector<std::pair<std::string, std::string>>& more = {});

// The spin count set where the CPUs are separate cores.
inline constexpr const char* kShortSpinCount = "3000";

// Whether two of `cpus` are SMT siblings, given each CPU's sibling list as Linux writes it in
// /sys/devices/system/cpu/cpuN/topology/thread_siblings_list ("0-1", "0,4", "3"). A CPU whose list
// is missing or unreadable counts as sharing (the passive choice is the safe one).
bool cpus_share_a_core(const std::vector<int>& cpus, const std::function<std::string(int)>& siblings_list);

// cpus_share_a_core for the CPUs this process may run on (its affinity mask), from /sys.
bool process_cpus_share_a_core();

}  // namespace define
