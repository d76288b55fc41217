// Device-side index checks for the kernels that read indices (embedding, index, softmax loss,
// adaptive softmax): see kernels/cuda/index_error.h for why and for the record. Included by kernel
// files after common.cuh; the host functions are defined in kernels/cuda/device.cu.
//
// Use: the host wrapper gets an IndexCheck for the current device (the one DEFINE_BACKEND_CALL
// selected) and passes it to the kernel by value; the kernel calls in_range() on every index it is
// about to use and skips (or zero-fills) the access when it says false; after the launch the
// wrapper calls index_check_launched(), which tells the next synchronisation point to read the
// record.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/index_error.h"

namespace define::kernels::DEFINE_CUDA_NS {

struct IndexCheck {
  IndexErrorRecord* record;
  std::int64_t bound;  // valid indices are [0, bound)
  std::int32_t op;
  std::int32_t kind;
  std::int32_t detail;

  // Claims the record for this failure unless an earlier one holds it.
  __device__ void report(std::int64_t index, std::int64_t bound_value, std::int32_t kind_value, std::int32_t detail_value,
                         std::int64_t bound2 = 0, std::int64_t extra = 0) const {
    if (atomicCAS(&record->flag, 0, 1) != 0) return;
    record->op = op;
    record->kind = kind_value;
    record->detail = detail_value;
    record->index = static_cast<long long>(index);
    record->bound = static_cast<long long>(bound_value);
    record->bound2 = static_cast<long long>(bound2);
    record->extra = static_cast<long long>(extra);
  }

  __device__ bool in_range(std::int64_t index) const {
    if (index >= 0 && index < bound) return true;
    report(index, bound, kind, detail);
    return false;
  }
};

// The current device's check for `op`: indices in [0, bound); detail is the dim for
// IndexErrorKind::Dim messages.
IndexCheck index_check(const char* op, IndexErrorKind kind, std::int64_t bound, std::int32_t detail = 0);
// After a launch that was handed an IndexCheck of the current device: the next synchronisation
// point reads that device's record.
void index_check_launched();
// Reads the record of every device with checked launches since its last read and throws the
// first error found (define::Error, the op's message), clearing it. Called by the device
// interface's device-to-host copies and synchronise; kernels' host code does not call it.
void raise_index_errors();

}  // namespace define::kernels::DEFINE_CUDA_NS
