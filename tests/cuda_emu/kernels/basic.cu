// Basic test kernels: indexing over 1-D/2-D/3-D grids and blocks (including partial warps), warp
// intrinsics, atomics, math and bit intrinsics, vector types, dynamic shared memory. Compiled by nvcc
// and by g++ against the emulator.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_compat.cuh"

#include "basic.cuh"

namespace {

__global__ void record_kernel(dim3 grid, dim3 block, emu_test::ThreadRecord* records, int* errors) {
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned warp = t / 32;
  const unsigned lanes_here = threads - warp * 32 < 32 ? threads - warp * 32 : 32;
  const unsigned mask = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1u;

  const unsigned ballot = __ballot_sync(mask, 1);
  const int count = __syncthreads_count(1);
  const int all_ok = __syncthreads_and(t < threads);
  const int one_is_last = __syncthreads_or(t == threads - 1);
  const int none = __syncthreads_or(0);
  if (blockDim.x != block.x || blockDim.y != block.y || blockDim.z != block.z || gridDim.x != grid.x ||
      gridDim.y != grid.y || gridDim.z != grid.z || !all_ok || !one_is_last || none)
    atomicAdd(errors, 1);

  emu_test::ThreadRecord r;
  r.tx = threadIdx.x;
  r.ty = threadIdx.y;
  r.tz = threadIdx.z;
  r.bx = blockIdx.x;
  r.by = blockIdx.y;
  r.bz = blockIdx.z;
  r.warp_lanes = __popc(ballot);
  r.block_count = count;
  records[std::size_t(b) * threads + t] = r;
}

__global__ void warp_kernel(const int* in, long long* out) {
  constexpr unsigned full = 0xffffffffu;
  const int t = threadIdx.x, lane = t % 32;
  const int v = in[t];
  long long* o = out + t;
  int c = 0;
  auto put = [&](long long value) {
    o[c * emu_test::kWarpThreads] = value;
    ++c;
  };
  put(__shfl_sync(full, v, (lane * 7 + 3) % 32));
  put(__shfl_sync(full, v, lane + 5, 8));  // source lane taken modulo the width
  put(__shfl_sync(full, v, 0));
  put(__shfl_up_sync(full, v, 3));
  put(__shfl_up_sync(full, v, 2, 8));
  put(__shfl_down_sync(full, v, 5));
  put(__shfl_down_sync(full, v, 1, 16));
  put(__shfl_xor_sync(full, v, 1));
  put(__shfl_xor_sync(full, v, 16));
  put(__shfl_xor_sync(full, v, 4, 8));
  put(__shfl_xor_sync(full, v, 16, 16));  // only later groups are out of reach
  put(__ballot_sync(full, v % 3 == 0));
  put(__any_sync(full, v == 7));
  put(__all_sync(full, v < 40));
  // Two disjoint halves of a warp exchanging concurrently under their own masks.
  if (lane < 16) {
    put(__shfl_sync(0x0000ffffu, v, 15 - lane));
  } else {
    put(__shfl_sync(0xffff0000u, v, 47 - lane));
  }
  // 8-byte values.
  const double d = v * 0.5;
  put(static_cast<long long>(__shfl_down_sync(full, d, 2) * 2.0));
  const long long big = (static_cast<long long>(v) << 40) + v;
  put(__shfl_sync(full, big, 31 - lane));
  __syncwarp();
  put(static_cast<long long>(__shfl_up_sync(full, static_cast<unsigned>(v) * 3u, 1)));
}

__global__ void votes_kernel(unsigned* out) {
  const int t = threadIdx.x, lane = t % 32;
  const int threads = blockDim.x;
  const int lanes_here = threads - (t / 32) * 32 < 32 ? threads - (t / 32) * 32 : 32;
  const unsigned mask = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1u;
  out[t * 4 + 0] = __ballot_sync(mask, lane % 2 == 1);
  out[t * 4 + 1] = __any_sync(mask, lane == 5);
  out[t * 4 + 2] = __all_sync(mask, t < 40);
  out[t * 4 + 3] = __activemask();
}

__global__ void atomics_kernel(int threads, emu_test::AtomicResults* r, int* exch_old) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  atomicAdd(&r->add_i, 2);
  atomicAdd(&r->add_u, 1);
  atomicAdd(&r->add_ull, 1ull << 33);
  atomicAdd(&r->add_f, 0.5f);
  atomicAdd(&r->add_d, 0.25);
  atomicSub(&r->sub_i, 3);
  atomicMax(&r->max_i, t - 100);
  atomicMin(&r->min_i, 50 - t);
  atomicMax(&r->max_u, unsigned(t) * 7u);
  atomicMin(&r->min_u, unsigned(t) + 5u);
  atomicAnd(&r->and_u, ~(1u << (t % 32)));
  atomicOr(&r->or_u, 1u << (t % 32));
  atomicXor(&r->xor_u, 1u << (t % 7));
  atomicInc(&r->inc_u, 9u);
  atomicDec(&r->dec_u, 9u);
  __threadfence_block();
  __threadfence();
  __threadfence_system();
  exch_old[t] = atomicExch(&r->exch_i, t);
  if (atomicCAS(&r->cas_i, 0, t + 1) == 0) atomicAdd(&r->cas_wins, 1);
}

__global__ void math_kernel(const float* __restrict__ x, int n, float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = __ldg(&x[i]);
  float* o = out + std::size_t(i) * emu_test::kMathCases;
  o[0] = __expf(v);
  o[1] = __logf(fabsf(v) + 1.f);
  o[2] = __fdividef(v, 3.f);
  o[3] = rsqrtf(fabsf(v) + 0.5f);
  o[4] = __fmaf_rn(v, 2.f, 1.f);
  o[5] = __int_as_float(__float_as_int(v));
  o[6] = fminf(v, 0.25f);
  o[7] = fmaxf(v, 0.25f);
  o[8] = __saturatef(v);
  o[9] = tanhf(v);
  o[10] = __powf(fabsf(v) + 1.f, 1.5f);
  o[11] = __sinf(v) + __cosf(v);
  o[12] = min(v, 0.5f) + max(-1, static_cast<int>(v * 4.f));
  o[13] = sqrtf(fabsf(v));
  o[14] = expf(-v * v);
  o[15] = static_cast<float>(__float_as_uint(v) >> 31);
}

__global__ void bit_kernel(const unsigned* __restrict__ v, int n, long long* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned x = v[i];
  long long* o = out + std::size_t(i) * emu_test::kBitCases;
  o[0] = __popc(x);
  o[1] = __clz(static_cast<int>(x));
  o[2] = __ffs(static_cast<int>(x));
  o[3] = __brev(x);
  o[4] = __popcll((static_cast<unsigned long long>(x) << 32) | x);
  o[5] = __clzll(static_cast<long long>(x));
  o[6] = __umulhi(x, 0x9e3779b9u);
  o[7] = static_cast<long long>(__brevll(x) >> 32);
  o[8] = __ffsll(static_cast<long long>(x) << 20);
  o[9] = max(x, 1000u) - min(x, 1000u);
}

__global__ void scale_float4_kernel(const float4* __restrict__ in, float4* __restrict__ out, int n4, float scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const float4 v = __ldg(&in[i]);
  out[i] = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
}

__global__ void reverse_kernel(const double* __restrict__ in, double* __restrict__ out, int n) {
  EMU_DYNAMIC_SHARED(double, buf);
  const int base = blockIdx.x * blockDim.x;
  const int t = threadIdx.x;
  const int count = n - base < int(blockDim.x) ? n - base : int(blockDim.x);
  if (t < count) buf[t] = in[base + t];
  __syncthreads();
  if (t < count) out[base + t] = buf[count - 1 - t];
}

}  // namespace

namespace emu_test {

void record_threads(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                    ThreadRecord* records, int* errors, cudaStream_t stream) {
  const dim3 grid(gx, gy, gz), block(bx, by, bz);
  launch(record_kernel, grid, block, 0, stream, grid, block, records, errors);
}

void warp_intrinsics(const int* in, long long* out, cudaStream_t stream) {
  launch(warp_kernel, 1, kWarpThreads, 0, stream, in, out);
}

void warp_votes(int threads, unsigned* out, cudaStream_t stream) { launch(votes_kernel, 1, threads, 0, stream, out); }

void atomics(int threads, AtomicResults* results, int* exch_old, cudaStream_t stream) {
  launch(atomics_kernel, (threads + 127) / 128, 128, 0, stream, threads, results, exch_old);
}

void math_intrinsics(const float* x, int n, float* out, cudaStream_t stream) {
  launch(math_kernel, (n + 63) / 64, 64, 0, stream, x, n, out);
}

void bit_intrinsics(const unsigned* v, int n, long long* out, cudaStream_t stream) {
  launch(bit_kernel, (n + 63) / 64, 64, 0, stream, v, n, out);
}

void scale_float4(const float* in, float* out, int n4, float scale, cudaStream_t stream) {
  launch(scale_float4_kernel, (n4 + 127) / 128, 128, 0, stream, reinterpret_cast<const float4*>(in),
         reinterpret_cast<float4*>(out), n4, scale);
}

void reverse_in_blocks(const double* in, double* out, int n, cudaStream_t stream) {
  launch(reverse_kernel, (n + 127) / 128, 128, 128 * sizeof(double), stream, in, out, n);
}

}  // namespace emu_test
