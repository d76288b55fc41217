// Fast CPU LSTM recurrence. The step's recurrent GEMM and its cell are fused, with w_hh packed
// once per call instead of once per step:
//
// Why not a GEMM library call per step: with a small batch (B = 20) the step GEMM
// [B, H] x [H, 4H] is dominated by Eigen packing w_hh again at every step (AWD-LSTM's 1150-unit
// layer: 21 MB packed per step, ~50 GFLOP/s on one core against ~135 for the input projection).
// w_hh does not change across the T steps, so it is packed once per call into panels laid out
// exactly as a register-tiled micro-kernel streams them, and every step reuses them. The
// micro-kernel is written with Eigen's packet primitives (Eigen::internal::pload / pmadd / pset1),
// so it follows the SIMD width the build targets. Measured on the 2-core AVX-512 build machine
// (float32, T = 35, B = 20, one thread, best of 10, machine shared with other jobs): the whole
// forward recurrence (packing, step GEMMs, cells) at 120-135 GFLOP/s for H = 1150 and 135-157 for
// H = 200, against ~50 GFLOP/s for the Eigen step GEMM alone at H = 1150; packing w_hh costs
// about as much as 3-5 steps (it streams the 21 MB weight from memory once).
//
// Forward panels: panel p holds the w_hh rows of hidden units [p*L, p*L + L) for all four gates
// (L = SIMD lanes, 16 floats with AVX-512): element (k, q*L + u) = w_hh[q*H + p*L + u, k], zero
// past H. A panel's product with h_{t-1} thus yields the four gate pre-activations of L whole
// units, and the micro-kernel (kTileRows batch rows x 4 packets of accumulators, one broadcast of
// h per row and depth) adds them onto gates_t. Backward panels: a panel holds up to 4 packets of
// columns of w_hh, [j0, j0 + qL) (element (r, v) = w_hh[r, j0 + v]), so the same micro-kernel,
// q packets wide, gives dh_rec = dgates_{t+1} w_hh for qL units.
//
// Threads split the hidden units (by packets of L units), and each thread packs its own panels and
// then, at every step, runs the GEMM for its units followed at once by the cell for the same
// units: the cell needs only those units' gates, so the only synchronisation is one barrier per
// step (the next step's GEMM reads every unit of h_t, or of dgates_t; a StepBarrier, which spins
// briefly before it sleeps, see kernels/cpu/step_barrier.h). The team spans all T steps. Every
// element is computed by the same code in the same order whichever thread owns it, so results are
// bit-identical for any thread count; small problems (under kParallelMacs multiply-adds per step)
// run on one thread, where a team would cost more than it saves.
//
// Reading what the other threads wrote: each step's GEMM reads the whole of the previous step's
// output (h_{t-1}, or dgates_{t+1} backward), half of it written by the other thread's cell, so
// those cache lines come from the other core. Read in place by the micro-kernel (broadcasts from
// 5 rows at a time), the transfers stalled it; a plain copy into a per-thread buffer first (a
// sequential read the prefetchers stream) and the GEMM from there is faster where a step is short
// (docs/results.md). For long steps the GEMM hides the transfers and the copy takes L1 and L2 from
// the panels, so the copies are made only up to kCopyMacs multiply-adds a step.
//
// The cell: per batch row, one packet of units at a time, its four gates, the new cell and h in
// registers (Eigen's packet activations: logistic and tanh, rational approximations within a
// couple of ulps for float), one read and one write of each buffer. Why not Eigen array
// expressions over the thread's slice of a row: each expression is its own loop with its own
// setup, and with a thread's slice of ~100 units the setup of the seven expressions per row cost
// more than their arithmetic (a 2-thread cell at 2.3x one thread's time per unit).
//
// GCC 12 reports -Wmaybe-uninitialized and -Wuninitialized inside its own AVX-512 intrinsic headers
// when Eigen's packet math is inlined (see kernels/cpu/matmul.cpp; the -Wuninitialized one is the
// "undefined" source operand of _mm512_min_ps / _mm512_max_ps in the logistic): known false
// positives, silenced for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/cpu/lstm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>
#include <omp.h>

#include "core/dtype.h"
#include "kernels/cpu/step_barrier.h"

namespace define::kernels::cpu {
namespace {

namespace ei = Eigen::internal;

// Accumulator tile of the micro-kernel: kTileRows batch rows x 4 packets, leaving registers for
// the 4 packets of w and one broadcast (6 x 4 + 5 = 29 of AVX-512's 32; 2 x 4 + 5 of 16 elsewhere).
constexpr int kTileRows = EIGEN_ARCH_DEFAULT_NUMBER_OF_REGISTERS >= 32 ? 6 : 2;
constexpr int kPanelPackets = 4;
// Multiply-adds per step below which the recurrence runs on one thread.
constexpr std::int64_t kParallelMacs = std::int64_t{1} << 18;
// Multiply-adds per step up to which a team's threads copy the previous step's output before
// reading it (see "Reading what the other threads wrote" at the top of the file).
constexpr std::int64_t kCopyMacs = std::int64_t{1} << 23;

template <typename T>
using Packet = typename ei::packet_traits<T>::type;
template <typename T>
constexpr int kLanes = ei::unpacket_traits<Packet<T>>::size;
template <typename T>
constexpr int kPanelWidth = kPanelPackets * kLanes<T>;

// Aligned storage for packed panels, left uninitialised (every element is written by the packing).
template <typename T>
class PanelBuffer {
 public:
  explicit PanelBuffer(std::int64_t n)
      : data_(static_cast<T*>(ei::aligned_malloc(static_cast<std::size_t>(n) * sizeof(T)))) {}
  ~PanelBuffer() { ei::aligned_free(data_); }
  PanelBuffer(const PanelBuffer&) = delete;
  PanelBuffer& operator=(const PanelBuffer&) = delete;
  T* data() const { return data_; }

 private:
  T* data_;
};
template <typename T>
using AlignedBuffer = std::vector<T, Eigen::aligned_allocator<T>>;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// This thread's share [begin, end) of n items split evenly over the team (the whole range outside
// a parallel region).
struct Range {
  std::int64_t begin, end;
};
Range my_share(std::int64_t n) {
  const std::int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
  return {n * id / threads, n * (id + 1) / threads};
}

// tile[r * 4L + c] = sum_{k < depth} a[r * lda + k] * panel[k * QL + c] for r < R and c < QL, a
// panel Q packets wide (QL = Q * L), accumulated in registers in increasing k. Each output lane
// sees the same operations whatever Q is, so a column's result does not depend on the width of
// the panel it fell in.
template <typename T, int R, int Q>
void panel_product(const T* a, std::int64_t lda, std::int64_t depth, const T* panel, T* tile) {
  using P = Packet<T>;
  constexpr int L = kLanes<T>, W = kPanelWidth<T>;
  P acc[R][Q];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < Q; ++q) acc[r][q] = ei::pset1<P>(T(0));
  for (std::int64_t k = 0; k < depth; ++k) {
    const T* w = panel + k * Q * L;
    P wq[Q];
    for (int q = 0; q < Q; ++q) wq[q] = ei::pload<P>(w + q * L);
    for (int r = 0; r < R; ++r) {
      const P x = ei::pset1<P>(a[r * lda + k]);
      for (int q = 0; q < Q; ++q) acc[r][q] = ei::pmadd(x, wq[q], acc[r][q]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < Q; ++q) ei::pstore(tile + r * W + q * L, acc[r][q]);
}

// panel_product for a run-time row count 1 <= rows <= R, dispatched to the compile-time count (so
// the accumulators stay in registers).
template <typename T, int R, int Q>
void panel_product_rows(int rows, const T* a, std::int64_t lda, std::int64_t depth, const T* panel, T* tile) {
  if constexpr (R > 1) {
    if (rows < R) return panel_product_rows<T, R - 1, Q>(rows, a, lda, depth, panel, tile);
  }
  panel_product<T, R, Q>(a, lda, depth, panel, tile);
}

// panel_product for rows [0, B) in ceil(B / kTileRows) tiles of balanced sizes (B = 20 runs as
// 5 + 5 + 5 + 5, not 6 + 6 + 6 + 2: a thin tile streams the panel for few multiply-adds);
// emit(r0, R, tile) consumes each tile (rows 4L apart, the first Q packets of each written).
template <typename T, int Q, class Emit>
void panel_rows(const T* a, std::int64_t lda, std::int64_t B, std::int64_t depth, const T* panel, Emit&& emit) {
  alignas(64) T tile[kTileRows * kPanelWidth<T>];
  const std::int64_t tiles = ceil_div(B, kTileRows);
  for (std::int64_t i = 0; i < tiles; ++i) {
    const std::int64_t r0 = B * i / tiles;
    const T* ar = a + r0 * lda;
    const int R = static_cast<int>(B * (i + 1) / tiles - r0);
    panel_product_rows<T, kTileRows, Q>(R, ar, lda, depth, panel, tile);
    emit(r0, R, tile);
  }
}

// dst[i] (+)= src[i] for i < n (n <= one panel packet).
template <typename T, bool kAccumulate>
void put_packet(T* dst, const T* src, std::int64_t n) {
  using P = Packet<T>;
  if (n == kLanes<T>) {
    const P v = ei::pload<P>(src);
    ei::pstoreu(dst, kAccumulate ? ei::padd(ei::ploadu<P>(dst), v) : v);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) dst[i] = kAccumulate ? dst[i] + src[i] : src[i];
}

// ---- the cell's arithmetic

// What the cell computes on: a packet of floats (Eigen's vectorised activations, the rational
// approximations its array functions use), one double at a time (no packet tanh for doubles;
// float64 runs are the gradient checks, where speed does not matter).
template <typename T>
struct CellPacketOf {
  using type = T;
};
template <>
struct CellPacketOf<float> {
  using type = Packet<float>;
};
template <typename T>
using CellPacket = typename CellPacketOf<T>::type;
template <typename T>
constexpr int kCellLanes = ei::unpacket_traits<CellPacket<T>>::size;

inline Packet<float> sigmoid(const Packet<float>& x) { return ei::scalar_logistic_op<float>().packetOp(x); }
inline Packet<float> tanh_of(const Packet<float>& x) { return ei::ptanh(x); }
inline double sigmoid(double x) { return ei::scalar_logistic_op<double>()(x); }
inline double tanh_of(double x) { return std::tanh(x); }

// Loads and stores of one whole packet.
template <typename T>
struct FullLane {
  CellPacket<T> load(const T* p) const { return ei::ploadu<CellPacket<T>>(p); }
  void store(T* p, const CellPacket<T>& v) const { ei::pstoreu(p, v); }
};

// Loads and stores of the first n < lanes elements of a packet, through a stack packet (zeros
// past n), so that a unit's result is computed by the same instructions wherever it falls:
// results do not depend on how the units were split between threads.
template <typename T>
struct PartialLane {
  std::int64_t n;
  CellPacket<T> load(const T* p) const {
    alignas(64) T buf[kCellLanes<T>] = {};
    std::copy(p, p + n, buf);
    return ei::ploadu<CellPacket<T>>(buf);
  }
  void store(T* p, const CellPacket<T>& v) const {
    alignas(64) T buf[kCellLanes<T>];
    ei::pstoreu(buf, v);
    std::copy(buf, buf + n, p);
  }
};

// f(j, lane) for the packets of units [u0, u1): whole packets, then a partial one.
template <typename T, class F>
void for_each_packet(std::int64_t u0, std::int64_t u1, F&& f) {
  constexpr int L = kCellLanes<T>;
  std::int64_t j = u0;
  for (; j + L <= u1; j += L) f(j, FullLane<T>{});
  if (j < u1) f(j, PartialLane<T>{u1 - j});
}

struct Sizes {
  std::int64_t T, B, H;
  std::int64_t G() const { return 4 * H; }
};

// ---- forward

// Forward panel p of w_hh [4H, H] (see the top of the file): a transpose of 4L rows of w_hh, done
// in blocks of kPackDepth depths so that the block being written (kPackDepth x 4L values) stays in
// L1 while each source row is read one contiguous run at a time. zero_row: H zeros, read for units
// past H.
template <typename T>
void pack_forward_panel(const T* w_hh, std::int64_t H, std::int64_t p, const T* zero_row, T* panel) {
  constexpr int L = kLanes<T>, W = kPanelWidth<T>;
  constexpr std::int64_t kPackDepth = 16;
  const T* rows[W];
  for (int q = 0; q < kPanelPackets; ++q)
    for (int u = 0; u < L; ++u) {
      const std::int64_t j = p * L + u;
      rows[q * L + u] = j < H ? w_hh + (q * H + j) * H : zero_row;
    }
  for (std::int64_t k0 = 0; k0 < H; k0 += kPackDepth) {
    const std::int64_t depth = std::min(kPackDepth, H - k0);
    T* block = panel + k0 * W;
    for (int c = 0; c < W; ++c) {
      const T* src = rows[c] + k0;
      for (std::int64_t kk = 0; kk < depth; ++kk) block[kk * W + c] = src[kk];
    }
  }
}

// The cell for units [u0, u1) of every row of one step: gates holds the full pre-activations
// (without biases) on entry and the activated gates on return. One packet of units at a time,
// all four gates and the new cell in registers (see "The cell" at the top of the file).
template <typename T>
void cell_forward(const Sizes& s, T* gates, const T* bias, const T* c_prev, T* c, T* h, std::int64_t u0,
                  std::int64_t u1) {
  using P = CellPacket<T>;
  const std::int64_t H = s.H;
  for (std::int64_t b = 0; b < s.B; ++b) {
    T* row = gates + b * s.G();
    const std::int64_t e = b * H;
    for_each_packet<T>(u0, u1, [&]<class Lane>(std::int64_t j, Lane lane) {
      const P in = sigmoid(ei::padd(lane.load(row + j), lane.load(bias + j)));
      const P forget = sigmoid(ei::padd(lane.load(row + H + j), lane.load(bias + H + j)));
      const P cand = tanh_of(ei::padd(lane.load(row + 2 * H + j), lane.load(bias + 2 * H + j)));
      const P out = sigmoid(ei::padd(lane.load(row + 3 * H + j), lane.load(bias + 3 * H + j)));
      const P cell = ei::padd(ei::pmul(forget, lane.load(c_prev + e + j)), ei::pmul(in, cand));
      lane.store(row + j, in);
      lane.store(row + H + j, forget);
      lane.store(row + 2 * H + j, cand);
      lane.store(row + 3 * H + j, out);
      lane.store(c + e + j, cell);
      lane.store(h + e + j, ei::pmul(out, tanh_of(cell)));
    });
  }
}

// b_ih + b_hh per gate column (zeros for absent biases): one add per element in the cell.
template <typename T>
AlignedBuffer<T> combined_bias(const Tensor& b_ih, const Tensor& b_hh, std::int64_t width) {
  AlignedBuffer<T> bias(static_cast<std::size_t>(width), T(0));
  for (const Tensor* b : {&b_ih, &b_hh})
    if (b->defined()) {
      const T* p = b->data<T>();
      for (std::int64_t k = 0; k < width; ++k) bias[static_cast<std::size_t>(k)] += p[k];
    }
  return bias;
}

template <typename T>
void forward_typed(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs, const Tensor& cs,
                   const Tensor& gates) {
  constexpr int L = kLanes<T>, W = kPanelWidth<T>;
  const Sizes s{gates.shape()[0], gates.shape()[1], hs.shape()[2]};
  const std::int64_t panels = ceil_div(s.H, L), panel_size = s.H * W;
  const PanelBuffer<T> packed(panels * panel_size);
  const AlignedBuffer<T> bias = combined_bias<T>(b_ih, b_hh, s.G());
  const std::vector<T> zero_row(static_cast<std::size_t>(s.H), T(0));
  const T* w = w_hh.data<T>();
  T* hp = hs.data<T>();
  T* cp = cs.data<T>();
  T* gp = gates.data<T>();
  const bool parallel = s.B * s.H * s.G() >= kParallelMacs && panels > 1;
  StepBarrier barrier;
#pragma omp parallel if (parallel)
  {
#pragma omp single
    barrier.set_team(omp_get_num_threads());
    const bool copy_h = omp_get_num_threads() > 1 && s.B * s.H * s.G() <= kCopyMacs;
    AlignedBuffer<T> h_local(copy_h ? static_cast<std::size_t>(s.B * s.H) : 0);
    const Range mine = my_share(panels);
    for (std::int64_t p = mine.begin; p < mine.end; ++p)
      pack_forward_panel(w, s.H, p, zero_row.data(), packed.data() + p * panel_size);
    const std::int64_t u0 = std::min(s.H, mine.begin * L), u1 = std::min(s.H, mine.end * L);
    for (std::int64_t t = 0; t < s.T; ++t) {
      const T* h_prev = hp + t * s.B * s.H;
      if (copy_h) {
        std::copy(h_prev, h_prev + s.B * s.H, h_local.data());
        h_prev = h_local.data();
      }
      T* g = gp + t * s.B * s.G();
      // gates_t += h_{t-1} w_hh^T for this thread's units, all four gates.
      for (std::int64_t p = mine.begin; p < mine.end; ++p) {
        const std::int64_t j0 = p * L, n = std::min<std::int64_t>(L, s.H - j0);
        const auto add_to_gates = [&](std::int64_t r0, int R, const T* tile) {
          for (int r = 0; r < R; ++r)
            for (int q = 0; q < kPanelPackets; ++q)
              put_packet<T, true>(g + (r0 + r) * s.G() + q * s.H + j0, tile + r * W + q * L, n);
        };
        panel_rows<T, kPanelPackets>(h_prev, s.H, s.B, s.H, packed.data() + p * panel_size, add_to_gates);
      }
      cell_forward(s, g, bias.data(), cp + t * s.B * s.H, cp + (t + 1) * s.B * s.H, hp + (t + 1) * s.B * s.H, u0,
                   u1);
      barrier.arrive_and_wait();
    }
  }
}

// ---- backward

// The backward panel of w_hh [4H, H] for columns [j0, j0 + q L) (see the top of the file), zero
// past H.
template <typename T>
void pack_backward_panel(const T* w_hh, std::int64_t H, std::int64_t j0, int q, T* panel) {
  const std::int64_t width = q * kLanes<T>, n = std::min<std::int64_t>(width, H - j0);
  for (std::int64_t r = 0; r < 4 * H; ++r) {
    T* dst = panel + r * width;
    std::copy(w_hh + r * H + j0, w_hh + r * H + j0 + n, dst);
    std::fill(dst + n, dst + width, T(0));
  }
}

// A thread's backward panels: its packets [begin, end) of the hidden units, in panels of up to
// kPanelPackets packets from `begin`; f(j0, q, offset) for each (first column, width in packets,
// offset in the packed buffer: every packet's depth x L block has a fixed place, so the buffer
// does not depend on how the packets were split).
template <typename T, class F>
void for_each_backward_panel(const Sizes& s, Range mine, F&& f) {
  constexpr int L = kLanes<T>;
  for (std::int64_t p = mine.begin; p < mine.end; p += kPanelPackets) {
    const int q = static_cast<int>(std::min<std::int64_t>(kPanelPackets, mine.end - p));
    f(p * L, q, p * L * s.G());
  }
}

// dh[b, j] = sum_r dgates[b, r] w_hh[r, j] for this thread's backward panels.
template <typename T>
void recurrent_dh(const Sizes& s, const T* dgates, const PanelBuffer<T>& packed, Range mine, T* dh) {
  constexpr int L = kLanes<T>, W = kPanelWidth<T>;
  for_each_backward_panel<T>(s, mine, [&](std::int64_t j0, int q, std::int64_t offset) {
    const std::int64_t n = std::min<std::int64_t>(q * L, s.H - j0);
    const auto emit = [&](std::int64_t r0, int R, const T* tile) {
      for (int r = 0; r < R; ++r)
        for (std::int64_t v0 = 0; v0 < n; v0 += L)
          put_packet<T, false>(dh + (r0 + r) * s.H + j0 + v0, tile + r * W + v0, std::min<std::int64_t>(L, n - v0));
    };
    const T* panel = packed.data() + offset;
    switch (q) {  // the panel's width as a compile-time count, so its accumulators stay in registers
      case 1: return panel_rows<T, 1>(dgates, s.G(), s.B, s.G(), panel, emit);
      case 2: return panel_rows<T, 2>(dgates, s.G(), s.B, s.G(), panel, emit);
      case 3: return panel_rows<T, 3>(dgates, s.G(), s.B, s.G(), panel, emit);
      default: return panel_rows<T, kPanelPackets>(dgates, s.G(), s.B, s.G(), panel, emit);
    }
  });
}

// The cell backward for units [u0, u1) of every row of one step (formulas: kernels/ref/lstm.cpp),
// one packet of units at a time in registers: dc enters as dL/dc_t from the later steps and
// leaves as dL/dc_{t-1}; the four gate gradients are written.
template <typename T>
void cell_backward(const Sizes& s, const T* dy, const T* dh, T* dc, const T* gates, const T* c_prev, const T* c,
                   T* dgates, std::int64_t u0, std::int64_t u1) {
  using P = CellPacket<T>;
  const std::int64_t H = s.H;
  const P one = ei::pset1<P>(T(1));
  for (std::int64_t b = 0; b < s.B; ++b) {
    const T* a = gates + b * s.G();
    T* dg = dgates + b * s.G();
    const std::int64_t e = b * H;
    for_each_packet<T>(u0, u1, [&]<class Lane>(std::int64_t j, Lane lane) {
      const P in = lane.load(a + j), forget = lane.load(a + H + j), cand = lane.load(a + 2 * H + j),
              out = lane.load(a + 3 * H + j);
      const P tc = tanh_of(lane.load(c + e + j));
      const P dht = ei::padd(lane.load(dy + e + j), lane.load(dh + e + j));
      const P dct = ei::padd(lane.load(dc + e + j), ei::pmul(ei::pmul(dht, out), ei::psub(one, ei::pmul(tc, tc))));
      lane.store(dg + j, ei::pmul(ei::pmul(ei::pmul(dct, cand), in), ei::psub(one, in)));
      lane.store(dg + H + j,
                 ei::pmul(ei::pmul(ei::pmul(dct, lane.load(c_prev + e + j)), forget), ei::psub(one, forget)));
      lane.store(dg + 2 * H + j, ei::pmul(ei::pmul(dct, in), ei::psub(one, ei::pmul(cand, cand))));
      lane.store(dg + 3 * H + j, ei::pmul(ei::pmul(ei::pmul(dht, tc), out), ei::psub(one, out)));
      lane.store(dc + e + j, ei::pmul(dct, forget));
    });
  }
}

template <typename T>
void backward_typed(const Tensor& dy, const Tensor& w_hh, const Tensor& cs, const Tensor& gates, const Tensor& dh,
                    const Tensor& dc, const Tensor& dgates, bool need_dh0, std::int64_t H) {
  constexpr int L = kLanes<T>;
  const Sizes s{gates.shape()[0], gates.shape()[1], H};
  const std::int64_t packets = ceil_div(s.H, L);
  const PanelBuffer<T> packed(packets * L * s.G());
  const T* w = w_hh.data<T>();
  const T* dyp = dy.data<T>();
  const T* cp = cs.data<T>();
  const T* gp = gates.data<T>();
  T* dhp = dh.data<T>();
  T* dcp = dc.data<T>();
  T* dgp = dgates.data<T>();
  const bool parallel = s.B * s.H * s.G() >= kParallelMacs && packets > 1;
  StepBarrier barrier;
#pragma omp parallel if (parallel)
  {
#pragma omp single
    barrier.set_team(omp_get_num_threads());
    const bool copy_dgates = omp_get_num_threads() > 1 && s.B * s.H * s.G() <= kCopyMacs;
    AlignedBuffer<T> dgates_local(copy_dgates ? static_cast<std::size_t>(s.B * s.G()) : 0);
    // dgates of one step, read from this thread's copy where that pays (see "Reading what the
    // other threads wrote" at the top of the file).
    const auto own_copy = [&](const T* dgates_step) {
      if (!copy_dgates) return dgates_step;
      std::copy(dgates_step, dgates_step + s.B * s.G(), dgates_local.data());
      return static_cast<const T*>(dgates_local.data());
    };
    // Threads split the hidden units by packets, not by whole panels: with H = 200 (13 packets)
    // two threads take 7 and 6 packets, where 64-column panels gave each two, a quarter of them
    // past H.
    const Range mine = my_share(packets);
    for_each_backward_panel<T>(s, mine, [&](std::int64_t j0, int q, std::int64_t offset) {
      pack_backward_panel(w, s.H, j0, q, packed.data() + offset);
    });
    const std::int64_t u0 = std::min(s.H, mine.begin * L), u1 = std::min(s.H, mine.end * L);
    for (std::int64_t t = s.T - 1; t >= 0; --t) {
      // dh = dgates_{t+1} w_hh
      if (t < s.T - 1) recurrent_dh(s, own_copy(dgp + (t + 1) * s.B * s.G()), packed, mine, dhp);
      cell_backward(s, dyp + t * s.B * s.H, dhp, dcp, gp + t * s.B * s.G(), cp + t * s.B * s.H,
                    cp + (t + 1) * s.B * s.H, dgp + t * s.B * s.G(), u0, u1);
      barrier.arrive_and_wait();
    }
    if (need_dh0 && s.T > 0) recurrent_dh(s, own_copy(dgp), packed, mine, dhp);
  }
}

}  // namespace

void lstm_forward_steps(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs,
                        const Tensor& cs, const Tensor& gates) {
  DEFINE_DISPATCH_FLOAT(gates.dtype(), "lstm_forward_steps",
                        [&] { forward_typed<scalar_t>(w_hh, b_ih, b_hh, hs, cs, gates); });
}

void lstm_backward_steps(const Tensor& dy, const Tensor& w_hh, const Tensor& hs, const Tensor& cs,
                         const Tensor& gates, const Tensor& dh, const Tensor& dc, const Tensor& dgates, bool need_dh0) {
  DEFINE_DISPATCH_FLOAT(gates.dtype(), "lstm_backward_steps", [&] {
    backward_typed<scalar_t>(dy, w_hh, cs, gates, dh, dc, dgates, need_dh0, hs.shape()[2]);
  });
}

}  // namespace define::kernels::cpu
