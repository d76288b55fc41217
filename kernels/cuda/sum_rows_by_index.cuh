// sum_rows_by_index: the deterministic "add many source rows into indexed output rows" primitive
// shared by embedding_backward (embedding.cu) and index_add / scatter_add (index.cu), where it is
// defined. Included by kernel files only, after common.cuh (it lives in the backend namespace).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/index_check.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

// out and src have the same rank and shape except along dim, where out has the rows and src has
// index.numel() entries. For every row v: out[.., v, ..] = (accumulate ? out[.., v, ..] : 0) + the
// sum of src[.., j, ..] over the positions j with index[j] == v, in increasing j; row skip_row
// (when it is a valid row) is left at its start value. index: int32/int64, 1-d, values in
// [0, rows), checked on the device by `check`: an index outside them is reported there, and the
// sums are then unspecified but no access goes out of bounds. Deterministic without float
// atomics: a stable radix sort groups the positions, and each output element is summed by one
// thread in position order (the CPU path's order).
void sum_rows_by_index(const char* op, const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim,
                       std::int64_t skip_row, bool accumulate, const IndexCheck& check);

}  // namespace define::kernels::DEFINE_CUDA_NS
