// Host wrappers for the deliberately buggy kernels (buggy.cu), used to show that each debug aid of
// the emulator catches its bug.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

inline constexpr int kBuggyBlock = 256;
// Lines of the two __syncthreads() calls in divergent_barrier_kernel (checked by static_assert there).
inline constexpr int kDivergentLineA = 30;
inline constexpr int kDivergentLineB = 33;

// out[i] = in[i - 1] within each block of kBuggyBlock (out[first] = in[first]); `blocks` blocks.
// Without the barrier the result depends on the thread order.
void neighbour_copy(const float* in, float* out, int blocks, bool with_barrier, cudaStream_t stream = nullptr);
// 32 threads; threads 0-15 and 16-31 wait at different __syncthreads() call sites.
void divergent_barrier(int* out, cudaStream_t stream = nullptr);
// 32 threads; lanes 0-15 do a full-mask shuffle, lanes 16-31 wait at __syncthreads().
void warp_deadlock(float* out, cudaStream_t stream = nullptr);
// 32 threads all calling __shfl_sync with mask 0x0000ffff.
void wrong_mask(float* out, cudaStream_t stream = nullptr);
// 64 threads; threads >= n return before the barrier. out[t] = in[n - 1 - t] for t < n.
void early_return(const float* in, float* out, int n, cudaStream_t stream = nullptr);
// 64 threads, `count` floats of dynamic shared memory; thread 0 writes s[index] (out of bounds when
// index >= count). out[t] = s[t % count] afterwards.
void smem_write(float* out, int count, int index, cudaStream_t stream = nullptr);
// Blocks of 64 threads copy their (never written) dynamic shared memory to out.
void uninitialised_smem(float* out, int blocks, cudaStream_t stream = nullptr);
// Blocks of 64 threads; thread bad_thread of block bad_block throws (traps on the GPU) while the
// others wait at a barrier.
void throwing(int* out, int blocks, int bad_block, int bad_thread, cudaStream_t stream = nullptr);
// 32 threads; thread 7 calls __trap().
void trap(int* out, cudaStream_t stream = nullptr);

}  // namespace emu_test
