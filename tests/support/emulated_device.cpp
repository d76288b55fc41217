// EmuDeviceScope out of line: the emulator's own headers stay out of the test files that include
// emulated_device.h (their `cuda_emu` namespace would clash with define::kernels::cuda_emu).
#include "support/emulated_device.h"

#include "cuda_emu/emu_types.hpp"

namespace define::test {

EmuDeviceScope::EmuDeviceScope(EmuDeviceSettings s) : saved_{::cuda_emu::config().arch, ::cuda_emu::config().threads} {
  if (s.arch != 0) ::cuda_emu::config().arch = s.arch;
  if (s.threads != 0) ::cuda_emu::config().threads = s.threads;
}

EmuDeviceScope::~EmuDeviceScope() {
  ::cuda_emu::config().arch = saved_.arch;
  ::cuda_emu::config().threads = saved_.threads;
}

}  // namespace define::test
