// Translation batches by token count (fairseq's --max-tokens), for data/parallel.h's sentences.
//
// Layout: the sentences are sorted by (source length, target length, index) and cut, in that order,
// into batches as large as max_tokens allows: a batch of B sentences whose longest source has S
// tokens and longest target T tokens (eos included) takes B * max(S, T) <= max_tokens. Sorting
// keeps padding low; the batches are the same every epoch. A single sentence longer than
// max_tokens is an error naming it (load the data with a max_len, or raise max_tokens).
//
// Order: with shuffle, every epoch visits the batches in a random order that depends only on
// (seed, epoch): a Fisher-Yates shuffle driven by Philox 4x32-10 (core/philox.h) keyed by the seed,
// with the epoch in the upper half of the counter, so every epoch has its own stream and the order
// is the same on every machine and after a resume. Without shuffle (evaluation) the order is the
// layout order, every epoch.
//
// Tensors are int64 on the CPU, time-first [length, batch] as models/delight_nmt.h reads them; the
// caller moves them to its device. Column b holds sentence ids[b]:
//   src      x_1 .. x_m eos pad ..      (the source as loaded: pieces + eos)
//   tgt_in   bos y_1 .. y_n pad ..      (decoder input: the target shifted right, starting at bos)
//   tgt_out  y_1 .. y_n eos pad ..      (what the decoder predicts)
// tgt_in and tgt_out have the same length T; pad and bos are the data's (ParallelData::pad_id,
// bos_id: the subword model's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/parallel.h"

namespace define::data {

struct TranslationBatch {
  Tensor src;      // [S, B] int64
  Tensor tgt_in;   // [T, B] int64
  Tensor tgt_out;  // [T, B] int64
  std::vector<std::int64_t> ids;  // sentence indices into ParallelData, in column order
  std::int64_t src_tokens = 0;    // non-pad entries of src (eos included)
  std::int64_t tgt_tokens = 0;    // non-pad entries of tgt_out (eos included): the loss's token count
};

class TokenBatcher {
 public:
  // `data` must outlive the batcher (it is read, not copied: a WMT-sized corpus is large). Refuses
  // no sentences, max_tokens < 1, a sentence with an empty side (load_parallel never makes one)
  // and a sentence longer than max_tokens. Starts at epoch 0, batch 0.
  TokenBatcher(const ParallelData& data, std::int64_t max_tokens, bool shuffle, std::uint64_t seed);
  TokenBatcher(ParallelData&&, std::int64_t, bool, std::uint64_t) = delete;  // would dangle

  // Batches in one epoch (of this shard, see shard()).
  std::int64_t num_batches() const { return static_cast<std::int64_t>(order_.size()); }
  // Starts epoch `epoch` (>= 0) at its first batch.
  void start_epoch(std::int64_t epoch) { set_position(epoch, 0); }
  // The epoch's next batch; nullopt once the epoch is done (until start_epoch / set_position).
  std::optional<TranslationBatch> next();

  std::int64_t epoch() const { return epoch_; }
  // Index of the next batch within the epoch, in [0, num_batches()]: with epoch(), what a
  // checkpoint saves; set_position(epoch, position) then continues with exactly the same batches.
  std::int64_t position() const { return index_; }
  // Refuses a negative epoch and an index outside [0, num_batches()].
  void set_position(std::int64_t epoch, std::int64_t index);

  // Data-parallel training: rank `rank` of `world` takes the epoch's batches rank, rank + world,
  // rank + 2 world, ... of the (shared, seeded) order. Ranks differ by at most one batch when
  // world does not divide the count; the caller decides what to do with that. Restarts the
  // current epoch. shard(0, 1) is the default: every batch.
  void shard(int rank, int world);

  // Batches of the layout (sentence indices, in column order), before any shuffle.
  const std::vector<std::vector<std::int64_t>>& layout() const { return batches_; }
  // The batch with layout index k (what next() returns for it).
  TranslationBatch make_batch(std::int64_t k) const;
  // "<n> sentences, <b> batches, max_tokens <m>, CRC-32 <8 hex digits of the layout>": saved with a
  // position, so that a resume refuses data or settings that would lay the batches out differently.
  std::string fingerprint() const;

 private:
  void build_order();

  const ParallelData* data_;
  std::int64_t max_tokens_;
  bool shuffle_;
  std::uint64_t seed_;
  std::vector<std::vector<std::int64_t>> batches_;
  int rank_ = 0, world_ = 1;
  std::int64_t epoch_ = 0, index_ = 0;
  std::vector<std::int64_t> order_;  // layout indices of this shard's batches, in this epoch's order
};

}  // namespace define::data
