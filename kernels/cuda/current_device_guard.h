// CurrentDeviceGuard: makes a device the calling thread's current one for a scope (allocations,
// cuBLAS handles and launches act on the current device) and restores the caller's afterwards.
// Lives in the backend namespace (cuda or cuda_emu): the runtime under it differs per build.
#pragma once

#include "kernels/cuda/check.h"

namespace define::DEFINE_CUDA_NS {

class CurrentDeviceGuard {
 public:
  explicit CurrentDeviceGuard(int index) {
    DEFINE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) DEFINE_CUDA_CHECK(cudaSetDevice(index));
  }
  ~CurrentDeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace define::DEFINE_CUDA_NS
