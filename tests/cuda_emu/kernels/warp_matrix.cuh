// Host wrappers for the warp-level matrix test kernels (warp_matrix.cu): mma.sync and ldmatrix
// through kernels/cuda/mma.cuh, lane by lane, composed into a tile product from shared memory,
// and the mistakes the emulator must refuse.
#pragma once

#include <cstdint>

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace emu_test {

enum class MmaKind { m16n8k8_f16, m16n8k8_bf16, m16n8k16_f16, m16n8k16_bf16 };
constexpr int mma_k(MmaKind kind) { return kind == MmaKind::m16n8k8_f16 || kind == MmaKind::m16n8k8_bf16 ? 8 : 16; }
constexpr bool mma_bf16(MmaKind kind) { return kind == MmaKind::m16n8k8_bf16 || kind == MmaKind::m16n8k16_bf16; }

// One block of 64 threads (two warps). Warp w multiplies a + w * 16 * K (16 x K, row-major 16-bit
// patterns), b + w * K * 8 (K x 8, row-major) and adds c + w * 128 (16 x 8 floats): each lane builds
// its fragments from them by the PTX ISA's layouts, issues the mma and writes its D fragment to
// lane_d[(w * 32 + lane) * 4 + i], i < 4.
void mma_fragments(MmaKind kind, const std::uint16_t* a, const std::uint16_t* b, const float* c, float* lane_d,
                   cudaStream_t stream = nullptr);

// One warp. matrices: four 8x8 matrices of 16-bit patterns (matrix i, row r, column j at
// (i * 8 + r) * 8 + j), copied to dynamic shared memory with their rows scattered and padded; lane
// 8 * i + r gives the address of row r of matrix i; lanes past 8 * num repeat lane % (8 * num)'s
// address, or give nullptr when null_unused. out[lane * 4 + i] = register i (i < num).
void ldmatrix_fragments(int num, bool trans, bool null_unused, const std::uint16_t* matrices, std::uint32_t* out,
                        cudaStream_t stream = nullptr);

// One warp: lane l writes row (l + 1) % 32 of a shared 32 x 8 tile (value (row * 8 + j) | 0x4000),
// then, after a __syncwarp() or not, ldmatrix_x4 reads row l through lane l (all four matrices).
void ldmatrix_after_writes(bool syncwarp, std::uint32_t* out, cudaStream_t stream = nullptr);

// The fused attention kernel's use: a (32 x 16) and b (16 x 16; [k][n], or [n][k] when
// b_transposed) are copied to static shared memory; four warps each compute one 16 x 8 tile of
// d = a * b (32 x 16 floats, row-major): A fragments by ldmatrix, B fragments by ldmatrix.trans
// ([k][n]) or ldmatrix ([n][k]), then m16n8k16 once or (k8) m16n8k8 twice, accumulating.
// extra_smem: dynamic shared memory asked for on top (unused), to test the per-block limit.
void mma_tile(bool k8, bool bf16, bool b_transposed, const std::uint16_t* a, const std::uint16_t* b, float* d,
              unsigned extra_smem = 0, cudaStream_t stream = nullptr);

// Mistakes (one warp of 32 threads unless noted); out receives whatever the kernel computes.
enum class MatrixBug {
  lane_returns,            // lane 31 returns before an mma the others execute
  divergent_call_sites,    // lanes 0-15 and 16-31 reach mma from different lines
  different_instructions,  // lanes 0-15 call ldmatrix_x2, lanes 16-31 ldmatrix_x4, at one line
  lane_at_barrier,         // lane 5 waits at __syncthreads() while the others are in an mma
  partial_warp,            // a block of 48 threads: its second warp has 16 lanes
  global_address,          // ldmatrix_x1 given global memory (global_rows)
  misaligned_address,      // ldmatrix_x4, lane 9's row address 2 bytes off
  past_static_array,       // ldmatrix_x1 on an 8-row static array, lane 3 gives row 8
  unused_lanes_null,       // ldmatrix_x1, lanes 8-31 give nullptr (an error on sm_75 only)
  word_array_unaligned,    // ldmatrix_x1 on `uint16_t words[8][8]` declared without _ALIGN16 (nvcc: 2-byte aligned)
  word_array_aligned,      // the same array declared with EMU_STATIC_SHARED_ALIGN16: no error
};
void matrix_bug(MatrixBug bug, const std::uint16_t* global_rows, std::uint32_t* out, cudaStream_t stream = nullptr);

}  // namespace emu_test
