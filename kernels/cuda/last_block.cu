// Host side of kernels/cuda/last_block.cuh: the tickets of each device. Compiled twice like every
// kernel file (real GPUs and the emulator).
#include <cstddef>
#include <mutex>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/last_block.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

// Outside the caching allocator, like a module global: allocated on a device's first use, zeroed
// once, never freed (kernels may still run while static objects are torn down).
unsigned* group_tickets() {
  static std::mutex mutex;
  static auto* per_device = new std::vector<unsigned*>();
  int device = 0;
  DEFINE_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (per_device->size() <= static_cast<std::size_t>(device)) per_device->resize(static_cast<std::size_t>(device) + 1);
  unsigned*& tickets = (*per_device)[static_cast<std::size_t>(device)];
  if (!tickets) {
    void* p = nullptr;
    DEFINE_CUDA_CHECK(cudaMalloc(&p, sizeof(unsigned) * kMaxGridBlocks));
    DEFINE_CUDA_CHECK(cudaMemset(p, 0, sizeof(unsigned) * kMaxGridBlocks));
    tickets = static_cast<unsigned*>(p);
  }
  return tickets;
}

}  // namespace define::kernels::DEFINE_CUDA_NS
