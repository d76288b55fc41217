// Host wrappers for the access-pattern kernels (access_patterns.cu) whose memory behaviour the
// profiling mode's tests know in advance: coalesced and strided global loads, a broadcast, 16-byte
// loads, divergent lanes, and shared-memory accesses with a chosen bank conflict.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

// y[i] = x[i * stride] for i < n; blocks of 256 threads.
void strided_copy(const float* x, float* y, int n, int stride, cudaStream_t stream = nullptr);
// y[i] = x[0] for i < n (every lane reads one word).
void broadcast_copy(const float* x, float* y, int n, cudaStream_t stream = nullptr);
// y[i] = x[i] as float4 for i < n4 (16 bytes a lane).
void vector_copy(const float* x, float* y, int n4, cudaStream_t stream = nullptr);
// One block of 64 threads; only lanes below `active` of each warp copy y[i] = x[i].
void partial_warp_copy(const float* x, float* y, int active, cudaStream_t stream = nullptr);
// One warp, rows of 32 floats: in row r lanes 0..r copy y[r][lane] = x[r][lane]; with `converge` a
// full-warp shuffle after each row. A GPU issues one load and one store per row either way.
void ragged_rows(const float* x, float* y, int rows, bool converge, cudaStream_t stream = nullptr);
// One block of 32 threads: s[lane * stride] = lane, then y[lane] = s[lane * stride] (shared memory
// of 32 * stride floats, stride at most 32).
void shared_stride(float* y, int stride, cudaStream_t stream = nullptr);

// y[i] = x[i] + x[i + n] + x[i + 2n] + x[i + 3n] for i < n: four independent loads a thread.
void four_loads(const float* x, float* y, int n, cudaStream_t stream = nullptr);
// y[i] = sum over k < reps of x[i + k n], one load a loop iteration, then the same again in a
// second loop: loads that wait for nothing, but one at a time per loop.
void looped_loads(const float* x, float* y, int n, int reps, cudaStream_t stream = nullptr);

}  // namespace emu_test
