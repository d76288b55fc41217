// CUDA embedding family: row lookup and its deterministic backward. Entry points and checks:
// kernels/embedding.cpp; reference: kernels/ref/embedding.cpp; tests: tests/ops/embedding_test.cpp
// (every case in mode emu) and tests/cuda/embedding_kernels_test.cpp.
//
// The lookup copies whole rows in 16-byte pieces where the table's rows allow (gather_rows.cuh), else it
// is a grid-stride copy over the output elements; either checks each index it reads
// (index_check.cuh) and writes zeros for a bad one, so the entry point need not copy the indices
// to the host. The backward adds many token
// positions into the same weight row without float atomics: sum_rows_by_index (index.cu, shared
// with index_add) groups the positions by token id with a stable radix sort, then one thread per
// grad_weight element sums its group in position order. The result is the same under any
// schedule and bit-identical to the CPU path (kernels/cpu/embedding.cpp), which sums in the same
// order.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/index_check.cuh"
#include "kernels/cuda/sum_rows_by_index.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

namespace {

// out[p, k] = weight[indices[p], k]; out is contiguous [n, width], weight any strides.
template <typename T, typename I>
__global__ void embedding_kernel(T* __restrict__ out, const T* __restrict__ weight, const I* __restrict__ indices,
                                 std::int64_t numel, std::int64_t width, std::int64_t row_stride,
                                 std::int64_t col_stride, IndexCheck check) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < numel; e += step) {
    const std::int64_t p = e / width, k = e - p * width;
    const auto row = static_cast<std::int64_t>(indices[p]);
    out[e] = check.in_range(row) ? weight[row * row_stride + k * col_stride] : T(0);
  }
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  const std::int64_t width = out.shape()[1];
  const IndexCheck check = index_check("embedding", IndexErrorKind::Rows, weight.shape()[0]);
  DEFINE_DISPATCH_FLOAT(weight.dtype(), "embedding", [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(indices.dtype(), "embedding", [&] {
      // Contiguous rows in 16-byte pieces where they fit (gather_rows.cuh).
      const std::int64_t rows = width > 0 ? out.numel() / width : 0;
      if (rows > 0 && weight.strides()[1] == 1 && weight.strides()[0] == width &&
          gather_rows_fits<T>(weight.data<T>(), out.data<T>(), width)) {
        gather_rows("embedding", out.data<T>(), weight.data<T>(), indices.data<scalar_t>(), 1, rows, width, check);
        return;
      }
      launch_checked("embedding", embedding_kernel<T, scalar_t>, grid_for(out.numel()), kBlockSize, 0, out.data<T>(),
                     weight.data<T>(), indices.data<scalar_t>(), out.numel(), width, weight.strides()[0],
                     weight.strides()[1], check);
    });
  });
  index_check_launched();
}

// grad_out: contiguous [n, width]; indices: contiguous [n]; grad_weight: [rows, width], every
// element written (rows without tokens and the padding row get 0, or keep their values when
// accumulating).
void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight,
                        std::int64_t padding_idx, bool accumulate) {
  const char* op = "embedding_backward";
  sum_rows_by_index(op, indices, grad_out, grad_weight, 0, padding_idx, accumulate,
                    index_check(op, IndexErrorKind::Rows, grad_weight.shape()[0]));
}

}  // namespace define::kernels::DEFINE_CUDA_NS
