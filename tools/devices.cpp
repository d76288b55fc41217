// `define devices`: the devices this build can run on. The emulated CUDA device is always listed:
// it runs the CUDA kernels on the CPU (for testing and debugging kernels, not for speed).
#include <fmt/format.h>

#include "core/error.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "tools/command.h"

namespace define::cli {

int run_devices(const std::vector<std::string>& args) {
  if (!args.empty()) {
    if (args[0] == "--help" || args[0] == "-h") {
      fmt::print("usage: define devices\n\nLists cpu, the emulated CUDA device (emu) and any GPUs (cuda:N).\n");
      return 0;
    }
    fail("devices", "unexpected argument '{}' (the command takes none)", args[0]);
  }
  const kernels::DeviceAvailability a = kernels::register_devices();
  fmt::print("cpu      the host CPU (Eigen + OpenMP kernels)\n");
  for (int i = 0; i < a.emu_devices; ++i)
    fmt::print("emu:{}    {} (the CUDA kernels run on the CPU by the CUDA emulator; for testing, not speed)\n", i,
               define::cuda_emu::device_name(i));
#if defined(DEFINE_HAS_CUDA_KERNELS)
  for (int i = 0; i < a.cuda_devices; ++i) fmt::print("cuda:{}   {}\n", i, define::cuda::device_name(i));
#endif
  if (a.cuda_devices == 0)
    fmt::print("(no GPU: {})\n", kernels::built_with_cuda() ? "none found by the CUDA runtime"
                                                           : "this build has no nvcc-compiled backend (DEFINE_CUDA=OFF)");
  return 0;
}

}  // namespace define::cli
