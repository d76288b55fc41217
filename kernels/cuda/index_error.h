// Device-side index checks: the record a CUDA kernel fills when it meets an index outside its
// bound, and its host-side message. Plain C++ (no CUDA header), included by kernel files of both
// builds (kernels/cuda/index_check.cuh) and by host code.
//
// Why on the device: checking indices on the host meant copying them there and blocking the
// stream on every embedding, gather or loss call. Instead the kernels that read the indices check
// them, skip the bad ones (no out-of-bounds access) and leave the first failure in a per-device
// record; the host reads the record at the next synchronisation point that happens anyway (a
// device-to-host copy, a device synchronise) and throws the same define::Error a CPU tensor
// raises at once, e.g. "embedding: index 40 out of range for 10 rows".
#pragma once

#include <cstdint>
#include <string>

namespace define::kernels {

// What the bound means, which decides the message.
enum class IndexErrorKind : std::int32_t {
  Rows = 1,    // "<op>: index 40 out of range for 10 rows"
  Dim = 2,     // "<op>: index 5 out of range for dim 1 of size 4" (detail: the dim)
  Classes = 3, // "<op>: target 12 out of range for 10 classes"
  TailRow = 4,     // "<op>: tail 0 lists row 9, outside [0, 8)" (detail: the tail)
  TailTarget = 5,  // "<op>: row 3 (target 2) is listed for tail 0 [5, 10)" (detail: tail, bound: c_i, bound2: c_i+1)
};

// One per device, in device memory; all zero while no error is pending. A kernel claims it by
// flipping `flag` from 0 to 1 (atomicCAS), so the first failure is kept and later ones until the
// host has read it are dropped.
struct IndexErrorRecord {
  std::int32_t flag;
  std::int32_t op;    // index_error_op_id() of the op's name
  std::int32_t kind;  // IndexErrorKind
  std::int32_t detail;
  long long index;    // the bad index (or row)
  long long bound;
  long long bound2;   // TailTarget: the end of the tail's words; else unused
  long long extra;    // TailTarget: the row's target
};

// A small stable id for an op name (interned on first use, thread-safe), and the name back.
std::int32_t index_error_op_id(const char* op);
// The define::Error message of a claimed record.
std::string index_error_message(const IndexErrorRecord& r);

}  // namespace define::kernels
