// Data-parallel gradient reduction in buckets, overlapped with backward (as PyTorch DDP): the
// parameters are laid out in buckets of about `bucket_bytes`, in reverse registration order
// (roughly the order backward finishes their gradients), the first one at most 1 MB. Buckets start
// in that fixed order on every rank (as PyTorch's reducer launches them): once every gradient of
// the next bucket is final (autograd/grad_hooks.h), it is packed, scaled by this rank's weight and
// its all-reduce started, while backward goes on with the layers below. A bucket ready out of turn
// waits for the ones before it, so ranks whose batches used different parameters still issue the
// same collectives in the same order. finish() starts whatever has not started (a parameter that
// got no gradient this pass), waits, and writes the sums back into .grad.
//
// Weights: with weight w_r = (this rank's target tokens) / (all ranks' target tokens), the sum of
// w_r x (rank r's mean gradient) is the mean gradient of the whole global batch: N ranks with
// batch B/N take the same step as one process with batch B, also when ranks' token counts differ
// (translation batches). A parameter that no rank used keeps an undefined gradient, as it would
// in one process.
//
// `reduce_dtype` (train.allreduce_dtype) may name a 16-bit format for the float buckets: each
// rank's weighted gradients are rounded once into it, summed in it (each addition rounds once,
// as NCCL's 16-bit sums do) and widened back into the float32 gradients, halving the bytes each
// step moves. float16 needs the fp16 loss scale to keep small gradients above its smallest
// normal (6e-5); bfloat16 has float32's range with 8 bits of precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "autograd/grad_hooks.h"
#include "distributed/communicator.h"
#include "nn/optim/optimizer.h"

namespace define::dist {

class GradientReducer final : public LeafGradientObserver {
 public:
  // `params`: every trainable parameter, all on one device. Checks that every rank lays out the
  // same buckets (same parameters, shapes and dtypes), naming the first difference.
  GradientReducer(Communicator& comm, const optim::NamedParameters& params, std::size_t bucket_bytes,
                  std::optional<DType> reduce_dtype = std::nullopt);
  ~GradientReducer() override;

  // A new step: `local_tokens` of this rank; sums the token count over ranks (one small
  // all-reduce) to fix this rank's weight. Returns the global token count.
  std::int64_t begin_step(std::int64_t local_tokens);
  // Buckets start reducing as their gradients complete during the backward pass from `loss` that
  // follows, until finish(). Call it right before the step's last backward (earlier passes of a
  // gradient accumulation only accumulate). Parameters `loss` does not depend on (an adaptive band
  // without a token in this rank's batch) are final already: found by walking the graph from
  // `loss` (as DDP's find_unused_parameters), they do not hold back their buckets.
  void watch_backward(const Tensor& loss);
  // Completes every bucket and writes the reduced gradients into .grad.
  void finish();

  std::size_t num_buckets() const { return buckets_.size(); }
  // The dtype bucket i is all-reduced in.
  DType bucket_dtype(std::size_t i) const { return buckets_.at(i).flat.dtype(); }
  // Time spent inside finish() waiting for reductions (not hidden behind backward) and the time
  // from the first reduction's start to finish()'s end, summed over steps since the last reset.
  struct Timing {
    double wait_s = 0, comm_window_s = 0;
    std::int64_t buckets_started_in_backward = 0, buckets = 0;
  };
  Timing timing() const { return timing_; }
  void reset_timing() { timing_ = {}; }

  void gradient_ready(const TensorImpl* leaf) override;

 private:
  struct Bucket {
    std::vector<std::size_t> members;   // indices into params_
    std::vector<std::int64_t> offsets;  // element offset of each member in `flat`
    Tensor flat;
    std::size_t ready = 0;
    bool started = false;
    std::unique_ptr<PendingReduce> pending;
  };
  void start(Bucket& b);
  void poll();

  Communicator& comm_;
  optim::NamedParameters params_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const TensorImpl*, std::size_t> param_of_;  // leaf -> index into params_
  std::vector<std::size_t> bucket_of_;                           // param index -> bucket
  std::vector<char> seen_;                                       // param got its gradient this pass
  std::size_t next_ = 0;                                         // the next bucket to start
  Tensor used_;                                                  // int64 [params]: ranks that used each
  double weight_ = 1;
  bool watching_ = false;
  std::unique_ptr<LeafGradientObserverGuard> guard_;
  double first_start_ = -1;
  Timing timing_;
};

}  // namespace define::dist
