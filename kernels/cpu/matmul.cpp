// Fast CPU GEMM through Eigen, OpenBLAS or oneDNN, whichever kernels/cpu/gemm_provider.h picks for the
// shape (by measurement on this machine, or as DEFINE_CPU_GEMM forces). Every operand is
// wrapped in an Eigen::Map whose storage order matches its strides (row-major when columns are
// unit-stride, column-major when rows are), so transposed views and trans flags cost nothing:
// Eigen's packing reads either order. Only an operand with no unit stride in its last two dims is
// copied to contiguous memory first.
//
// Threading: Eigen parallelises one GEMM over OpenMP itself, and runs serially when called
// inside an active OpenMP region. The batch loop picks one of the two levels:
//   - batch-parallel (each GEMM on one thread) when the GEMMs are small, when there are at
//     least two GEMMs per thread, or when one GEMM split across all threads would leave each
//     thread less than 1 M multiply-adds: no synchronisation inside a GEMM;
//   - one GEMM after the other with Eigen's threading inside, for one or a few big GEMMs.
// Measured on the 2-core AVX-512 build machine (float32, bench/gemm_bench.cpp, best of 5, in
// moments when both cores were otherwise idle):
//   1024^3 single GEMM:   Eigen on 2 threads ~140-160 GFLOP/s vs ~75-83 on 1 thread (1.8-1.9x):
//                         big single GEMMs keep Eigen's own threading;
//   64 x (32x32x32):      batch-parallel ~90-115 GFLOP/s vs ~50-60 for the serial loop (Eigen
//                         never threads GEMMs this small: its minimum task is 50k multiply-adds);
//   sweep 16..1024 (one-off, ~128 MFLOP per batch): batch-parallel was ahead of one-at-a-time
//                         with Eigen threads at every size once each thread had GEMMs of its own.
// On a loaded machine (other processes on the cores) Eigen's in-GEMM threading degrades far
// more than the batch loop, because it synchronises per block. See bench/gemm_bench.cpp.

// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsic headers when Eigen's
// GEMM kernels are inlined (the intrinsics start from _mm512_undefined_*, on purpose). The
// warning is a known false positive and says nothing about this file, so it is silenced here,
// ahead of every include, for this translation unit only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <type_traits>

#include <Eigen/Core>
#include <omp.h>

#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/copy.h"
#include "kernels/matmul.h"

namespace define::kernels::cpu {
namespace {

// m * n * k below which one GEMM is "small": the batch loop runs in parallel instead of
// leaving the threads to Eigen (which would not split it much anyway).
constexpr std::int64_t kSmallGemmWork = std::int64_t{128} * 128 * 128;
// m * n * k a thread needs for splitting one GEMM across threads to pay: below it the blocks each
// thread gets are too thin for the per-block synchronisation. At 2 threads the bound (2 M) sits
// under kSmallGemmWork, so it changes nothing there; it matters on machines with more cores. On
// a 16-core host with 8 threads, the 8-head position GEMMs of the fused relative attention
// (150 x 300 x 48, 2.2 M multiply-adds) were split 8 ways one after the other, and the op ran
// 3x slower than the composition that made one 64-GEMM batch of the same products.
constexpr std::int64_t kMinWorkPerThread = std::int64_t{1} << 20;
constexpr std::int64_t kParallelGrain = 1 << 15;

enum class Order { Row, Col };

// How a strided matrix maps onto Eigen: a storage order plus the outer stride.
struct EigenLayout {
  bool mappable = false;
  Order order = Order::Row;
  std::int64_t outer = 0;
};

EigenLayout eigen_layout(const BatchedMatrix& m) {
  // A dim of size 1 may carry any stride, so it never stops a layout from applying.
  if (m.col_stride == 1 || m.cols == 1) {
    const std::int64_t outer = m.rows == 1 ? m.cols : m.row_stride;
    if (outer >= m.cols) return {true, Order::Row, outer};
  }
  if (m.row_stride == 1 || m.rows == 1) {
    const std::int64_t outer = m.cols == 1 ? m.rows : m.col_stride;
    if (outer >= m.rows) return {true, Order::Col, outer};
  }
  return {};
}

template <typename T, Order O>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic,
                                                O == Order::Row ? Eigen::RowMajor : Eigen::ColMajor>,
                            Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T, Order O>
using MutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic,
                                        O == Order::Row ? Eigen::RowMajor : Eigen::ColMajor>,
                          Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename T>
struct GemmPlan {
  const T* a;
  const T* b;
  T* c;
  BatchedMatrix ma, mb, mc;
  EigenLayout la, lb, lc;
  T alpha, beta;
  GemmProvider provider;
};

// GEMM n of the plan through OpenBLAS or oneDNN, when the provider choice says so
// (kernels/cpu/gemm_provider.h). In C's storage order an operand of the other order is its
// transpose, so every layout Eigen maps is one gemm_row_major call on C or on C^T. Inside an active
// OpenMP region (the batch-parallel loop) the libraries run single-threaded; outside it they thread
// the GEMM, and its bits may then depend on the thread count (OpenBLAS's blocking follows it; oneDNN's
// does not): the same configuration on the same threads repeats them (tests/ops/gemm_provider_test.cpp).
template <typename T, Order OA, Order OB, Order OC>
void library_gemm(const GemmPlan<T>& p, std::int64_t n) {
  const T* a = p.a + p.ma.batch_offsets[n];
  const T* b = p.b + p.mb.batch_offsets[n];
  T* c = p.c + p.mc.batch_offsets[n];
  const std::int64_t rows = p.mc.rows, cols = p.mc.cols, k = p.ma.cols;
  if constexpr (OC == Order::Row)
    gemm_row_major<T>(p.provider, OA == Order::Col, OB == Order::Col, rows, cols, k, p.alpha, a,
                      p.la.outer, b, p.lb.outer, p.beta, c, p.lc.outer);
  else  // C^T = B^T A^T, all row-major
    gemm_row_major<T>(p.provider, OB == Order::Row, OA == Order::Row, cols, rows, k, p.alpha, b,
                      p.lb.outer, a, p.la.outer, p.beta, c, p.lc.outer);
}

// GEMM n of the plan: through a library (which threads it when called outside any region) or Eigen.
template <typename T, Order OA, Order OB, Order OC>
void run_one(const GemmPlan<T>& p, std::int64_t n) {
  const std::int64_t k = p.ma.cols;
  MutMap<T, OC> C(p.c + p.mc.batch_offsets[n], p.mc.rows, p.mc.cols, Eigen::OuterStride<>(p.lc.outer));
  if (k == 0) {  // empty inner dim: the product is zero (Eigen asserts on empty reductions)
    if (p.beta == T(0)) C.setZero();
    else C *= p.beta;
    return;
  }
  if (p.provider != GemmProvider::Eigen) {
    library_gemm<T, OA, OB, OC>(p, n);
    return;
  }
  ConstMap<T, OA> A(p.a + p.ma.batch_offsets[n], p.ma.rows, k, Eigen::OuterStride<>(p.la.outer));
  ConstMap<T, OB> B(p.b + p.mb.batch_offsets[n], k, p.mb.cols, Eigen::OuterStride<>(p.lb.outer));
  if (p.beta == T(0)) {
    // Plain assignment: C's old contents (possibly NaN garbage) are never read.
    if (p.alpha == T(1)) C.noalias() = A * B;
    else C.noalias() = p.alpha * A * B;
  } else {
    if (p.beta != T(1)) C *= p.beta;
    C.noalias() += p.alpha * A * B;
  }
}

// A batch of GEMMs shared out over the threads, each single-threaded, or each GEMM threaded by its
// library on this thread (for_each_gemm: never from inside an OpenMP region).
template <typename T, Order OA, Order OB, Order OC>
void run_batch(const GemmPlan<T>& p) {
  const auto count = static_cast<std::int64_t>(p.mc.batch_offsets.size());
  const bool batch_parallel = gemm_batch_parallel(count, p.mc.rows * p.mc.cols * p.ma.cols, omp_get_max_threads());
  for_each_gemm(count, batch_parallel, [&](std::int64_t n) { run_one<T, OA, OB, OC>(p, n); });
}

// Turns the three runtime storage orders into template arguments (8 instantiations per type).
template <typename T, Order OA, Order OB>
void pick_c(const GemmPlan<T>& p) {
  if (p.lc.order == Order::Row) run_batch<T, OA, OB, Order::Row>(p);
  else run_batch<T, OA, OB, Order::Col>(p);
}
template <typename T, Order OA>
void pick_b(const GemmPlan<T>& p) {
  if (p.lb.order == Order::Row) pick_c<T, OA, Order::Row>(p);
  else pick_c<T, OA, Order::Col>(p);
}
template <typename T>
void pick_a(const GemmPlan<T>& p) {
  if (p.la.order == Order::Row) pick_b<T, Order::Row>(p);
  else pick_b<T, Order::Col>(p);
}

// An operand Eigen can map directly, or a contiguous copy of it (then always mappable).
Tensor mappable(const Tensor& t, bool trans, const Shape& batch) {
  if (eigen_layout(batched_matrix(t, trans, batch)).mappable) return t;
  return kernels::contiguous(t);
}

template <typename T>
void gemm_typed(const Tensor& a_in, const Tensor& b_in, const Tensor& out, bool trans_a, bool trans_b,
                double alpha, double beta) {
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Tensor a = mappable(a_in, trans_a, batch);
  const Tensor b = mappable(b_in, trans_b, batch);
  // An unmappable destination: compute into a contiguous scratch (holding out's values when
  // beta needs them) and copy back.
  const bool out_mappable = eigen_layout(batched_matrix(out, false, batch)).mappable;
  Tensor c = out_mappable ? out : (beta == 0.0 ? empty_like(out) : kernels::cast(out, out.dtype()));

  GemmPlan<T> p{a.data<T>(), b.data<T>(), c.data<T>(),
                batched_matrix(a, trans_a, batch), batched_matrix(b, trans_b, batch), batched_matrix(c, false, batch),
                {}, {}, {}, static_cast<T>(alpha), static_cast<T>(beta), GemmProvider::Eigen};
  p.la = eigen_layout(p.ma);
  p.lb = eigen_layout(p.mb);
  p.lc = eigen_layout(p.mc);
  // Chosen here, outside any OpenMP region: the first GEMM of a shape class may time the providers.
  // A batch run in parallel is many serial GEMMs; otherwise each GEMM is threaded by its library.
  const bool batch_parallel = gemm_batch_parallel(static_cast<std::int64_t>(p.mc.batch_offsets.size()),
                                                  p.mc.rows * p.mc.cols * p.ma.cols, omp_get_max_threads());
  // The class of the call library_gemm makes: on C, or on C^T (swapped operands) for a column-major C.
  const bool c_rows = p.lc.order == Order::Row;
  const GemmTrans trans = c_rows ? GemmTrans{p.la.order == Order::Col, p.lb.order == Order::Col}
                                 : GemmTrans{p.lb.order == Order::Row, p.la.order == Order::Row};
  p.provider = gemm_provider(c_rows ? p.mc.rows : p.mc.cols, c_rows ? p.mc.cols : p.mc.rows, p.ma.cols,
                             std::is_same_v<T, double>, batch_parallel ? GemmRun::Serial : GemmRun::Threaded, trans);
  pick_a(p);
  if (!out_mappable) kernels::copy_into(out, c);
}

// Rows are summed in order for every column, so the result does not depend on threading.
template <typename T>
void column_sum_rows(const Tensor& x, const Tensor& out) {
  const std::int64_t rows = x.shape()[0], cols = x.shape()[1], row_stride = x.strides()[0];
  const T* px = x.data<T>();
  T* po = out.data<T>();                // fresh and contiguous (entry point)
  constexpr std::int64_t kBlock = 256;  // columns per task: a vectorisable run that stays in L1
  const std::int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for if (rows * cols > kParallelGrain && blocks > 1) schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t j0 = blk * kBlock, j1 = std::min(cols, j0 + kBlock);
    for (std::int64_t j = j0; j < j1; ++j) po[j] = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* row = px + i * row_stride;
      for (std::int64_t j = j0; j < j1; ++j) po[j] += row[j];
    }
  }
}

}  // namespace

bool gemm_batch_parallel(std::int64_t count, std::int64_t work, int threads) {
  if (count <= 1) return false;
  return work < kSmallGemmWork || count >= 2 * std::int64_t{threads} || work < threads * kMinWorkPerThread;
}

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha,
          double beta) {
  DEFINE_DISPATCH_FLOAT(out.dtype(), "gemm", [&] { gemm_typed<scalar_t>(a, b, out, trans_a, trans_b, alpha, beta); });
}

void column_sum(const Tensor& x_in, const Tensor& out) {
  const Tensor x = (x_in.strides()[1] == 1 || x_in.shape()[1] == 1) ? x_in : kernels::contiguous(x_in);
  DEFINE_DISPATCH_FLOAT(x.dtype(), "column_sum", [&] { column_sum_rows<scalar_t>(x, out); });
}

}  // namespace define::kernels::cpu
