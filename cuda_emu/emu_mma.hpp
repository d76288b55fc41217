// CUDA execution emulator: the warp-level matrix instructions that kernels/cuda/mma.cuh wraps,
// mma.sync (m16n8k8 and m16n8k16, 16-bit inputs, float accumulators) and ldmatrix (m8n8, .b16,
// x1 / x2 / x4, with and without .trans), as warp-wide collectives with the PTX ISA's fragment
// layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8", "... for mma.m16n8k16 with floating point
// type", "Warp-level matrix load instruction: ldmatrix").
//
//  * Each is a Runner::warp_collective: every one of the 32 lanes of the warp must execute the same
//    instruction from the same call site (.sync.aligned). A partial warp, a lane that has returned
//    or returns while the others wait, lanes at different call sites or in different instructions,
//    or a lane that never comes (a deadlock) fail the launch with the emulator's usual messages.
//  * The emulated architecture (CUDA_EMU_ARCH) must have the instruction: ldmatrix and
//    mma.m16n8k8 with .f16 need sm_75, mma.m16n8k16 and the .bf16 forms sm_80. An older one fails
//    the launch naming the instruction, its call site and both architectures.
//  * mma: the products of two 16-bit values are exact in float; each element of D is
//    C[i][j] + A[i][0] * B[0][j] + ... + A[i][K-1] * B[K-1][j], accumulated in float32 in that order,
//    k ascending, one rounding (fmaf) per step. The hardware's accumulation order and intermediate
//    precision are unspecified (tensor cores add several products at a time, with their own
//    alignment and rounding), so a kernel's results may differ from a GPU's in the last bits, as
//    with any change of summation order; tests must allow for that.
//  * ldmatrix: lanes 0-7 (.x1), 0-15 (.x2) or 0-31 (.x4) each give the address of one 16-byte row
//    (lane 8 * i + r: row r of matrix i). Each such lane reads its row itself, before it waits for
//    the others, through an ordinary (instrumented) load: the race schedule may switch threads
//    there, the profile records it as the lane's 16-byte shared-memory read, and a row that another
//    lane writes without a __syncwarp() / __syncthreads() in between is read as it is at that moment.
//    An address must be 16-byte aligned and its 16 bytes must lie inside the launch's dynamic shared
//    memory or inside one static shared array (EMU_STATIC_SHARED); anything else fails the launch.
//    On sm_75 and older the PTX ISA requires every lane's address to be valid, even those whose
//    row is unused (.x1, .x2); the emulator checks them too when it emulates sm_75.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/float16.h"
#include "cuda_emu/emu_device.hpp"
#include "cuda_emu/emu_runner.hpp"

namespace cuda_emu::detail {

enum class MmaInput { f16, bf16 };

// One lane's operands and result; lives on the lane's stack while it waits in the collective.
struct MmaLane {
  std::uint32_t a[4];  // K / 4 registers of two 16-bit elements each (low half: the lower index)
  std::uint32_t b[2];  // K / 8 registers
  float c[4];
  float d[4];
};

inline float mma_input(std::uint16_t bits, MmaInput type) {
  return type == MmaInput::f16 ? static_cast<float>(define::Half::from_bits(bits))
                               : static_cast<float>(define::BFloat16::from_bits(bits));
}

// The fragment layouts, with groupID = lane >> 2 and threadID_in_group = lane % 4:
//   A (16 x K, row): register r holds (row, col) and (row, col + 1) with
//                    row = groupID + 8 * (r & 1), col = 2 * threadID_in_group + 8 * (r >> 1);
//   B (K x 8, col):  register r holds (row, col) and (row + 1, col) with
//                    row = 2 * threadID_in_group + 8 * r, col = groupID;
//   C, D (16 x 8):   element i is (groupID + 8 * (i >> 1), 2 * threadID_in_group + (i & 1)).
template <int K, MmaInput Type>
CUDA_EMU_UNINSTRUMENTED void mma_compute(void* const* lanes) {
  static_assert(K == 8 || K == 16);
  float a[16][K], b[K][8];
  for (int l = 0; l < 32; ++l) {
    const auto* in = static_cast<const MmaLane*>(lanes[l]);
    const int group = l >> 2, in_group = l & 3;
    for (int r = 0; r < K / 4; ++r) {
      const int row = group + 8 * (r & 1), col = 2 * in_group + 8 * (r >> 1);
      a[row][col] = mma_input(static_cast<std::uint16_t>(in->a[r]), Type);
      a[row][col + 1] = mma_input(static_cast<std::uint16_t>(in->a[r] >> 16), Type);
    }
    for (int r = 0; r < K / 8; ++r) {
      const int row = 2 * in_group + 8 * r;
      b[row][group] = mma_input(static_cast<std::uint16_t>(in->b[r]), Type);
      b[row + 1][group] = mma_input(static_cast<std::uint16_t>(in->b[r] >> 16), Type);
    }
  }
  for (int l = 0; l < 32; ++l) {
    auto* lane = static_cast<MmaLane*>(lanes[l]);
    const int group = l >> 2, in_group = l & 3;
    for (int i = 0; i < 4; ++i) {
      const int row = group + 8 * (i >> 1), col = 2 * in_group + (i & 1);
      float acc = lane->c[i];
      for (int k = 0; k < K; ++k) acc = std::fma(a[row][k], b[k][col], acc);
      lane->d[i] = acc;
    }
  }
}

// Fails the launch unless the emulated architecture has `op`.
CUDA_EMU_UNINSTRUMENTED inline void require_arch(Runner& r, const char* op, int min_arch, const char* file, int line) {
  if (r.arch() >= min_arch) return;
  std::string message =
      cat(op, " (", call_site(file, line), ") needs sm_", min_arch, " or newer; the emulated device is sm_", r.arch(),
          " (CUDA_EMU_ARCH), where a kernel must not issue it");
  r.fail(std::move(message));
}

template <int K, MmaInput Type>
CUDA_EMU_UNINSTRUMENTED void mma_sync(const char* op, int min_arch, float* d, const std::uint32_t* a,
                                      const std::uint32_t* b, const float* c, const char* file, int line) {
  Runner& r = current_runner(op);
  require_arch(r, op, min_arch, file, line);
  MmaLane lane{};
  for (int i = 0; i < K / 4; ++i) lane.a[i] = a[i];
  for (int i = 0; i < K / 8; ++i) lane.b[i] = b[i];
  for (int i = 0; i < 4; ++i) lane.c[i] = c[i];  // copied first: d may be c
  r.warp_collective(op, &lane, &mma_compute<K, Type>, file, line);
  for (int i = 0; i < 4; ++i) d[i] = lane.d[i];
  r.count_tensor_flops(2.0 * 16 * 8 * K / 32);  // each lane its share of the warp's 16 x 8 x K product
}

struct LdmatrixLane {
  std::uint32_t row[4];  // the 16-byte row this lane's address names (lanes that give one)
  std::uint32_t out[4];
};

// Element `col` (0-7) of a row of eight 16-bit values.
CUDA_EMU_UNINSTRUMENTED inline std::uint32_t row_element(const LdmatrixLane* lane, int col) {
  return (lane->row[col >> 1] >> (16 * (col & 1))) & 0xFFFFu;
}

// Lane l's register i holds two elements of matrix i (whose row r came from lane 8 * i + r), with
// groupID = l >> 2 and threadID_in_group = l % 4: without .trans (row groupID, columns
// 2 * threadID_in_group and the next), with .trans the same places of the transposed matrix
// (rows 2 * threadID_in_group and the next, column groupID).
template <int Num, bool Trans>
CUDA_EMU_UNINSTRUMENTED void ldmatrix_compute(void* const* lanes) {
  for (int l = 0; l < 32; ++l) {
    auto* lane = static_cast<LdmatrixLane*>(lanes[l]);
    const int group = l >> 2, in_group = l & 3;
    for (int i = 0; i < Num; ++i) {
      if constexpr (Trans) {
        const auto* lo = static_cast<const LdmatrixLane*>(lanes[8 * i + 2 * in_group]);
        const auto* hi = static_cast<const LdmatrixLane*>(lanes[8 * i + 2 * in_group + 1]);
        lane->out[i] = row_element(lo, group) | (row_element(hi, group) << 16);
      } else {
        lane->out[i] = static_cast<const LdmatrixLane*>(lanes[8 * i + group])->row[in_group];
      }
    }
  }
}

template <int Num, bool Trans>
constexpr const char* ldmatrix_name() {
  if constexpr (Num == 1) {
    return Trans ? "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16" : "ldmatrix.sync.aligned.m8n8.x1.shared.b16";
  } else if constexpr (Num == 2) {
    return Trans ? "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" : "ldmatrix.sync.aligned.m8n8.x2.shared.b16";
  } else {
    return Trans ? "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" : "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
  }
}

// Fails the launch unless `row` is a 16-byte aligned address of 16 bytes of shared memory. `used`:
// the lane's row is one of the matrices' (otherwise only sm_75 and older need a valid address).
inline void check_ldmatrix_row(Runner& r, const char* op, const void* row, bool used, const char* file, int line) {
  const char* why = used ? "" : " (its row is not used, but on sm_75 and older every lane's address must be valid)";
  std::string message;
  if (!row) {
    message = cat(op, " (", call_site(file, line), "): lane ", r.lane(), " (", r.current_thread(),
                  ") gives a null row address", why);
  } else if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0) {
    message = cat(op, " (", call_site(file, line), "): lane ", r.lane(), " (", r.current_thread(),
                  ") gives a row address that is not 16-byte aligned", why);
  } else if (std::string problem = r.shared_span_problem(row, 16); !problem.empty()) {
    message = cat(op, " (", call_site(file, line), "): lane ", r.lane(), " (", r.current_thread(),
                  ") gives a row address whose 16 bytes are not inside one shared array: ", problem, why);
  }
  if (!message.empty()) r.fail(std::move(message));
}

template <int Num, bool Trans>
void ldmatrix(std::uint32_t* out, const void* row, const char* file, int line) {
  constexpr const char* op = ldmatrix_name<Num, Trans>();
  Runner& r = current_runner(op);
  require_arch(r, op, 75, file, line);
  const bool used = r.lane() < 8 * Num;
  LdmatrixLane lane{};
  if (used || r.arch() <= 75) check_ldmatrix_row(r, op, row, used, file, line);
  if (used) std::memcpy(lane.row, row, sizeof lane.row);
  r.warp_collective(op, &lane, &ldmatrix_compute<Num, Trans>, file, line);
  for (int i = 0; i < Num; ++i) out[i] = lane.out[i];
}

}  // namespace cuda_emu::detail

// What kernels/cuda/mma.cuh calls in the emulator build (file and line: the kernel's call site).
namespace cuda_emu {

inline void mma_m16n8k8_f16_f32(float* d, const std::uint32_t* a, const std::uint32_t* b, const float* c,
                                const char* file, int line) {
  detail::mma_sync<8, detail::MmaInput::f16>("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 75, d, a, b, c, file,
                                             line);
}
inline void mma_m16n8k8_bf16_f32(float* d, const std::uint32_t* a, const std::uint32_t* b, const float* c,
                                 const char* file, int line) {
  detail::mma_sync<8, detail::MmaInput::bf16>("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", 80, d, a, b, c,
                                              file, line);
}
inline void mma_m16n8k16_f16_f32(float* d, const std::uint32_t* a, const std::uint32_t* b, const float* c,
                                 const char* file, int line) {
  detail::mma_sync<16, detail::MmaInput::f16>("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 80, d, a, b, c, file,
                                              line);
}
inline void mma_m16n8k16_bf16_f32(float* d, const std::uint32_t* a, const std::uint32_t* b, const float* c,
                                  const char* file, int line) {
  detail::mma_sync<16, detail::MmaInput::bf16>("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 80, d, a, b, c,
                                               file, line);
}
// ldmatrix.sync.aligned.m8n8.x<Num>[.trans].shared.b16: out[0, Num) receive the lane's registers.
template <int Num, bool Trans>
inline void ldmatrix_m8n8_b16(std::uint32_t* out, const void* row, const char* file, int line) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "ldmatrix loads 1, 2 or 4 matrices");
  detail::ldmatrix<Num, Trans>(out, row, file, line);
}

}  // namespace cuda_emu
