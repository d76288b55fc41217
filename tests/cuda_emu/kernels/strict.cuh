// Host wrappers for the planted bugs that the stricter emulator must catch (strict.cu): static
// shared-memory overflow, a missing __syncwarp, a race between blocks, read-modify-write races,
// over-limit shared memory, a block larger than its kernel's __launch_bounds__, a divergent shuffle and
// a shuffle reading outside its mask.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

// Lines of the two shuffles of divergent_shuffle_kernel (checked by static_assert there).
inline constexpr int kShuffleLineA = 68;
inline constexpr int kShuffleLineB = 70;

// out[0..6): the addresses modulo 16 of six static shared arrays (unsigned char, unsigned short,
// float, double, float4, and unsigned short declared _ALIGN16).
void static_placement(unsigned* out, cudaStream_t stream = nullptr);
// 32 threads; two static shared arrays of 32 floats. Thread t writes first[t]; thread 0 then writes
// element `index` of `first` through a pointer (past its end when index >= 32). out[t] = first[t].
void static_smem_write(float* out, int index, cudaStream_t stream = nullptr);
// One warp: out[lane] = in[(lane + 1) % 32] through a static shared array; with_syncwarp decides
// whether the lanes synchronise between writing and reading it.
void warp_exchange(const float* in, float* out, bool with_syncwarp, cudaStream_t stream = nullptr);
// `blocks` blocks of 32 threads: block b sets flags[b] = flags[b - 1] + 1 (flags[0] = 1), reading
// another block's result without any grid-wide synchronisation.
void chain_blocks(int* flags, int blocks, cudaStream_t stream = nullptr);
// One block of `threads` threads each adding 1 to *counter in global memory, atomically or not.
void count_global(int* counter, int threads, bool atomic, cudaStream_t stream = nullptr);
// One block of `threads` threads each adding 1 to a shared counter, atomically or not; *out = total.
void count_shared(int* out, int threads, bool atomic, cudaStream_t stream = nullptr);
// One block of 32 threads with `static_floats` floats of static shared memory (8192 or 64) and
// `dynamic_bytes` of dynamic shared memory; out[t] = t.
void shared_budget(float* out, bool large_static, unsigned dynamic_bytes, cudaStream_t stream = nullptr);
// cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) of shared_budget's kernel.
int shared_budget_optin(int bytes);
// One block of `threads` threads of a kernel declared __launch_bounds__(64): out[t] = t.
void bounded(int* out, int threads, cudaStream_t stream = nullptr);
// One warp: even lanes shuffle at one call site, odd lanes at another.
void divergent_shuffle(float* out, cudaStream_t stream = nullptr);
// One warp: lanes 0-15 shuffle with mask 0x0000ffff from lane 20.
void shuffle_outside_mask(float* out, cudaStream_t stream = nullptr);
// Whether strict.cu was compiled with the memory-access instrumentation of the race schedule (not
// in the sanitizer build).
bool race_instrumented();

}  // namespace emu_test
