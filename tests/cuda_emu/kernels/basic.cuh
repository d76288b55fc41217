// Host wrappers for the basic test kernels (basic.cu): thread/block indexing in 1-D/2-D/3-D, warp
// intrinsics, atomics, math intrinsics, dynamic shared memory and vector types.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

// One record per thread, stored at (linear block index * threads per block + linear thread index).
struct ThreadRecord {
  unsigned tx, ty, tz;
  unsigned bx, by, bz;
  int warp_lanes;   // __popc(__ballot_sync(exact mask of existing lanes, 1))
  int block_count;  // __syncthreads_count(1)
};
// Also counts, in *errors, threads that saw a blockDim/gridDim different from the launch's or a
// failed __syncthreads_and/or check.
void record_threads(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                    ThreadRecord* records, int* errors, cudaStream_t stream = nullptr);

// Warp intrinsics on one block of 64 threads (two full warps): out[case * 64 + thread] for each case
// of warp_case_names (order matters). Input values: in[t] for t < 64.
inline constexpr int kWarpThreads = 64;
inline constexpr int kWarpCases = 18;
void warp_intrinsics(const int* in, long long* out, cudaStream_t stream = nullptr);

// Ballot/any/all and __activemask on a block of `threads` (<= 64) threads, partial warps included:
// out[t * 4 + 0..3] = ballot(lane odd), any(lane == 5), all(thread < 40), activemask.
void warp_votes(int threads, unsigned* out, cudaStream_t stream = nullptr);

struct AtomicResults {
  int add_i;
  unsigned add_u;
  unsigned long long add_ull;
  float add_f;
  double add_d;
  int sub_i;
  int max_i, min_i;
  unsigned max_u, min_u;
  unsigned and_u, or_u, xor_u;
  unsigned inc_u, dec_u;
  int exch_i;
  int cas_i, cas_wins;
};
// `threads` threads (blocks of 128) hammer one AtomicResults (initialised by the caller);
// exch_old[t] receives thread t's atomicExch return value.
void atomics(int threads, AtomicResults* results, int* exch_old, cudaStream_t stream = nullptr);

// Math intrinsics of x[0..n) into out[i * kMathCases + case]; see math_case_names in the test.
inline constexpr int kMathCases = 16;
void math_intrinsics(const float* x, int n, float* out, cudaStream_t stream = nullptr);
// Integer/bit intrinsics of v[0..n) into out[i * kBitCases + case].
inline constexpr int kBitCases = 10;
void bit_intrinsics(const unsigned* v, int n, long long* out, cudaStream_t stream = nullptr);

// out[i] = in[i] * scale through float4 loads (n4 float4 elements), and a double round trip through
// dynamic shared memory (reversed within each block of 128).
void scale_float4(const float* in, float* out, int n4, float scale, cudaStream_t stream = nullptr);
void reverse_in_blocks(const double* in, double* out, int n, cudaStream_t stream = nullptr);

}  // namespace emu_test
