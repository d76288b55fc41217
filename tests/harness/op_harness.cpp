#include "harness/op_harness.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "harness/family_tags.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/strided_loop.h"

namespace define::test {
namespace {

bool mode_enabled(const std::string& mode) {
  const char* env = std::getenv("DEFINE_TEST_MODES");
  const std::string modes = env ? env : "cpu,grad,emu,emu-f16,emu-bf16,cuda,cuda-f16,cuda-bf16";
  std::stringstream ss(modes);
  for (std::string m; std::getline(ss, m, ',');)
    if (m == mode) return true;
  return false;
}

bool all_integral(const std::vector<double>& v) {
  for (double x : v)
    if (x != std::floor(x)) return false;
  return true;
}

DType dtype_for(const InputSpec& s, DType float_dtype) {
  if (s.dtype) return *s.dtype == DType::Float32 || *s.dtype == DType::Float64 ? float_dtype : *s.dtype;
  switch (s.fill) {
    case InputSpec::Fill::Index: return s.index_dtype;
    case InputSpec::Fill::Fixed: return (!s.grad && all_integral(s.values)) ? s.index_dtype : float_dtype;
    default: return float_dtype;
  }
}

// Logical (row-major) element offsets of a possibly strided tensor.
std::vector<std::int64_t> element_offsets(const Tensor& t) {
  std::vector<std::int64_t> offs;
  offs.reserve(static_cast<std::size_t>(t.numel()));
  kernels::strided_loop2(t.shape(), t.strides(), t.strides(),
                         [&](std::int64_t o, std::int64_t) { offs.push_back(o); });
  return offs;
}

// A non-contiguous buffer with the given shape: transposed last two dims, or a stride-2 view.
Tensor strided_like(const Shape& shape, DType dtype, Device device) {
  if (shape.size() >= 2 && shape[shape.size() - 1] > 1 && shape[shape.size() - 2] > 1) {
    Shape swapped = shape;
    std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
    Tensor base = empty(swapped, {dtype, device});
    Strides st = base.strides();
    std::swap(st[st.size() - 1], st[st.size() - 2]);
    return base.as_strided(shape, st, 0);
  }
  Shape doubled = shape;
  if (doubled.empty()) return empty(shape, {dtype, device});
  doubled.back() *= 2;
  Tensor base = empty(doubled, {dtype, device});
  Strides st = base.strides();
  st.back() = 2;
  return base.as_strided(shape, st, 0);
}

Tensor make_input(const InputSpec& s, std::size_t which, DType float_dtype) {
  const DType dt = dtype_for(s, float_dtype);
  Generator gen(1000 + which);
  Tensor t;
  switch (s.fill) {
    case InputSpec::Fill::Uniform: t = rand_uniform(s.shape, s.lo, s.hi, {dt}, gen); break;
    case InputSpec::Fill::Positive: t = rand_uniform(s.shape, 0.5, 2.0, {dt}, gen); break;
    case InputSpec::Fill::Index:
      if (s.index_high <= 0) fail("op harness", "Index input {} needs index_high > 0", which);
      t = rand_int(s.shape, s.index_high, {dt}, gen);
      break;
    case InputSpec::Fill::Fixed:
      if (static_cast<std::int64_t>(s.values.size()) != numel_of(s.shape))
        fail("op harness", "Fixed input {} has {} values for shape {}", which, s.values.size(), shape_str(s.shape));
      t = kernels::cast(from_vector<double>(s.values, s.shape), dt);
      break;
  }
  return t;
}

struct RunResult {
  std::vector<double> output;
  std::vector<std::vector<double>> grads;  // per input (empty when no gradient)
};

Tensor upstream_for(const Tensor& out) {
  Generator g(77);
  return rand_uniform(out.shape(), -1.0, 1.0, {out.dtype(), out.device()}, g);
}

RunResult run_once(const OpCase& c, Device device, bool with_backward, DType float_dtype = DType::Float32) {
  std::vector<Tensor> inputs = make_inputs(c, float_dtype, device, with_backward);
  Tensor out = c.forward(inputs);
  RunResult r;
  r.output = to_doubles(out);
  if (with_backward && out.requires_grad()) {
    backward(out, upstream_for(out));
    for (std::size_t i = 0; i < inputs.size(); ++i)
      r.grads.push_back(inputs[i].requires_grad() && inputs[i].grad().defined() ? to_doubles(inputs[i].grad())
                                                                                : std::vector<double>{});
  }
  return r;
}

void report(const OpCase& c, const std::string& mode, const std::string& what, const Comparison& cmp) {
  fmt::print("  [{}] {} {}: max abs err {:.3g}, {:.1f}% of allowed\n", mode, c.name, what, cmp.max_abs_err,
             100.0 * cmp.max_share);
  INFO(fmt::format("{} [{}] {}: max abs err {:.3g} at element {} ({:.1f}% of allowed error){}", c.name, mode, what,
                   cmp.max_abs_err, cmp.worst, 100.0 * cmp.max_share,
                   cmp.nonfinite_ref > 0 ? fmt::format("; {} reference values are NaN or inf{}", cmp.nonfinite_ref,
                                                       c.expect_nonfinite ? "" : " (the case does not expect any)")
                                         : ""));
  CHECK_FALSE(cmp.size_mismatch);
  CHECK(cmp.max_share <= 1.0);
}

void compare_runs(const OpCase& c, const std::string& mode, const RunResult& got, const RunResult& ref, double atol,
                  double rtol) {
  REQUIRE(got.output.size() == ref.output.size());
  report(c, mode, "output", compare(got.output, ref.output, atol, rtol, c.expect_nonfinite));
  REQUIRE(got.grads.size() == ref.grads.size());
  for (std::size_t i = 0; i < got.grads.size(); ++i) {
    INFO(c.name << " [" << mode << "] gradient of input " << i << " present in one run only");
    REQUIRE(got.grads[i].size() == ref.grads[i].size());
    if (!got.grads[i].empty())
      report(c, mode, fmt::format("grad[{}]", i), compare(got.grads[i], ref.grads[i], atol, rtol));
  }
}
void compare_runs(const OpCase& c, const std::string& mode, const RunResult& got, const RunResult& ref) {
  compare_runs(c, mode, got, ref, c.atol, c.rtol);
}

void run_cpu_mode(const OpCase& c) {
  RunResult ref, fast;
  {
    kernels::CpuBackendGuard g(kernels::Backend::Ref);
    ref = run_once(c, Device::cpu(), true);
  }
  {
    kernels::CpuBackendGuard g(kernels::Backend::Cpu);
    fast = run_once(c, Device::cpu(), true);
  }
  compare_runs(c, "cpu", fast, ref);
}

// The CUDA kernels on `device` (a GPU, or the emulated device) against the CPU reference.
void run_device_mode(const OpCase& c, Device device, const std::string& mode) {
  RunResult ref;
  {
    kernels::CpuBackendGuard g(kernels::Backend::Ref);
    ref = run_once(c, Device::cpu(), true);
  }
  compare_runs(c, mode, run_once(c, device, true), ref);
}

// The same with 16-bit float inputs: the device's kernels (computing in float, rounding each op's
// 16-bit outputs once) against the reference's 16-bit semantics (exact upcast, float64, one
// rounding per op), within c.ulps16 units of the format's epsilon, absolute and relative.
void run_device_mode16(const OpCase& c, Device device, const std::string& mode, DType dtype) {
  RunResult ref;
  {
    kernels::CpuBackendGuard g(kernels::Backend::Ref);
    ref = run_once(c, Device::cpu(), true, dtype);
  }
  const double eps = dtype == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
  compare_runs(c, mode, run_once(c, device, true, dtype), ref, c.ulps16 * eps, c.ulps16 * eps);
}

void run_grad_mode(const OpCase& c) {
  std::vector<Tensor> inputs = make_inputs(c, DType::Float64, Device::cpu(), true);
  std::vector<std::size_t> diff;  // differentiable inputs
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad()) diff.push_back(i);
  REQUIRE_FALSE(diff.empty());

  Tensor out = c.forward(inputs);
  REQUIRE(out.dtype() == DType::Float64);
  const std::int64_t n_out = out.numel();
  std::vector<Tensor> leaves;
  for (std::size_t i : diff) leaves.push_back(inputs[i]);

  // Analytic Jacobian, one row per output element (vector-Jacobian product with a one-hot).
  std::vector<std::vector<std::vector<double>>> analytic(diff.size());
  for (std::int64_t k = 0; k < n_out; ++k) {
    std::vector<double> onehot(static_cast<std::size_t>(n_out), 0.0);
    onehot[k] = 1.0;
    std::vector<Tensor> g = define::grad(out, leaves, from_vector<double>(onehot, out.shape()), {.retain_graph = true});
    for (std::size_t j = 0; j < diff.size(); ++j) analytic[j].push_back(to_doubles(g[j]));
  }

  // Numeric Jacobian, one column per input element, by central differences.
  NoGradGuard no_grad;
  Comparison worst;
  for (std::size_t j = 0; j < diff.size(); ++j) {
    Tensor x = inputs[diff[j]];
    double* base = static_cast<double*>(x.storage()->data());
    const std::vector<std::int64_t> offs = element_offsets(x);
    std::vector<double> num, ana;
    for (std::size_t e = 0; e < offs.size(); ++e) {
      double& v = base[x.offset() + offs[e]];
      const double saved = v;
      v = saved + c.fd_eps;
      const std::vector<double> plus = to_doubles(c.forward(inputs));
      v = saved - c.fd_eps;
      const std::vector<double> minus = to_doubles(c.forward(inputs));
      v = saved;
      for (std::int64_t k = 0; k < n_out; ++k) {
        num.push_back((plus[k] - minus[k]) / (2 * c.fd_eps));
        ana.push_back(analytic[j][k][e]);
      }
    }
    const Comparison cmp = compare(ana, num, c.grad_atol, c.grad_rtol);
    report(c, "grad", fmt::format("d out / d input[{}] ({}x{} Jacobian)", diff[j], n_out, offs.size()), cmp);
    if (cmp.max_share > worst.max_share) worst = cmp;
  }
}

}  // namespace

std::vector<double> to_doubles(const Tensor& t) {
  Tensor host = t.device().is_cpu() ? t : to_device(kernels::contiguous(t), Device::cpu());
  return kernels::cast(detach(host), DType::Float64).to_vector<double>();
}

std::vector<Tensor> make_inputs(const OpCase& c, DType float_dtype, Device device, bool track_grad) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    InputSpec contiguous_spec = c.inputs[i];
    contiguous_spec.non_contiguous = false;
    Tensor t = copy_to_device(make_input(contiguous_spec, i, float_dtype), device);
    if (c.inputs[i].non_contiguous) {  // same values, strided layout, made on the target device
      Tensor nc = strided_like(t.shape(), t.dtype(), device);
      kernels::copy_into(nc, t);
      t = nc;
    }
    if (track_grad && c.inputs[i].grad && is_floating(t.dtype())) t.set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

Comparison compare(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol,
                   bool expect_nonfinite) {
  Comparison c;
  if (got.size() != ref.size()) {
    // A truncated or padded result is as wrong as it gets: no element-wise error can excuse it.
    c.size_mismatch = true;
    c.max_abs_err = c.max_share = INFINITY;
    c.worst = static_cast<std::int64_t>(std::min(got.size(), ref.size()));
    return c;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(ref[i])) {
      ++c.nonfinite_ref;
      const bool same_kind = std::isnan(ref[i]) ? std::isnan(got[i]) : got[i] == ref[i];
      if (expect_nonfinite && same_kind) continue;
    }
    const double err = std::abs(got[i] - ref[i]);
    const double allowed = atol + rtol * std::abs(ref[i]);
    // Non-finite on either side (inf - inf is NaN too): infinitely wrong.
    const double share = std::isfinite(got[i]) && std::isfinite(ref[i]) ? err / allowed : INFINITY;
    if (share > c.max_share || c.worst < 0) {
      c.max_share = share;
      c.worst = static_cast<std::int64_t>(i);
    }
    c.max_abs_err = std::max(c.max_abs_err, std::isfinite(share) ? err : INFINITY);
  }
  return c;
}

void run_op_cases(const std::vector<OpCase>& cases) {
  // The op coverage test (tests/ops/op_coverage_test.cpp) finds op-harness test cases by their
  // tags, so every caller must carry them.
  const Catch::TestCaseInfo& test = current_test_case();
  INFO("test case \"" << test.name << "\" runs op-harness cases: tag it [harness][family:<op family>]");
  REQUIRE(has_tag(test, "harness"));
  REQUIRE_FALSE(family_of(test).empty());
  static bool warned_cuda = false;
  static const kernels::DeviceAvailability devices = kernels::register_devices();
  for (const OpCase& c : cases) {
    if (mode_enabled("cpu")) {
      INFO("case " << c.name << " mode cpu");
      run_cpu_mode(c);
    }
    if (c.gradcheck && mode_enabled("grad")) {
      INFO("case " << c.name << " mode grad");
      run_grad_mode(c);
    }
    if (mode_enabled("emu")) {
      REQUIRE(devices.emu);
      INFO("case " << c.name << " mode emu");
      run_device_mode(c, Device::emu(), "emu");
    }
    for (const auto& [mode, dtype] : {std::pair{"emu-f16", DType::Float16}, std::pair{"emu-bf16", DType::BFloat16}}) {
      if (!c.float16 || !mode_enabled(mode)) continue;
      REQUIRE(devices.emu);
      INFO("case " << c.name << " mode " << mode);
      run_device_mode16(c, Device::emu(), mode, dtype);
    }
    if (mode_enabled("cuda")) {
      if (devices.cuda_devices == 0) {
        if (!warned_cuda)
          fmt::print("  [cuda] skipped: {}\n", kernels::built_with_cuda() ? "no GPU found"
                                                                         : "this build has no nvcc-compiled backend");
        warned_cuda = true;
      } else {
        INFO("case " << c.name << " mode cuda");
        run_device_mode(c, Device::cuda(), "cuda");
      }
    }
    for (const auto& [mode, dtype] : {std::pair{"cuda-f16", DType::Float16}, std::pair{"cuda-bf16", DType::BFloat16}}) {
      if (!c.float16 || !mode_enabled(mode) || devices.cuda_devices == 0) continue;
      INFO("case " << c.name << " mode " << mode);
      run_device_mode16(c, Device::cuda(), mode, dtype);
    }
  }
}

}  // namespace define::test
