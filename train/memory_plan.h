// How much device memory a training run needs per rank, before it is started: what `define memory`
// prints. The persistent parts are counted (weights, optimizer state, the data-parallel buckets);
// the rest is measured, by running one training step's forward and backward passes of the config's
// model at the config's per-rank batch (its chunks under update_freq, the layers' inputs only under
// recompute) on the emulated GPU: the GPU code path itself, with its workspace and its caching
// allocator, whose counters give the peak. In a dry run (the default) the emulator checks launches
// and GEMMs without running them, so a paper-sized model is planned in seconds; what is allocated
// does not depend on the values, so the dry run's peak is the full run's (tests/train/
// memory_plan_test.cpp holds them equal). The CPU can be measured instead (its kernels' workspace
// differs: docs/data-parallel.md gives both).
//
// A GPU adds the CUDA context (an allowance) to the caching allocator's reserved bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/device.h"
#include "core/tensor.h"

namespace define::train {

struct MemoryPlanOptions {
  int ranks = 1;
  std::int64_t vocab = 0;             // 0: the config's model.vocab_size
  std::int64_t sentence_length = 30;  // translation: tokens a sentence (a batch holds data.max_tokens)
  Device device = Device::emu(0);     // where the step is measured: emu:<i> or cpu
  bool dry_run = true;                // on the emulated device: allocate without computing
};

struct MemoryPlan {
  std::string model_type, optimizer;
  std::int64_t parameters = 0;
  std::int64_t update_freq = 1;
  bool recompute = false;
  std::string pass;                 // the shape of one forward / backward pass, e.g. "[150, 15] tokens, memory 150"
  std::size_t weights = 0;          // 4 bytes a parameter
  std::size_t gradients = 0;        // 4 bytes a parameter (part of `step`)
  std::size_t optimizer_state = 0;  // Adam's two moments, SGD's momentum, NT-ASGD's average
  std::size_t buckets = 0;          // the gradient reducer's flat buffers (several ranks only)
  // Measured: the peak of one step's passes above the weights (activations, their gradients, the
  // parameter gradients, workspace); with update_freq, over two passes into the same gradients.
  std::size_t step = 0;
  // Measured on the emulated GPU only (0 on the CPU): the caching allocator's reserved bytes at the
  // end (segments are kept, so this is their high-water mark), the weights' segments included.
  std::size_t reserved = 0;

  std::size_t peak_active() const { return weights + step + optimizer_state + buckets; }
};

MemoryPlan plan_memory(const Config& cfg, const MemoryPlanOptions& options);

// The token ids a plan's step runs on: Zipf-like (id r drawn with probability ~ 1 / (r + 1), ids
// below `lowest` reserved): how many tokens reach the adaptive bands decides their activations, and
// text reaches the tail bands with few of its tokens.
Tensor zipf_tokens(const Shape& shape, std::int64_t vocab, std::int64_t lowest, std::uint64_t seed);

// The vocabulary size a config's model is built with, as `define train` finds it: the config's
// model.vocab_size, else (translation) data.subword.vocab_size, else the training split of the
// corpus the data section names.
std::int64_t config_vocab_size(const Config& cfg);

// CUDA context, cuBLAS workspace and NCCL's buffers: an allowance, not a measurement (no GPU was
// at hand when it was written; a CUDA context on a 1080 Ti / 2080 Ti takes 0.3 to 0.5 GiB).
inline constexpr std::size_t kContextAllowance = std::size_t{512} << 20;

// What a GPU would hold at the peak: the caching allocator's reserved bytes (on the CPU, the peak
// active bytes) with the counted parts the step did not allocate, and the context allowance.
std::size_t predicted_device_bytes(const MemoryPlan& plan);

}  // namespace define::train
