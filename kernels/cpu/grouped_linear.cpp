// Fast CPU grouped-linear kernels. Group i of x (columns [i*k_in, (i+1)*k_in) of every row) is a
// row-major matrix with leading dimension g*k_in, so every group's GEMM reads its operands in
// place: no split, no concat, no copies. Each pass's GEMMs go to the provider (Eigen, OpenBLAS, oneDNN)
// that kernels/cpu/gemm_provider.h picks for their shape, chosen before the pass's OpenMP loop.
//
// Work is cut into tasks whose number and boundaries depend only on the shapes: (group, block of
// kRowBlock rows) for y and dx, whose rows are independent; (group, chunk of rows) for dweight,
// which sums over rows: each chunk's x_c^T @ dy_c lands in its own buffer (chunk 0 directly in
// dweight) and the buffers are added in chunk order. The task loops open an OpenMP team whenever
// a library could otherwise split a GEMM across threads: each runs a GEMM single-threaded inside an
// active team, so each GEMM's blocking, and with it its rounding, never depends on the thread
// count. Smaller calls (under kEigenParallelWork multiply-adds in all) run without a team: Eigen
// never splits a GEMM of fewer than 2 x 50,000 multiply-adds, nor OpenBLAS one of fewer than
// 262,144, and where oneDNN threads a small one it splits rows and columns, not the sum; a team
// costs more than such work (badly so when processes share the cores, as tests under ctest -j do:
// 30 s instead of 0.2 s for the gradient checks). Results are therefore bit-identical for any
// number of threads (tests/ops/gemm_provider_test.cpp, every provider). dbias is a column sum in
// row order.

#include "kernels/cpu/grouped_linear.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/gemm_provider.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kRowBlock = 256;      // rows per y / dx task
constexpr std::int64_t kMinDwTasks = 16;     // (group, chunk) tasks wanted for dweight
constexpr std::int64_t kMinChunkRows = 256;  // fewest rows in a dweight chunk
constexpr std::int64_t kColBlock = 256;      // dbias columns per task (a vectorisable run in L1)
constexpr std::int64_t kSumBlock = 4096;     // dweight elements per task of the partial-sum pass
// Below this many multiply-adds in a whole call Eigen would not parallelise any of its GEMMs
// (it wants 50,000 per thread), so the call runs without an OpenMP team, with the same results.
constexpr std::int64_t kEigenParallelWork = 100000;
// Plain loops (dbias, partial sums) below this many elements run without a team.
constexpr std::int64_t kLoopParallelWork = 1 << 15;

struct Sizes {
  std::int64_t groups, k_in, k_out, rows;
  std::int64_t x_width() const { return groups * k_in; }
  std::int64_t y_width() const { return groups * k_out; }
  std::int64_t row_blocks() const { return (rows + kRowBlock - 1) / kRowBlock; }
  // Multiply-adds of one of the three GEMM passes (all groups).
  std::int64_t gemm_work() const { return groups * rows * k_in * k_out; }
  bool parallel() const { return gemm_work() >= kEigenParallelWork; }
};

// rows_of: x, y or dy (any [T, ...] matrix of the problem).
Sizes sizes_of(const Tensor& rows_of, const Tensor& weight) {
  return {weight.shape()[0], weight.shape()[1], weight.shape()[2], rows_of.shape()[0]};
}

// A pass with a team runs its GEMMs serially on the team's threads; one without calls each GEMM
// outside any team (for_each_gemm), where the library may thread it.
template <typename T>
GemmProvider provider_for(const Sizes& s, std::int64_t m, std::int64_t n, std::int64_t k, GemmTrans trans) {
  return gemm_provider(m, n, k, std::is_same_v<T, double>, s.parallel() ? GemmRun::Serial : GemmRun::Threaded,
                       trans);
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  const Sizes s = sizes_of(x, weight);
  const T* xp = x.data<T>();
  const T* wp = weight.data<T>();
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();
  const std::int64_t blocks = s.row_blocks(), tasks = s.groups * blocks;
  const GemmProvider provider = provider_for<T>(s, std::min(kRowBlock, s.rows), s.k_out, s.k_in, {false, false});
  for_each_gemm(tasks, s.parallel(), [&](std::int64_t task) {
    const std::int64_t i = task / blocks, r0 = (task % blocks) * kRowBlock;
    const std::int64_t n = std::min(kRowBlock, s.rows - r0);
    T* out = yp + r0 * s.y_width() + i * s.k_out;
    // y_i = x_i W_i (an empty k_in gives zeros)
    gemm_row_major<T>(provider, false, false, n, s.k_out, s.k_in, T(1), xp + r0 * s.x_width() + i * s.k_in,
                      s.x_width(), wp + i * s.k_in * s.k_out, s.k_out, T(0), out, s.y_width());
    if (!bp) return;
    const T* b = bp + i * s.k_out;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t j = 0; j < s.k_out; ++j) out[r * s.y_width() + j] += b[j];
  });
}

template <typename T>
void dx_typed(const Sizes& s, const T* dyp, const T* wp, T* dxp) {
  const std::int64_t blocks = s.row_blocks(), tasks = s.groups * blocks;
  const GemmProvider provider = provider_for<T>(s, std::min(kRowBlock, s.rows), s.k_in, s.k_out, {false, true});
  for_each_gemm(tasks, s.parallel(), [&](std::int64_t task) {
    const std::int64_t i = task / blocks, r0 = (task % blocks) * kRowBlock;
    const std::int64_t n = std::min(kRowBlock, s.rows - r0);
    // dx_i = dy_i W_i^T
    gemm_row_major<T>(provider, false, true, n, s.k_in, s.k_out, T(1), dyp + r0 * s.y_width() + i * s.k_out,
                      s.y_width(), wp + i * s.k_in * s.k_out, s.k_out, T(0), dxp + r0 * s.x_width() + i * s.k_in,
                      s.x_width());
  });
}

// Row chunks of the dweight sum: enough (group, chunk) tasks to share out, none under
// kMinChunkRows rows. A function of the shape only.
std::int64_t dweight_chunks(const Sizes& s) {
  const std::int64_t wanted = (kMinDwTasks + s.groups - 1) / s.groups;
  const std::int64_t most = std::max<std::int64_t>(1, s.rows / kMinChunkRows);
  return std::clamp<std::int64_t>(wanted, 1, most);
}

template <typename T>
void dweight_typed(const Sizes& s, const T* xp, const T* dyp, T* dwp) {
  const std::int64_t chunks = dweight_chunks(s);
  const std::int64_t chunk_rows = (s.rows + chunks - 1) / chunks;
  const std::int64_t per_group = s.k_in * s.k_out;
  // Chunk c > 0 of group i sums into partial[((c - 1) * groups + i) * per_group ...].
  std::vector<T> partial(static_cast<std::size_t>((chunks - 1) * s.groups * per_group));
  const std::int64_t tasks = s.groups * chunks;
  const GemmProvider provider = provider_for<T>(s, s.k_in, s.k_out, std::min(chunk_rows, s.rows), {true, false});
  for_each_gemm(tasks, s.parallel(), [&](std::int64_t task) {
    const std::int64_t i = task / chunks, c = task % chunks;
    const std::int64_t r0 = std::min(s.rows, c * chunk_rows), n = std::min(chunk_rows, s.rows - r0);
    T* dst = c == 0 ? dwp + i * per_group : partial.data() + ((c - 1) * s.groups + i) * per_group;
    // dW_i (this chunk) = x_i^T dy_i over the chunk's rows (no rows: zeros)
    gemm_row_major<T>(provider, true, false, s.k_in, s.k_out, n, T(1), xp + r0 * s.x_width() + i * s.k_in,
                      s.x_width(), dyp + r0 * s.y_width() + i * s.k_out, s.y_width(), T(0), dst, s.k_out);
  });
  if (chunks == 1) return;
  const std::int64_t total = s.groups * per_group, blocks = (total + kSumBlock - 1) / kSumBlock;
#pragma omp parallel for schedule(static) if (total * (chunks - 1) >= kLoopParallelWork)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t e0 = blk * kSumBlock, e1 = std::min(total, e0 + kSumBlock);
    for (std::int64_t c = 1; c < chunks; ++c) {  // chunk order
      const T* src = partial.data() + (c - 1) * total;
      for (std::int64_t e = e0; e < e1; ++e) dwp[e] += src[e];
    }
  }
}

// dbias = column sums of dy: every column summed over rows in row order.
template <typename T>
void dbias_typed(const Sizes& s, const T* dyp, T* dbp) {
  const std::int64_t cols = s.y_width(), blocks = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (s.rows * cols >= kLoopParallelWork)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t j0 = blk * kColBlock, j1 = std::min(cols, j0 + kColBlock);
    for (std::int64_t j = j0; j < j1; ++j) dbp[j] = T(0);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const T* row = dyp + r * cols;
      for (std::int64_t j = j0; j < j1; ++j) dbp[j] += row[j];
    }
  }
}

template <typename T>
void backward_typed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx, const Tensor& dweight,
                    const Tensor& dbias) {
  const Sizes s = sizes_of(dy, weight);
  if (dx.defined()) dx_typed(s, dy.data<T>(), weight.data<T>(), dx.data<T>());
  if (dweight.defined()) dweight_typed(s, x.data<T>(), dy.data<T>(), dweight.data<T>());
  if (dbias.defined()) dbias_typed(s, dy.data<T>(), dbias.data<T>());
}

}  // namespace

void grouped_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "grouped_linear", [&] { forward_typed<scalar_t>(x, weight, bias, y); });
}

void grouped_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx,
                             const Tensor& dweight, const Tensor& dbias) {
  DEFINE_DISPATCH_FLOAT(dy.dtype(), "grouped_linear_backward",
                        [&] { backward_typed<scalar_t>(dy, x, weight, dx, dweight, dbias); });
}

}  // namespace define::kernels::cpu
