// What the training benchmarks that run a PyTorch peer share (lm_train_bench, txl_train_bench,
// nmt_train_bench): the machine's float32 GEMM rate (the physical limit they print), running the
// peer script in its own process (with the OpenBLAS kernels its CPU can run) and reading its JSON
// line, the median of the rounds, the CPU model, and Zipf-distributed token ids; and for a run on a
// GPU (--device cuda, or emu for the emulated one) with --precision fp32|fp16|bf16: the device and
// precision checks, the training step as define's trainer takes it there, the device's GEMM rate
// and its peak tensor memory, and the peer's matching --device / --amp; and both processes'
// resident memory: the whole-process peak and the peak above the resident set just before
// training starts (TrainingRss).
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "bench/bench_util.h"
#include "core/cpu_allocator.h"
#include "core/cpu_info.h"
#include "core/factory.h"
#include "core/process_info.h"
#include "kernels/copy.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "kernels/matmul.h"
#include "nn/optim/optim.h"

namespace define::bench {

// define's float32 GEMM rate on 1024^3 in GFLOP/s (best of 5).
inline double sgemm_gflops() {
  Generator gen(1);
  const Tensor x = rand_normal({1024, 1024}, 0, 1, {}, gen), y = rand_normal({1024, 1024}, 0, 1, {}, gen);
  NoGradGuard g;
  const double s = best_seconds([&] { (void)matmul(x, y); });
  return 2.0 * 1024 * 1024 * 1024 / s / 1e9;
}

// Runs `command` through the shell and returns what it printed (standard output only unless the
// command redirects more); nothing when it could not start or exited non-zero.
inline std::optional<std::string> shell_output(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  if (pclose(p) != 0) return std::nullopt;
  return out;
}

// Debian 12's OpenBLAS (0.3.21), which the peer's torch calls for its GEMMs, does not recognise
// every newer x86 model and falls back to its generic "Prescott" kernels, several times slower at
// SGEMM: the peer would not run at its best. When
// the peer's OpenBLAS reports that fallback, this returns the OPENBLAS_CORETYPE assignment that
// selects the kernels the CPU can run (SkylakeX with AVX-512, Haswell with AVX2); empty when the
// detection is fine or the user set OPENBLAS_CORETYPE.
inline std::string openblas_coretype_for_peer(const char* python) {
  if (std::getenv("OPENBLAS_CORETYPE")) return {};
  const auto probe = shell_output(fmt::format("OPENBLAS_VERBOSE=2 {} -c 'import torch' 2>&1", python));
  if (!probe || probe->find("Core: Prescott") == std::string::npos) return {};
  const std::string kernels = kernels::cpu::openblas_kernels_for_cpu();
  return kernels.empty() ? std::string() : "OPENBLAS_CORETYPE=" + kernels;
}

// Runs `script args` with Debian's interpreter (where python3-torch lives; $DEFINE_PYTHON names
// another) at the peer's best thread settings (OpenMP pool of `threads`, passive waiting: Debian's
// torch and OpenBLAS share one OpenMP pool) and returns the last JSON object it printed; nothing
// when the script failed (python3-torch missing).
inline std::optional<nlohmann::json> run_python_peer(const std::string& script, const std::string& args,
                                                    std::int64_t threads) {
  const char* python = std::getenv("DEFINE_PYTHON") ? std::getenv("DEFINE_PYTHON") : "/usr/bin/python3";
  static const std::string coretype = [&] {  // probed and reported once a process
    std::string c = openblas_coretype_for_peer(python);
    if (!c.empty()) fmt::print("pytorch: its OpenBLAS would fall back to generic kernels here; run with {}\n", c);
    return c;
  }();
  const auto out = shell_output(fmt::format("{}{}OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={} {} {} {}", coretype,
                                            coretype.empty() ? "" : " ", threads, python, script, args));
  if (!out || out->find('{') == std::string::npos) return std::nullopt;
  return nlohmann::json::parse(out->substr(out->rfind('{')));
}

// [rows, cols] int64 token ids with Zipf's law over [first, first + count): id = first +
// floor(count^u) - 1 for u uniform in [0, 1), so P(id < first + c) = ln(c + 1) / ln(count), like
// words ranked by frequency. The peers draw them the same way.
inline Tensor zipf_tokens(std::int64_t rows, std::int64_t cols, std::int64_t count, Generator& gen,
                          std::int64_t first = 0) {
  const std::vector<double> u = rand_uniform({rows * cols}, 0.0, 1.0, {.dtype = DType::Float64}, gen).to_vector<double>();
  std::vector<std::int64_t> ids(u.size());
  for (std::size_t i = 0; i < u.size(); ++i)
    ids[i] = first + std::clamp<std::int64_t>(static_cast<std::int64_t>(std::pow(static_cast<double>(count), u[i])) - 1,
                                              0, count - 1);
  return from_vector(ids, {rows, cols});
}

inline constexpr const char* kNoPeer =
    "pytorch: not available (run from the repository root with python3-torch installed)\n";

// Prints the parameter counts before anything is timed. Returns the exit code to stop with when
// the peer was wanted but did not run (0, after printing kNoPeer) or counts differently (1: the
// two models are not the same, and their figures would compare different work); nothing otherwise.
inline std::optional<int> report_params(std::int64_t define_params, bool peer_wanted,
                                        const std::optional<std::int64_t>& peer_params) {
  if (peer_wanted && !peer_params) {
    fmt::print(kNoPeer);
    return 0;
  }
  if (peer_wanted && *peer_params != define_params) {
    fmt::print(stderr, "error: parameter counts differ: define {} vs pytorch {}: the two models are not the same\n",
               define_params, *peer_params);
    return 1;
  }
  fmt::print("params : define {}{}\n", define_params,
             peer_wanted ? fmt::format(", pytorch {} (equal)", *peer_params) : std::string());
  return std::nullopt;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string cpu_model() { return cpuinfo_field("model name", "unknown CPU"); }

// Where define's side of a training benchmark trains (--device cpu|cuda|emu) and in which
// precision (--precision fp32|fp16|bf16, train.precision's meaning: 16-bit GEMM inputs under
// autograd/autocast.h's policy, float32 weights, fp16 with dynamic loss scaling).
struct TrainDevice {
  Device device = Device::cpu();
  std::string precision = "fp32";
  std::optional<DType> lower;  // the GEMM inputs' 16-bit dtype; nullopt in fp32

  bool on_cpu() const { return device.is_cpu(); }
  // What the peer runs on: the GPU when define does; the CPU otherwise (the emulated device runs
  // on the CPU, and its speed says nothing about a GPU: there the peer is the CPU reference).
  bool peer_on_gpu() const { return device.is_cuda(); }
};

// The compute capability of a CUDA or emulated device (10 * major + minor); 0 when unknown.
inline int compute_capability(Device d) {
  if (d.is_emu()) return cuda_emu::compute_capability(d.index);
#if defined(DEFINE_HAS_CUDA_KERNELS)
  if (d.is_cuda()) return cuda::compute_capability(d.index);
#endif
  return 0;
}

// Parses and checks --device and --precision (throws std::runtime_error with the reason), with
// train/precision.h's rules: 16 bits only on a GPU, fp16 from sm_70, bf16 from sm_80 (the
// emulated device reports CUDA_EMU_ARCH's capability, sm_61 by default).
inline TrainDevice parse_train_device(const std::string& device, const std::string& precision) {
  TrainDevice t;
  try {
    t.device = Device::parse(device);
  } catch (const std::exception& e) {
    throw std::runtime_error("--device must be cpu, cuda or emu: " + std::string(e.what()));
  }
  // The CPU needs no backend: a CPU run does exactly what it did before these options.
  const kernels::DeviceAvailability avail =
      t.device.is_cpu() ? kernels::DeviceAvailability{} : kernels::register_devices();
  if (t.device.is_cuda() && avail.cuda_devices <= t.device.index)
    throw std::runtime_error(kernels::built_with_cuda() ? "--device " + device + ": no such GPU here"
                                                        : "--device cuda: this build has no CUDA backend");
  if (t.device.is_emu() && avail.emu_devices <= t.device.index)
    throw std::runtime_error("--device " + device + ": no such emulated device");
  if (precision != "fp32" && precision != "fp16" && precision != "bf16")
    throw std::runtime_error("--precision must be fp32, fp16 or bf16, got '" + precision + "'");
  t.precision = precision;
  if (precision == "fp32") return t;
  if (t.device.is_cpu())
    throw std::runtime_error("--precision " + precision +
                             " needs --device cuda (or emu): the CPU kernels have no "
                             "16-bit arithmetic");
  const int cc = compute_capability(t.device);
  if (precision == "fp16" && cc < 70)
    throw std::runtime_error(fmt::format("--precision fp16 needs sm_70 or newer; {} is sm_{}{}", t.device.str(), cc,
                                         t.device.is_emu() ? " (set CUDA_EMU_ARCH=75 or 80)" : ""));
  if (precision == "bf16" && cc < 80)
    throw std::runtime_error(fmt::format("--precision bf16 needs sm_80 or newer; {} is sm_{}{}", t.device.str(), cc,
                                         t.device.is_emu() ? " (set CUDA_EMU_ARCH=80)" : ""));
  t.lower = precision == "fp16" ? DType::Float16 : DType::BFloat16;
  return t;
}

// The peer's options for the same device and precision; empty on the CPU, so the CPU run's
// command line is what it always was. The emulated device's peer runs on the CPU in float32.
inline std::string peer_device_args(const TrainDevice& t) {
  if (t.on_cpu()) return {};
  if (!t.peer_on_gpu()) return " --device cpu --amp none";
  return fmt::format(" --device cuda --amp {}", t.lower ? t.precision : std::string("none"));
}

// "cuda:0 (NVIDIA H100 80GB HBM3, sm_90), precision fp16": the device line of a run on a GPU.
inline std::string describe(const TrainDevice& t) {
  std::string name = "CPU";
  if (t.device.is_emu()) name = cuda_emu::device_name(t.device.index);
#if defined(DEFINE_HAS_CUDA_KERNELS)
  if (t.device.is_cuda()) name = cuda::device_name(t.device.index);
#endif
  return fmt::format(
      "{} ({}, sm_{}), precision {}; pytorch on {}", t.device.str(), name, compute_capability(t.device), t.precision,
      t.peer_on_gpu() ? "the same GPU, amp " + (t.lower ? t.precision : "none") : std::string("the CPU in float32"));
}

// What the limit's GEMM rate measured: "SGEMM" on the CPU (as the benchmarks always printed it),
// "cuda:0 bfloat16 GEMM (4096^3)" on a GPU.
inline std::string gemm_rate_name(const TrainDevice& t) {
  if (t.on_cpu()) return "SGEMM";
  const char* dtype = !t.lower ? "float32" : *t.lower == DType::Float16 ? "float16" : "bfloat16";
  return fmt::format("{} {} GEMM ({}^3)", t.device.str(), dtype, t.device.is_cuda() ? 4096 : 256);
}

// Waits for the work queued on a GPU (nothing on the CPU), so that a host clock times it.
inline void synchronize(Device d) {
  if (!d.is_cpu()) device_interface(d.type).synchronize(d.index);
}

// The caching allocator's peak of live tensor bytes on the device (the counterpart of
// torch.cuda.max_memory_allocated); nothing on the CPU, or when the cache is off
// (DEFINE_CUDA_CACHE=0 leaves its counters at zero).
inline std::optional<double> device_peak_bytes(Device d) {
  if (d.is_emu() && cuda_emu::caching_allocator_enabled())
    return static_cast<double>(cuda_emu::allocator(d.index).stats().peak_active_bytes);
#if defined(DEFINE_HAS_CUDA_KERNELS)
  if (d.is_cuda() && cuda::caching_allocator_enabled())
    return static_cast<double>(cuda::allocator(d.index).stats().peak_active_bytes);
#endif
  return std::nullopt;
}

inline void reset_device_peak(Device d) {
  if (d.is_emu()) cuda_emu::allocator(d.index).reset_peak();
#if defined(DEFINE_HAS_CUDA_KERNELS)
  if (d.is_cuda()) cuda::allocator(d.index).reset_peak();
#endif
}

// The device's GEMM rate in GFLOP/s (best of 5) in the precision's GEMM dtype: n^3 with n = 4096
// on a GPU (large enough to reach the tensor cores' rate), 256 on the emulated device (whose
// figure only keeps the code path tested).
inline double device_gemm_gflops(const TrainDevice& t) {
  const std::int64_t n = t.device.is_cuda() ? 4096 : 256;
  Generator gen(1);
  Tensor x = copy_to_device(rand_normal({n, n}, 0, 1, {}, gen), t.device);
  Tensor y = copy_to_device(rand_normal({n, n}, 0, 1, {}, gen), t.device);
  if (t.lower) {
    x = kernels::cast(x, *t.lower);
    y = kernels::cast(y, *t.lower);
  }
  const double s = best_seconds([&] { (void)kernels::matmul(x, y); }, t.device);
  return 2.0 * static_cast<double>(n * n * n) / s / 1e9;
}

// fp16's dynamic loss scale in a benchmark's loop, as train/precision.h's DynamicLossScaler and
// PyTorch's GradScaler keep it: starts at 65536, halves on an overflow (the step is skipped),
// doubles after 2000 clean steps in a row.
struct LossScale {
  double scale = 65536;
  std::int64_t clean = 0, overflows = 0;
};

// One training step after the forward: backward of `objective`, gradient-norm clipping at `clip`
// (0: none) and the optimizer's step, as define's trainer takes it on the device:
//   CPU           the norm read on the host (optim::clip_grad_norm), as the benchmarks always did;
//   GPU, fp32 / bf16  clipped on the device without waiting for it (clip_grad_norm_on_device);
//   GPU, fp16     the objective times the loss scale, unscaled and clipped in one pass whose norm
//                 the host reads (an overflow skips the step), as GradScaler's step reads found_inf.
inline void backward_and_step(const Tensor& objective, optim::Optimizer& opt, const optim::NamedParameters& params,
                              double clip, const TrainDevice& t, LossScale& ls) {
  if (t.on_cpu()) {
    backward(objective);
    if (clip > 0) optim::clip_grad_norm(params, clip);
    opt.step();
    return;
  }
  if (t.lower != DType::Float16) {
    backward(objective);
    if (clip > 0) (void)optim::clip_grad_norm_on_device(params, clip);
    opt.step();
    return;
  }
  backward(mul(objective, ls.scale));
  const double norm = optim::unscale_clip_grad_norm(params, ls.scale, clip);
  if (!std::isfinite(norm)) {
    ls.scale /= 2;
    ls.clean = 0;
    ++ls.overflows;
    return;
  }
  opt.step();
  if (++ls.clean == 2000) {
    ls.scale *= 2;
    ls.clean = 0;
  }
}

// Bytes as MiB, or "n/a" when there is no figure.
inline std::string mib(const std::optional<double>& bytes) {
  return bytes ? fmt::format("{:.1f} MiB", *bytes / (1 << 20)) : std::string("n/a");
}

// Resident memory of a benchmark process, in two figures (bytes):
//   peak   the whole process's peak resident set (VmHWM): what the process needed, the Python
//          interpreter and libtorch's code and data included (about 0.5 GiB of the peer's figure
//          whatever the model);
//   above  the peak above the resident set just before training starts (the model, optimizer
//          and data built, nothing trained): what training itself added, the same measure on
//          both sides whatever the runtime around it. Measured by resetting the high-water mark
//          (writing "5" to /proc/self/clear_refs, Linux 4.0 and later) right before the first
//          step and reading VmHWM after the run; nothing where the reset is refused.
// The peers report the same two figures (bench/peers/peak_memory.py); several runs in one
// process or several processes keep the largest of each.
struct RssFigures {
  double peak = 0;
  std::optional<double> above = std::nullopt;

  void keep_max(const RssFigures& o) {
    peak = std::max(peak, o.peak);
    if (o.above) above = std::max(above.value_or(0), *o.above);
  }
};

// One training run's window on this process's resident memory: construct it right before the
// first training step (after the model, optimizer and data are built), call figures() after the
// run. The whole-process peak survives the reset: the high-water mark before it is kept.
class TrainingRss {
 public:
  TrainingRss() {
    (void)process_peak_bytes();  // kept before the reset
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    // Right after a reset the high-water mark is the current resident set: the baseline.
    if (clear) start_ = static_cast<double>(define::peak_rss_bytes());
  }
  // The resident set just before training; nothing where the mark could not be reset.
  std::optional<double> start() const { return start_; }
  RssFigures figures() const {
    const double hwm = static_cast<double>(define::peak_rss_bytes());
    return {.peak = process_peak_bytes(),
            .above = start_ ? std::optional<double>(std::max(0.0, hwm - *start_)) : std::nullopt};
  }
  // The whole process's peak resident set so far, across the resets.
  static double process_peak_bytes() {
    return process_peak() = std::max(process_peak(), static_cast<double>(define::peak_rss_bytes()));
  }

 private:
  // The largest high-water mark seen before the last reset of this process.
  static double& process_peak() {
    static double peak = 0;
    return peak;
  }
  std::optional<double> start_;
};

// The peer's two figures from its JSON line (peak_rss_bytes, peak_above_pre_training_bytes: null
// where its reset was refused).
inline RssFigures peer_rss(const nlohmann::json& j) {
  RssFigures r{.peak = j.at("peak_rss_bytes").get<double>()};
  if (const auto it = j.find("peak_above_pre_training_bytes"); it != j.end() && it->is_number())
    r.above = it->get<double>();
  return r;
}

// "peak RSS 251.3 MiB, peak above pre-training RSS 180.2 MiB".
inline std::string rss_text(const RssFigures& r) {
  return fmt::format("peak RSS {:.1f} MiB, peak above pre-training RSS {}", r.peak / (1 << 20), mib(r.above));
}

// The peer's memory as the table prints it: both RSS figures; on a device its peak device memory
// (torch.cuda.max_memory_allocated) first.
inline std::string peer_memory_text(const TrainDevice& t, const RssFigures& torch_rss,
                                    const std::optional<double>& torch_device) {
  return t.on_cpu()
             ? rss_text(torch_rss)
             : fmt::format("peak device memory {} (max_memory_allocated), {}", mib(torch_device), rss_text(torch_rss));
}

// define's memory over the peer's. On the CPU both RSS ratios: "memory: peak RSS 0.53x, peak above
// pre-training RSS 0.91x"; on a device its peak device memory.
inline std::string memory_ratio_text(const TrainDevice& t, const RssFigures& define_rss, const RssFigures& torch_rss,
                                     const std::optional<double>& define_device,
                                     const std::optional<double>& torch_device) {
  if (t.on_cpu())
    return fmt::format("memory: peak RSS {:.2f}x, peak above pre-training RSS {}", define_rss.peak / torch_rss.peak,
                       define_rss.above && torch_rss.above && *torch_rss.above > 0
                           ? fmt::format("{:.2f}x", *define_rss.above / *torch_rss.above)
                           : std::string("n/a"));
  return "device memory " +
         (define_device && torch_device ? fmt::format("{:.2f}x", *define_device / *torch_device) : std::string("n/a"));
}

// The last line of a run on a GPU: one JSON object that scripts (bench/peers/join_peers.py models)
// read into a table. Fields absent where there is no figure.
inline void print_device_summary(const std::string& bench, const TrainDevice& t, double define_tps,
                                 const std::optional<double>& define_peak, std::optional<double> torch_tps,
                                 std::optional<double> torch_peak, const nlohmann::json& extra = {}) {
  nlohmann::json j = {
      {"bench", bench}, {"device", t.device.str()}, {"precision", t.precision}, {"define_tokens_per_s", define_tps}};
  if (define_peak) j["define_peak_device_bytes"] = *define_peak;
  if (torch_tps) j["torch_tokens_per_s"] = *torch_tps;
  if (torch_peak) j["torch_peak_device_bytes"] = *torch_peak;
  if (torch_tps && *torch_tps > 0) j["ratio"] = define_tps / *torch_tps;
  if (define_peak && torch_peak && *torch_peak > 0) j["memory_ratio"] = *define_peak / *torch_peak;
  for (const auto& [k, v] : extra.items()) j[k] = v;
  fmt::print("json   : {}\n", j.dump());
}

}  // namespace define::bench
