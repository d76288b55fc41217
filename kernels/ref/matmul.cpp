// Reference GEMM: the textbook triple loop per batch entry, every product summed in double.
#include "kernels/ref/matmul.h"

#include "kernels/matmul.h"

namespace define::kernels::ref {
namespace {

template <typename T>
void gemm_typed(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha,
                double beta) {
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const BatchedMatrix ma = batched_matrix(a, trans_a, batch);
  const BatchedMatrix mb = batched_matrix(b, trans_b, batch);
  const BatchedMatrix mc = batched_matrix(out, false, batch);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = out.data<T>();
  for (std::size_t n = 0; n < mc.batch_offsets.size(); ++n) {
    const T* A = pa + ma.batch_offsets[n];
    const T* B = pb + mb.batch_offsets[n];
    T* C = pc + mc.batch_offsets[n];
    for (std::int64_t i = 0; i < mc.rows; ++i) {
      for (std::int64_t j = 0; j < mc.cols; ++j) {
        double acc = 0.0;
        for (std::int64_t k = 0; k < ma.cols; ++k)
          acc += static_cast<double>(A[i * ma.row_stride + k * ma.col_stride]) *
                 static_cast<double>(B[k * mb.row_stride + j * mb.col_stride]);
        T& c = C[i * mc.row_stride + j * mc.col_stride];
        // beta == 0 must not read c: out may hold garbage (or NaN) from empty().
        c = static_cast<T>(alpha * acc + (beta == 0.0 ? 0.0 : beta * static_cast<double>(c)));
      }
    }
  }
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha,
          double beta) {
  DEFINE_DISPATCH_FLOAT(out.dtype(), "gemm", [&] { gemm_typed<scalar_t>(a, b, out, trans_a, trans_b, alpha, beta); });
}

void column_sum(const Tensor& x, const Tensor& out) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "column_sum", [&] {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    for (std::int64_t j = 0; j < x.shape()[1]; ++j) {
      double acc = 0.0;
      for (std::int64_t i = 0; i < x.shape()[0]; ++i) acc += static_cast<double>(px[i * x.strides()[0] + j * x.strides()[1]]);
      po[j * out.strides()[0]] = static_cast<scalar_t>(acc);
    }
  });
}

}  // namespace define::kernels::ref
