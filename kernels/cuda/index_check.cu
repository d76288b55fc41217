// Host side of the device-side index checks (kernels/cuda/index_check.cuh, index_error.h): one
// error record per device in device memory, allocated on the first checked launch, and its read
// at synchronisation points. Compiled twice like every kernel file (real GPUs and the emulator).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/index_check.cuh"
#include "kernels/cuda/current_device_guard.h"
#include "kernels/cuda/device.h"

namespace define::DEFINE_CUDA_NS {
namespace {

struct RecordSlot {
  std::mutex mutex;  // allocation and read-and-clear
  kernels::IndexErrorRecord* record = nullptr;  // device memory of this device; null until first use
  // Set after every checked launch, cleared by the read: devices whose kernels checked nothing
  // since are not read, so a synchronisation point costs nothing extra for them.
  std::atomic<bool> launched{false};
};

std::vector<std::unique_ptr<RecordSlot>>& slots() {
  // Never destroyed: kernels may still be checked while static objects are torn down.
  static auto* v = [] {
    auto* s = new std::vector<std::unique_ptr<RecordSlot>>();
    for (int i = 0; i < device_count(); ++i) s->push_back(std::make_unique<RecordSlot>());
    return s;
  }();
  return *v;
}

kernels::IndexErrorRecord* record_of(int device) {
  RecordSlot& slot = *slots().at(static_cast<std::size_t>(device));
  const std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.record) {
    // Outside the caching allocator: the record lives as long as the process, like a module global.
    CurrentDeviceGuard guard(device);
    void* p = nullptr;
    DEFINE_CUDA_CHECK(cudaMalloc(&p, sizeof(kernels::IndexErrorRecord)));
    DEFINE_CUDA_CHECK(cudaMemset(p, 0, sizeof(kernels::IndexErrorRecord)));
    slot.record = static_cast<kernels::IndexErrorRecord*>(p);
  }
  return slot.record;
}

}  // namespace

void raise_index_errors() {
  std::vector<std::unique_ptr<RecordSlot>>& all = slots();
  for (std::size_t d = 0; d < all.size(); ++d) {
    RecordSlot& slot = *all[d];
    if (!slot.launched.exchange(false)) continue;
    const std::lock_guard<std::mutex> lock(slot.mutex);
    CurrentDeviceGuard guard(static_cast<int>(d));
    kernels::IndexErrorRecord r{};
    // Device d's stream is ordered before this copy, so every checked kernel launched on it has
    // written its verdict.
    DEFINE_CUDA_CHECK(cudaMemcpy(&r, slot.record, sizeof r, cudaMemcpyDeviceToHost));
    if (r.flag == 0) continue;
    DEFINE_CUDA_CHECK(cudaMemset(slot.record, 0, sizeof r));  // reported once, then cleared
    throw Error(kernels::index_error_message(r));
  }
}

}  // namespace define::DEFINE_CUDA_NS

namespace define::kernels::DEFINE_CUDA_NS {

IndexCheck index_check(const char* op, IndexErrorKind kind, std::int64_t bound, std::int32_t detail) {
  int device = 0;
  DEFINE_CUDA_CHECK(cudaGetDevice(&device));
  return {::define::DEFINE_CUDA_NS::record_of(device), bound, index_error_op_id(op), static_cast<std::int32_t>(kind),
          detail};
}

void index_check_launched() {
  int device = 0;
  DEFINE_CUDA_CHECK(cudaGetDevice(&device));
  ::define::DEFINE_CUDA_NS::slots().at(static_cast<std::size_t>(device))->launched.store(true);
}

}  // namespace define::kernels::DEFINE_CUDA_NS
