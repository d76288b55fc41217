// Warp-level matrix test kernels: mma.sync and ldmatrix (kernels/cuda/mma.cuh) lane by lane, a
// tile product from shared memory, and planted mistakes. Compiled by nvcc too (the matrix
// instructions need sm_75, the m16n8k16 and bfloat16 forms sm_80).
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/mma.cuh"

#include "warp_matrix.cuh"

namespace {

namespace dk = define::kernels::DEFINE_CUDA_NS;
using std::uint16_t;
using std::uint32_t;

// Every lane builds its fragments by the PTX ISA's formulas (groupID = lane >> 2,
// threadID_in_group = lane % 4), straight from the row-major matrices in global memory.
template <int K, bool BF16>
__global__ void mma_fragments_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* lane_d) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, in_group = lane & 3;
  const uint16_t* A = a + warp * 16 * K;
  const uint16_t* B = b + warp * K * 8;
  const float* C = c + warp * 16 * 8;
  uint32_t af[K / 4], bf[K / 8];
  float cf[4], d[4];
  for (int r = 0; r < K / 4; ++r) {  // A: rows groupID and groupID + 8, columns 2 * tig (+ 8)
    const int row = group + 8 * (r & 1), col = 2 * in_group + 8 * (r >> 1);
    af[r] = dk::mma_pack(A[row * K + col], A[row * K + col + 1]);
  }
  for (int r = 0; r < K / 8; ++r) {  // B: rows 2 * tig (+ 8) and the next, column groupID
    const int row = 2 * in_group + 8 * r;
    bf[r] = dk::mma_pack(B[row * 8 + group], B[(row + 1) * 8 + group]);
  }
  for (int i = 0; i < 4; ++i) cf[i] = C[(group + 8 * (i >> 1)) * 8 + 2 * in_group + (i & 1)];
  if constexpr (K == 8) {
    if constexpr (BF16) {
      dk::mma_m16n8k8_bf16_f32(d, af, bf, cf);
    } else {
      dk::mma_m16n8k8_f16_f32(d, af, bf, cf);
    }
  } else {
    if constexpr (BF16) {
      dk::mma_m16n8k16_bf16_f32(d, af, bf, cf);
    } else {
      dk::mma_m16n8k16_f16_f32(d, af, bf, cf);
    }
  }
  for (int i = 0; i < 4; ++i) lane_d[threadIdx.x * 4 + i] = d[i];
}

// Row t of the four matrices (matrix t / 8, row t % 8) lives in slot (t * 13) % 32 of a padded
// shared array: rows of a matrix need not be adjacent.
constexpr int kRowStride = 24;  // 16-bit elements: 48 bytes, a multiple of 16
__host__ __device__ constexpr int ldmatrix_slot(int t) { return (t * 13) % 32; }

__device__ void ldmatrix_by_form(int num, bool trans, uint32_t (&r)[4], const void* row) {
  uint32_t r1[1], r2[2];
  if (num == 1) {
    if (trans) {
      dk::ldmatrix_x1_trans(r1, row);
    } else {
      dk::ldmatrix_x1(r1, row);
    }
    r[0] = r1[0];
  } else if (num == 2) {
    if (trans) {
      dk::ldmatrix_x2_trans(r2, row);
    } else {
      dk::ldmatrix_x2(r2, row);
    }
    r[0] = r2[0];
    r[1] = r2[1];
  } else if (trans) {
    dk::ldmatrix_x4_trans(r, row);
  } else {
    dk::ldmatrix_x4(r, row);
  }
}

__global__ void ldmatrix_kernel(int num, bool trans, bool null_unused, const uint16_t* matrices, uint32_t* out) {
  EMU_DYNAMIC_SHARED(uint16_t, s);
  const int lane = threadIdx.x;
  for (int j = 0; j < 8; ++j) s[ldmatrix_slot(lane) * kRowStride + j] = matrices[lane * 8 + j];
  __syncthreads();
  const int rows = 8 * num;
  const void* row = lane < rows ? &s[ldmatrix_slot(lane) * kRowStride]
                                : (null_unused ? nullptr : &s[ldmatrix_slot(lane % rows) * kRowStride]);
  uint32_t r[4] = {0, 0, 0, 0};
  ldmatrix_by_form(num, trans, r, row);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

struct alignas(16) Rows32 {
  uint16_t v[32][8];
};

__global__ void ldmatrix_after_writes_kernel(bool syncwarp, uint32_t* out) {
  EMU_STATIC_SHARED(tile, Rows32);
  const int lane = threadIdx.x;
  for (int j = 0; j < 8; ++j) tile.v[lane][j] = 0;
  __syncthreads();
  const int mine = (lane + 1) % 32;
  for (int j = 0; j < 8; ++j) tile.v[mine][j] = static_cast<uint16_t>((mine * 8 + j) | 0x4000);
  if (syncwarp) __syncwarp();
  uint32_t r[4];
  dk::ldmatrix_x4(r, &tile.v[lane][0]);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

// Shared tiles with rows of 24 elements (48 bytes): each row 16-byte aligned.
struct alignas(16) TileA {
  uint16_t v[32][kRowStride];
};
struct alignas(16) TileB {
  uint16_t v[16][kRowStride];
};

template <bool K8, bool BF16, bool BTransposed>
__global__ void mma_tile_kernel(const uint16_t* a, const uint16_t* b, float* d) {
  EMU_STATIC_SHARED(as, TileA);
  EMU_STATIC_SHARED(bs, TileB);
  for (int i = threadIdx.x; i < 32 * 16; i += blockDim.x) as.v[i / 16][i % 16] = a[i];
  for (int i = threadIdx.x; i < 16 * 16; i += blockDim.x) bs.v[i / 16][i % 16] = b[i];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = 16 * (warp / 2), n0 = 8 * (warp % 2);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if constexpr (K8) {
    for (int k0 = 0; k0 < 16; k0 += 8) {
      uint32_t af[2], bf[1];
      dk::ldmatrix_x2(af, &as.v[m0 + lane % 16][k0]);  // rows 0-7, then 8-15; lanes 16-31 repeat
      if constexpr (BTransposed) {
        dk::ldmatrix_x1(bf, &bs.v[n0 + lane % 8][k0]);  // rows n, columns k
      } else {
        dk::ldmatrix_x1_trans(bf, &bs.v[k0 + lane % 8][n0]);  // rows k, columns n
      }
      if constexpr (BF16) {
        dk::mma_m16n8k8_bf16_f32(acc, af, bf, acc);
      } else {
        dk::mma_m16n8k8_f16_f32(acc, af, bf, acc);
      }
    }
  } else {
    uint32_t af[4], bf[2];
    dk::ldmatrix_x4(af, &as.v[m0 + lane % 16][8 * (lane / 16)]);
    if constexpr (BTransposed) {
      dk::ldmatrix_x2(bf, &bs.v[n0 + lane % 8][8 * ((lane / 8) % 2)]);
    } else {
      dk::ldmatrix_x2_trans(bf, &bs.v[lane % 16][n0]);
    }
    if constexpr (BF16) {
      dk::mma_m16n8k16_bf16_f32(acc, af, bf, acc);
    } else {
      dk::mma_m16n8k16_f16_f32(acc, af, bf, acc);
    }
  }
  const int group = lane >> 2, in_group = lane & 3;
  for (int i = 0; i < 4; ++i) d[(m0 + group + 8 * (i >> 1)) * 16 + n0 + 2 * in_group + (i & 1)] = acc[i];
}

struct alignas(16) Rows8 {
  uint16_t v[8][8];
};

__global__ void matrix_bug_kernel(emu_test::MatrixBug bug, const uint16_t* global_rows, uint32_t* out) {
  using emu_test::MatrixBug;
  EMU_STATIC_SHARED(tile, Rows32);
  EMU_STATIC_SHARED(small, Rows8);
  EMU_STATIC_SHARED(words, uint16_t[8][8]);
  EMU_STATIC_SHARED_ALIGN16(aligned_words, uint16_t[8][8]);
  const int lane = threadIdx.x % 32;
  if (lane < 8)
    for (int j = 0; j < 8; ++j) words[lane][j] = aligned_words[lane][j] = static_cast<uint16_t>(j);
  for (int j = 0; j < 8; ++j) tile.v[lane][j] = static_cast<uint16_t>(lane * 8 + j);
  if (lane < 8)
    for (int j = 0; j < 8; ++j) small.v[lane][j] = static_cast<uint16_t>(j);
  __syncthreads();
  const uint32_t af[4] = {0, 0, 0, 0}, bf[2] = {0, 0};
  const float c[4] = {0.f, 0.f, 0.f, 0.f};
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t r[4] = {0, 0, 0, 0};
  uint32_t r1[1] = {0}, r2[2] = {0, 0};
  switch (bug) {
    case MatrixBug::lane_returns:
      if (lane == 31) return;
      dk::mma_m16n8k16_f16_f32(d, af, bf, c);
      break;
    case MatrixBug::divergent_call_sites:
      if (lane < 16) {
        dk::mma_m16n8k16_f16_f32(d, af, bf, c);
      } else {
        dk::mma_m16n8k16_f16_f32(d, af, bf, c);
      }
      break;
    case MatrixBug::different_instructions:
      // clang-format off
      if (lane < 16) dk::ldmatrix_x2(r2, &tile.v[lane][0]); else dk::ldmatrix_x4(r, &tile.v[lane][0]);
      // clang-format on
      break;
    case MatrixBug::lane_at_barrier:
      if (lane == 5) {
        __syncthreads();
      } else {
        dk::mma_m16n8k16_f16_f32(d, af, bf, c);
      }
      break;
    case MatrixBug::partial_warp:
      dk::ldmatrix_x4(r, &tile.v[lane][0]);
      break;
    case MatrixBug::global_address:
      dk::ldmatrix_x1(r1, global_rows + 8 * (lane % 8));
      break;
    case MatrixBug::misaligned_address:
      dk::ldmatrix_x4(r, &tile.v[lane][lane == 9 ? 1 : 0]);
      break;
    case MatrixBug::past_static_array:
      dk::ldmatrix_x1(r1, lane == 3 ? &small.v[0][0] + 64 : &small.v[lane % 8][0]);
      break;
    case MatrixBug::unused_lanes_null:
      dk::ldmatrix_x1(r1, lane < 8 ? &small.v[lane][0] : nullptr);
      break;
    case MatrixBug::word_array_unaligned:
      dk::ldmatrix_x1(r1, &words[lane % 8][0]);
      break;
    case MatrixBug::word_array_aligned:
      dk::ldmatrix_x1(r1, &aligned_words[lane % 8][0]);
      break;
  }
  out[threadIdx.x * 4 + 0] = r[0] ^ r1[0] ^ r2[0];
  out[threadIdx.x * 4 + 1] = r[1] ^ r2[1];
  out[threadIdx.x * 4 + 2] = r[2] ^ __float_as_uint(d[0]);
  out[threadIdx.x * 4 + 3] = r[3];
}

}  // namespace

namespace emu_test {

void mma_fragments(MmaKind kind, const std::uint16_t* a, const std::uint16_t* b, const float* c, float* lane_d,
                   cudaStream_t stream) {
  switch (kind) {
    case MmaKind::m16n8k8_f16:
      launch(mma_fragments_kernel<8, false>, 1, 64, 0, stream, a, b, c, lane_d);
      break;
    case MmaKind::m16n8k8_bf16:
      launch(mma_fragments_kernel<8, true>, 1, 64, 0, stream, a, b, c, lane_d);
      break;
    case MmaKind::m16n8k16_f16:
      launch(mma_fragments_kernel<16, false>, 1, 64, 0, stream, a, b, c, lane_d);
      break;
    case MmaKind::m16n8k16_bf16:
      launch(mma_fragments_kernel<16, true>, 1, 64, 0, stream, a, b, c, lane_d);
      break;
  }
}

void ldmatrix_fragments(int num, bool trans, bool null_unused, const std::uint16_t* matrices, std::uint32_t* out,
                        cudaStream_t stream) {
  launch(ldmatrix_kernel, 1, 32, 32 * kRowStride * sizeof(std::uint16_t), stream, num, trans, null_unused, matrices,
         out);
}

void ldmatrix_after_writes(bool syncwarp, std::uint32_t* out, cudaStream_t stream) {
  launch(ldmatrix_after_writes_kernel, 1, 32, 0, stream, syncwarp, out);
}

void mma_tile(bool k8, bool bf16, bool b_transposed, const std::uint16_t* a, const std::uint16_t* b, float* d,
              unsigned extra_smem, cudaStream_t stream) {
  const int form = (k8 ? 4 : 0) + (bf16 ? 2 : 0) + (b_transposed ? 1 : 0);
  switch (form) {
    case 0:
      launch(mma_tile_kernel<false, false, false>, 1, 128, extra_smem, stream, a, b, d);
      break;
    case 1:
      launch(mma_tile_kernel<false, false, true>, 1, 128, extra_smem, stream, a, b, d);
      break;
    case 2:
      launch(mma_tile_kernel<false, true, false>, 1, 128, extra_smem, stream, a, b, d);
      break;
    case 3:
      launch(mma_tile_kernel<false, true, true>, 1, 128, extra_smem, stream, a, b, d);
      break;
    case 4:
      launch(mma_tile_kernel<true, false, false>, 1, 128, extra_smem, stream, a, b, d);
      break;
    case 5:
      launch(mma_tile_kernel<true, false, true>, 1, 128, extra_smem, stream, a, b, d);
      break;
    case 6:
      launch(mma_tile_kernel<true, true, false>, 1, 128, extra_smem, stream, a, b, d);
      break;
    default:
      launch(mma_tile_kernel<true, true, true>, 1, 128, extra_smem, stream, a, b, d);
      break;
  }
}

void matrix_bug(MatrixBug bug, const std::uint16_t* global_rows, std::uint32_t* out, cudaStream_t stream) {
  launch(matrix_bug_kernel, 1, bug == MatrixBug::partial_warp ? 48 : 32, 0, stream, bug, global_rows, out);
}

}  // namespace emu_test
