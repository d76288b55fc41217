// Fast CPU matmul kernels: Eigen GEMM on strided maps, OpenMP over the batch for small GEMMs.
// Called by kernels/matmul.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/matmul.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/matmul.inc"

// Whether a batch of `count` GEMMs of m * n * k = `work` multiply-adds each runs one GEMM per
// thread (true) or one after the other, each split across the `threads` threads (false). The
// second only when there are few GEMMs and each gives every thread enough work to share.
bool gemm_batch_parallel(std::int64_t count, std::int64_t work, int threads);

}  // namespace define::kernels::cpu
