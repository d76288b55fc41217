// Host wrappers for the SGEMM test kernels (gemm.cu). Plain C++: callable from tests in both builds.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

// C[m,n] = A[m,k] * B[k,n], row-major, device pointers. 32x32 output tiles in static shared memory,
// 16x16 threads computing 2x2 outputs each.
void sgemm_tiled(int m, int n, int k, const float* a, const float* b, float* c, cudaStream_t stream = nullptr);

// Same product with 32x32 = 1024 threads per block, one output each, tiles in dynamic shared memory
// (a kernel template instantiated for the tile size).
void sgemm_dynamic_smem(int m, int n, int k, const float* a, const float* b, float* c, cudaStream_t stream = nullptr);

}  // namespace emu_test
