// Host wrappers for the asynchronous-copy test kernels (async_copy.cu): cp.async through
// kernels/cuda/async_copy.cuh into shared memory, its groups and waits, and the mistakes the emulator
// must refuse.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

// One block of `threads` threads: thread t copies src[4t, 4t + 4) into a shared tile with one
// 16-byte copy (zeros for t >= valid: src_bytes 0), commits, waits, and after a barrier writes the
// tile's slot (t + 1) % threads to out[4t, 4t + 4): another thread's copy.
void async_tile(const float* src, int valid, float* out, int threads, cudaStream_t stream = nullptr);

// One thread: copies src[0..4) (group 1) and src[4..8) (group 2) to shared memory, then reads both
// after wait_group 1 (out[0..8)) and again after wait_group 0 (out[8..16)).
void async_groups(const float* src, float* out, cudaStream_t stream = nullptr);

// One warp: thread t copies src[128 r + 4 t, + 4) for r < rows into a shared tile, in a loop, with a
// wait after each copy (wait_each) or one wait after the loop; out[t] = the sum of its copies' first
// floats. For the profile's loads in flight: rows copies at once, or one at a time.
void async_rows(const float* src, int rows, bool wait_each, float* out, cudaStream_t stream = nullptr);

enum class AsyncBug {
  global_destination,  // the destination is global memory
  misaligned_source,   // the source is 4 bytes past a 16-byte boundary
  shared_source,       // the source is shared memory
};
// One warp making the mistake; out receives whatever it copies.
void async_bug(AsyncBug bug, const float* src, float* out, cudaStream_t stream = nullptr);

}  // namespace emu_test
