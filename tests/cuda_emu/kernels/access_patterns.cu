// Kernels with known memory behaviour, for the profiling mode's tests (emu_profile.hpp): what a
// GPU's memory system does with each is in the host wrappers' comments (access_patterns.cuh).
// Compiled by nvcc and by g++ against the emulator.
#include "kernels/cuda/cuda_compat.cuh"

#include "access_patterns.cuh"

namespace {

__global__ void strided_copy_kernel(const float* x, float* y, int n, int stride) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = x[i * stride];
}

__global__ void broadcast_copy_kernel(const float* x, float* y, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = x[0];
}

__global__ void vector_copy_kernel(const float4* x, float4* y, int n4) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n4) y[i] = x[i];
}

__global__ void partial_warp_copy_kernel(const float* x, float* y, int active) {
  const int i = int(threadIdx.x);
  if (i % 32 < active) y[i] = x[i];
}

__global__ void shared_stride_kernel(float* y, int stride) {
  EMU_STATIC_SHARED(s, float[32 * 32]);
  const int lane = int(threadIdx.x);
  s[lane * stride] = float(lane);
  __syncthreads();
  y[lane] = s[lane * stride];
}

__global__ void four_loads_kernel(const float* x, float* y, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = x[i] + x[i + n] + x[i + 2 * n] + x[i + 3 * n];
}

__global__ void looped_loads_kernel(const float* x, float* y, int n, int reps) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  float a = 0, b = 0;
  for (int k = 0; k < reps; ++k) a += x[i + k * n];
  for (int k = 0; k < reps; ++k) b += x[i + k * n] * 2.0f;
  y[i] = a + b;
}

// One warp, `rows` rows of 32 floats: row r's lanes below r + 1 (at most 32) copy their element,
// then the warp shuffles (converges) before the next row.
__global__ void ragged_rows_kernel(const float* x, float* y, int rows, bool converge) {
  const int lane = int(threadIdx.x);
  float carry = 0.0f;
  for (int r = 0; r < rows; ++r) {
    if (lane <= r) y[r * 32 + lane] = x[r * 32 + lane];
    if (converge) carry += __shfl_sync(0xffffffffu, carry, 0);
  }
  if (carry != 0.0f) y[0] = carry;  // never: keeps the shuffle
}

}  // namespace

namespace emu_test {

void strided_copy(const float* x, float* y, int n, int stride, cudaStream_t stream) {
  launch(strided_copy_kernel, dim3((n + 255) / 256), dim3(256), 0, stream, x, y, n, stride);
}
void broadcast_copy(const float* x, float* y, int n, cudaStream_t stream) {
  launch(broadcast_copy_kernel, dim3((n + 255) / 256), dim3(256), 0, stream, x, y, n);
}
void vector_copy(const float* x, float* y, int n4, cudaStream_t stream) {
  launch(vector_copy_kernel, dim3((n4 + 255) / 256), dim3(256), 0, stream, reinterpret_cast<const float4*>(x),
         reinterpret_cast<float4*>(y), n4);
}
void partial_warp_copy(const float* x, float* y, int active, cudaStream_t stream) {
  launch(partial_warp_copy_kernel, dim3(1), dim3(64), 0, stream, x, y, active);
}
void four_loads(const float* x, float* y, int n, cudaStream_t stream) {
  launch(four_loads_kernel, dim3((n + 255) / 256), dim3(256), 0, stream, x, y, n);
}
void looped_loads(const float* x, float* y, int n, int reps, cudaStream_t stream) {
  launch(looped_loads_kernel, dim3((n + 255) / 256), dim3(256), 0, stream, x, y, n, reps);
}
void ragged_rows(const float* x, float* y, int rows, bool converge, cudaStream_t stream) {
  launch(ragged_rows_kernel, dim3(1), dim3(32), 0, stream, x, y, rows, converge);
}
void shared_stride(float* y, int stride, cudaStream_t stream) {
  launch(shared_stride_kernel, dim3(1), dim3(32), 0, stream, y, stride);
}

}  // namespace emu_test
