// Device registration. Core knows devices only through the DeviceInterface registered for each
// type; this registers the CUDA backends:
//   * emu   the emulated CUDA device (the CUDA kernels run on the CPU by kernels/emu/), always;
//   * cuda  real GPUs, when this build has the nvcc-compiled backend and a GPU is present.
// Programs (the CLI, the test binaries) call it once at start-up; it is idempotent.
#pragma once

namespace define::kernels {

struct DeviceAvailability {
  bool emu = false;
  int cuda_devices = 0;  // 0 without a GPU or without the CUDA build
};

DeviceAvailability register_devices();

// Whether this build contains the nvcc-compiled CUDA backend (DEFINE_CUDA=ON).
bool built_with_cuda();

}  // namespace define::kernels
