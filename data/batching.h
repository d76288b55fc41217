// Batching a token stream for truncated back-propagation through time (AWD-LSTM, Merity et al.
// 2018, main.py / utils.py).
//
// batchify lays the stream out as B parallel streams, time-major: data[t][b] = ids[b * T + t],
// T = n / B, the n % B tokens at the end dropped. A batch at row i is input = data[i, i + L) and
// target = data[i + 1, i + 1 + L): the next token of every stream.
//
// BpttIterator (training) draws every batch's length as AWD-LSTM does:
//     base    = bptt with probability 0.95, else bptt / 2
//     drawn   = max(5, trunc(N(base, 5)))
//     seq_len = min(drawn, T - 1 - i)          (never past the data)
//     lr_scale = drawn / bptt                   (the caller multiplies its learning rate by it for
//                                                this batch, as AWD-LSTM does before capping)
// and advances i by seq_len. Unlike AWD-LSTM's `while i < len - 1 - 1`, an epoch runs until every
// row 0 .. T-2 has been an input row exactly once (AWD-LSTM can skip the very last target row).
//
// With variable_length off every batch is bptt rows (the last one shorter) and lr_scale is 1.
//
// Randomness: the Philox 4x32-10 stream of core/philox.h keyed by the seed. Each batch uses one
// Philox block (4 words; what Generator::reserve(3) would reserve): word 0 picks the base length,
// words 1 and 2 give the normal draw by Box-Muller, word 3 is unused. The state is therefore a
// define::GeneratorState (seed, offset), and the stream continues across epochs. The position
// (epoch, row, rng state) is all an iterator has: restoring it replays the remaining batches
// exactly (lengths use std::log/std::cos, so bit-identical replay assumes the same libm).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/generator.h"
#include "core/tensor.h"

namespace define::data {

// ids -> int64 tensor [n / B, B] on `device` (time-major, remainder dropped). Refuses B < 1 and a
// stream shorter than B tokens (no full row).
Tensor batchify(const std::vector<std::int64_t>& ids, std::int64_t batch_size, Device device = Device::cpu());

struct Batch {
  Tensor input;   // [seq_len, B] int64: a view of data rows [row, row + seq_len) (no copy)
  Tensor target;  // [seq_len, B] int64: rows [row + 1, row + 1 + seq_len)
  std::int64_t row = 0;      // first input row in the batchified data
  std::int64_t seq_len = 0;  // rows in this batch
  double lr_scale = 1.0;     // learning-rate factor for this batch (1 for fixed-length batches)
};

// AWD-LSTM's get_batch: rows [row, row + L) and [row + 1, row + 1 + L) as views, with
// L = min(seq_len, T - 1 - row). Refuses a row outside [0, T - 2] and seq_len < 1.
Batch get_batch(const Tensor& data, std::int64_t row, std::int64_t seq_len);

struct BpttOptions {
  std::int64_t bptt = 70;          // AWD-LSTM's PTB / WikiText-2 setting
  bool variable_length = true;     // false: every batch bptt rows, lr_scale 1, no random draws
  std::uint64_t seed = 0;          // keys the Philox stream of the lengths
  double full_length_prob = 0.95;  // probability of base = bptt (else bptt / 2)
  double stddev = 5.0;             // of the normal draw around base
  std::int64_t min_len = 5;        // lower bound of the drawn length
};

// Where a BpttIterator stands: the next batch starts at `row` of epoch `epoch` and draws its
// length from `rng`.
struct BpttPosition {
  std::int64_t epoch = 0;
  std::int64_t row = 0;
  GeneratorState rng;
  bool operator==(const BpttPosition& o) const {
    return epoch == o.epoch && row == o.row && rng.seed == o.rng.seed && rng.offset == o.rng.offset;
  }
};

// "epoch=<e> row=<r> seed=<s> rng_offset=<o>": a string for a checkpoint's run map.
std::string to_string(const BpttPosition& pos);
// Parses to_string's form; anything else throws quoting the text.
BpttPosition parse_bptt_position(std::string_view text);

class BpttIterator {
 public:
  // data: int64 [T, B] contiguous (batchify's output), T >= 2. Starts at epoch 0, row 0 with the
  // Philox stream (options.seed, 0).
  BpttIterator(Tensor data, BpttOptions options);

  // The next batch of the current epoch; nullopt once the epoch is done, and the position then
  // moves to (epoch + 1, row 0), so the next call starts the next epoch.
  std::optional<Batch> next();
  // Begins a fresh epoch: a no-op at row 0 (a new iterator, or one whose epoch just ended);
  // mid-epoch it drops the rest of the epoch and moves to (epoch + 1, row 0).
  void start_epoch();

  BpttPosition position() const { return pos_; }
  // Refuses a negative epoch and a row outside [0, T - 1].
  void set_position(const BpttPosition& pos);
  // set_position(parse_bptt_position(text)): for a position saved with to_string in a checkpoint.
  void restore(std::string_view text) { set_position(parse_bptt_position(text)); }

  std::int64_t rows() const { return data_.size(0); }
  // (T - 1) / bptt, at least 1: AWD-LSTM's batch count for progress logs (the real count varies
  // with the drawn lengths).
  std::int64_t approx_steps_per_epoch() const;
  const BpttOptions& options() const { return options_; }

 private:
  Tensor data_;
  BpttOptions options_;
  BpttPosition pos_;
};

// Evaluation batches: every batch seq_len rows (the last one shorter), lr_scale 1.
class FixedLengthIterator {
 public:
  FixedLengthIterator(Tensor data, std::int64_t seq_len);
  // The next batch; nullopt at the end of the data, after which the iterator is back at row 0.
  std::optional<Batch> next();
  std::int64_t row() const { return row_; }
  // Refuses a row outside [0, T - 1].
  void set_row(std::int64_t row);
  std::int64_t rows() const { return data_.size(0); }

 private:
  Tensor data_;
  std::int64_t seq_len_;
  std::int64_t row_ = 0;
};

}  // namespace define::data
