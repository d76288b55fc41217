// The kernel cases (kernel_cases.h) through the emulator's profiling mode and performance model
// (cuda_emu/emu_profile.hpp, cuda_emu/emu_perf_model.hpp): what `kernel_bench --device emu
// --profile` prints, and what the access-pattern check (tests/cuda/kernel_profile_test.cpp) asserts.
//
// Register counts come from ptxas's report as scripts/checks/check-ptxas.sh prints it, kept in
// kernels/cuda/ptxas-registers.txt (regenerate with scripts/checks/update-ptxas-registers.sh after
// changing a kernel); a kernel missing from it is estimated at 32 registers and marked.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/kernel_cases.h"
#include "cuda_emu/emu_perf_model.hpp"
#include "cuda_emu/emu_profile.hpp"

namespace define::bench::kernel_bench {

inline const int kProfileArchs[] = {61, 75, 90};

// Registers per (arch, kernel) from check-ptxas.sh's table: "file arch regs spill_st spill_ld smem kernel".
class RegisterTable {
 public:
  RegisterTable() = default;
  explicit RegisterTable(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string file, arch, regs, st, ld, smem;
      if (!(row >> file >> arch >> regs >> st >> ld >> smem) || arch.rfind("sm_", 0) != 0) continue;
      std::string name;
      std::getline(row >> std::ws, name);
      if (name.rfind("void ", 0) == 0) name.erase(0, 5);
      const std::string prefix = "define::kernels::cuda::";
      if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
      regs_[{std::stoi(arch.substr(3)), name}] = std::stoi(regs);
    }
  }
  bool empty() const { return regs_.empty(); }
  // 0 when the kernel is not in the table.
  int registers(int arch, const std::string& kernel) const {
    auto it = regs_.find({arch, kernel});
    return it == regs_.end() ? 0 : it->second;
  }

 private:
  std::map<std::pair<int, std::string>, int> regs_;
};

inline std::string default_register_table() {
#ifdef DEFINE_SOURCE_DIR
  return std::string(DEFINE_SOURCE_DIR) + "/kernels/cuda/ptxas-registers.txt";
#else
  return "kernels/cuda/ptxas-registers.txt";
#endif
}

// A problem's launches, profiled on the emulated device after one unprofiled run (allocations and
// caches settle first, as in the timed runs).
inline std::vector<::cuda_emu::KernelProfile> profile_problem(const Problem& p,
                                                              ::cuda_emu::ProfileSettings settings = {}) {
  p.run();
  ::cuda_emu::profile_start(settings);
  try {
    p.run();
  } catch (...) {
    (void)::cuda_emu::profile_stop();
    throw;
  }
  return ::cuda_emu::profile_stop();
}

inline std::vector<::cuda_emu::KernelProfile> profile_case(const Case& c, Device emu, bool gpu_size,
                                                           ::cuda_emu::ProfileSettings settings = {}) {
  return profile_problem(c.make(emu, gpu_size), settings);
}

// One launch on one target: its estimate, with the registers it was estimated with (0: unknown,
// estimated at 32).
struct LaunchEstimate {
  int registers = 0;
  ::cuda_emu::Estimate estimate;
};

inline LaunchEstimate estimate_launch(const ::cuda_emu::KernelProfile& k, const ::cuda_emu::GpuSpec& g,
                                      const RegisterTable& regs, double flops) {
  LaunchEstimate e;
  e.registers = regs.registers(g.arch, k.kernel);
  e.estimate = ::cuda_emu::estimate(k, g, e.registers ? e.registers : 32, flops);
  return e;
}

}  // namespace define::bench::kernel_bench
