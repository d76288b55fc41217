// Host wrappers for the reduction-style test kernels (reduce.cu): warp-shuffle sum, row softmax,
// atomic histogram. Device pointers; plain C++ so tests call them in both builds.
#pragma once

#include <cstddef>

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

inline constexpr int kReduceBlock = 256;
inline constexpr int kReduceMaxBlocks = 256;

// *out = sum of x[0..n): a grid-stride pass (at most kReduceMaxBlocks blocks of kReduceBlock threads,
// warp shuffles then shared memory) into partial[], then one block over the partials. Deterministic.
// `partial` holds at least kReduceMaxBlocks floats.
void reduce_sum(const float* x, std::size_t n, float* partial, float* out, cudaStream_t stream = nullptr);

// Same, but every block adds its partial sum to *out with atomicAdd (order-dependent rounding).
void reduce_sum_atomic(const float* x, std::size_t n, float* out, cudaStream_t stream = nullptr);

// y = softmax(x) along each row of a row-major [rows, cols] matrix; one 256-thread block per row.
void softmax_rows(const float* x, float* y, int rows, int cols, cudaStream_t stream = nullptr);

// counts[b] += number of i with bins_of[i] == b; weight_sums[b] += sum of their weights. Privatised
// per block in dynamic shared memory (shared atomics), then merged with global atomics.
void histogram(const int* bins_of, const float* weights, int n, int bins, unsigned* counts, float* weight_sums,
               cudaStream_t stream = nullptr);

}  // namespace emu_test
