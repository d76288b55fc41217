// The op test harness. Each op is declared once as an OpCase (inputs, forward, tolerances) and
// checked in modes:
//   cpu   float32 forward and backward on the fast CPU path against the reference path
//   grad  float64: the full Jacobian from backward() against central differences
//   emu   float32: the CUDA kernels run on the CPU by the CUDA emulator (Device::emu()), forward
//         and backward, against the reference path; always available
//   cuda  the same on a GPU (Device::cuda()); reported as skipped without a GPU or nvcc build
//   emu-f16, emu-bf16, cuda-f16, cuda-bf16   the emu and cuda modes with float16 / bfloat16
//         inputs, against the reference backend's 16-bit semantics (exact upcast, float64 compute,
//         one rounding of each op's 16-bit outputs), to ulps16 units of the format's epsilon
// DEFINE_TEST_MODES (comma list, default all of them) selects modes. Every check prints the
// max abs error and the share of the allowed error it used.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"

namespace define::test {

struct InputSpec {
  Shape shape;
  enum class Fill { Uniform, Positive, Index, Fixed } fill = Fill::Uniform;
  double lo = -1.0, hi = 1.0;        // Uniform range; Positive draws from [0.5, 2]
  std::int64_t index_high = 0;       // Index: integer values in [0, index_high)
  DType index_dtype = DType::Int64;  // dtype of Index inputs (and of integral Fixed inputs)
  bool grad = true;                  // differentiable input (float inputs only)
  bool non_contiguous = false;       // hand the op a non-contiguous view with the same shape/values
  std::vector<double> values{};      // Fixed: explicit values, row-major
  // Fixed inputs are integer (index_dtype) when grad is false and every value is integral,
  // floating otherwise; `dtype` overrides that choice.
  std::optional<DType> dtype{};
};

struct OpCase {
  std::string name;
  std::vector<InputSpec> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> forward;
  double atol = 1e-5, rtol = 1e-5;            // float32 fast/device vs reference
  double grad_atol = 1e-6, grad_rtol = 1e-5;  // float64 analytic vs numeric Jacobian
  double fd_eps = 1e-6;
  bool gradcheck = true;
  // The reference output holds NaN or inf by design (e.g. NaN propagation through max): then the
  // result must hold the same non-finite values in the same places. Otherwise any non-finite
  // reference value fails the case: a NaN result never passes by matching a NaN reference.
  bool expect_nonfinite = false;
  // The 16-bit modes: whether the case runs in them (false only where the case's inputs cannot
  // be 16-bit, e.g. an op that is float32/float64-only by contract), and the tolerance in units
  // of the format's epsilon (2^-10 for float16, 2^-7 for bfloat16).
  bool float16 = true;
  double ulps16 = 8;
};

// Runs the cases in every enabled mode. The calling test case must carry the tags [harness] and
// [family:<op family>] (harness/family_tags.h): the op coverage test counts cases by them.
void run_op_cases(const std::vector<OpCase>& cases);

// Building blocks, exposed for tests that need them directly.
std::vector<Tensor> make_inputs(const OpCase& c, DType float_dtype, Device device, bool track_grad);

struct Comparison {
  double max_abs_err = 0;
  double max_share = 0;  // max over elements of |err| / (atol + rtol*|ref|)
  std::int64_t worst = -1;
  bool size_mismatch = false;  // got and ref differ in length (then max_share is infinite)
  std::int64_t nonfinite_ref = 0;  // reference elements that are NaN or inf
};
// Element-wise comparison; vectors of different lengths compare as infinitely far apart, so a
// check of max_share <= 1 fails on a truncated result. A non-finite result where the reference is
// finite is infinitely far from it; so is any non-finite reference element unless
// `expect_nonfinite`, and then only a result of the same kind there (NaN, or an infinity of the
// same sign) matches it.
Comparison compare(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol,
                   bool expect_nonfinite = false);
std::vector<double> to_doubles(const Tensor& t);

}  // namespace define::test
