// Batching for truncated BPTT (data/batching.h): batchify's time-major layout, AWD-LSTM's variable
// sequence lengths (exact values for a seed, computed by an independent Python Philox4x32-10 of
// the same draw), coverage of every row exactly once per epoch, targets shifted by one, the
// length distribution, determinism per seed, and resuming from a saved position.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "data/batching.h"
#include "kernels/devices.h"
#include "support/common.h"

using namespace define;
using namespace define::data;
using Catch::Contains;
using define::test::error_of;

namespace {

std::vector<std::int64_t> iota_ids(std::int64_t n) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = i;
  return ids;
}

// One epoch's batches as (row, seq_len, drawn length) triples.
struct Step {
  std::int64_t row, seq_len, drawn;
  bool operator==(const Step&) const = default;
};

Step step_of(const Batch& b, std::int64_t bptt) {
  return {b.row, b.seq_len, static_cast<std::int64_t>(std::llround(b.lr_scale * static_cast<double>(bptt)))};
}

std::vector<Step> run_epoch(BpttIterator& it) {
  std::vector<Step> steps;
  while (std::optional<Batch> b = it.next()) steps.push_back(step_of(*b, it.options().bptt));
  return steps;
}

}  // namespace

TEST_CASE("batchify: time-major streams, remainder dropped", "[data]") {
  // 23 tokens in 4 streams: T = 5, stream b = ids[5b, 5b + 5), tokens 20..22 dropped.
  const Tensor data = batchify(iota_ids(23), 4);
  REQUIRE(data.shape() == Shape{5, 4});
  CHECK(data.dtype() == DType::Int64);
  CHECK(data.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 5, 10, 15,  //
                                                                    1, 6, 11, 16,  //
                                                                    2, 7, 12, 17,  //
                                                                    3, 8, 13, 18,  //
                                                                    4, 9, 14, 19});
  const Tensor one = batchify(iota_ids(23), 1);
  CHECK(one.shape() == Shape{23, 1});
  CHECK(one.to_vector<std::int64_t>() == iota_ids(23));
  CHECK(batchify(iota_ids(8), 8).shape() == Shape{1, 8});

  CHECK_THAT(error_of([] { batchify(iota_ids(3), 4); }), Contains("3 tokens cannot fill one row of 4 streams"));
  CHECK_THAT(error_of([] { batchify(iota_ids(3), 0); }), Contains("batch size must be at least 1, got 0"));

  // On the emulated CUDA device (the test links the kernels that register it): same values.
  REQUIRE(kernels::register_devices().emu);
  const Tensor emu = batchify(iota_ids(23), 4, Device::emu());
  CHECK(emu.device() == Device::emu());
  CHECK(emu.to_vector<std::int64_t>() == data.to_vector<std::int64_t>());
}

TEST_CASE("get_batch: targets are the inputs shifted by one row", "[data]") {
  const Tensor data = batchify(iota_ids(30), 3);  // T = 10, data[t][b] = 10b + t
  const Batch b = get_batch(data, 2, 4);
  CHECK(b.input.shape() == Shape{4, 3});
  CHECK(b.input.shares_storage_with(data));
  CHECK(b.input.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 12, 22, 3, 13, 23, 4, 14, 24, 5, 15, 25});
  CHECK(b.target.to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 13, 23, 4, 14, 24, 5, 15, 25, 6, 16, 26});
  // Capped at the data's end: from row 7 only rows 7, 8 have a next row.
  const Batch end = get_batch(data, 7, 50);
  CHECK(end.seq_len == 2);
  CHECK(end.target.to_vector<std::int64_t>() == std::vector<std::int64_t>{8, 18, 28, 9, 19, 29});
  CHECK_THAT(error_of([&] { get_batch(data, 9, 1); }), Contains("row 9 is outside [0, 8]"));
}

TEST_CASE("bptt iterator: AWD-LSTM lengths for a seed", "[data]") {
  // Drawn lengths for seed 20261122, bptt 70, from an independent Python implementation of
  // Philox4x32-10 and the same draw (u0 < 0.95 ? 70 : 35, + 5 * Box-Muller cosine, int(), max 5).
  // The fifth batch is a half-length one.
  const std::vector<std::int64_t> expected = {77, 72, 65, 67, 32, 77, 67, 67, 67, 72, 65, 67};
  BpttIterator it(batchify(iota_ids(2 * 1000), 2), BpttOptions{.seed = 20261122});
  std::int64_t row = 0;
  for (std::int64_t want : expected) {
    const std::optional<Batch> b = it.next();
    REQUIRE(b);
    CHECK(b->row == row);
    CHECK(b->seq_len == want);
    CHECK(b->lr_scale == static_cast<double>(want) / 70.0);
    row += want;
  }
  CHECK(it.position().row == row);
  CHECK(it.position().rng.offset == 4 * expected.size());
}

TEST_CASE("bptt iterator: every row once per epoch, targets shifted, lengths in bounds", "[data]") {
  // data[t][b] = 667 b + t, so a target is its input + 1.
  const std::int64_t B = 3, T = 667;
  const Tensor data = batchify(iota_ids(B * T + 2), B);
  BpttOptions opt;
  opt.bptt = 10;
  opt.min_len = 2;
  opt.seed = 5;
  BpttIterator it(data, opt);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen(static_cast<std::size_t>(T), 0);
    std::int64_t next_row = 0, batches = 0;
    while (std::optional<Batch> b = it.next()) {
      ++batches;
      CHECK(b->row == next_row);
      const std::int64_t drawn = std::llround(b->lr_scale * 10.0);
      CHECK(drawn >= 2);
      // Capped only by the end of the data.
      CHECK(b->seq_len == std::min(drawn, T - 1 - b->row));
      REQUIRE(b->input.shape() == Shape{b->seq_len, B});
      const auto in = b->input.to_vector<std::int64_t>(), tg = b->target.to_vector<std::int64_t>();
      for (std::int64_t t = 0; t < b->seq_len; ++t)
        for (std::int64_t s = 0; s < B; ++s) {
          const auto k = static_cast<std::size_t>(t * B + s);
          REQUIRE(in[k] == s * T + b->row + t);
          REQUIRE(tg[k] == in[k] + 1);
        }
      for (std::int64_t r = b->row; r < b->row + b->seq_len; ++r) ++seen[static_cast<std::size_t>(r)];
      next_row += b->seq_len;
    }
    // Rows 0 .. T-2 are inputs exactly once; row T-1 is only ever a target.
    CHECK(next_row == T - 1);
    CHECK(std::count(seen.begin(), seen.end() - 1, 1) == T - 1);
    CHECK(seen.back() == 0);
    CHECK(batches > (T - 1) / 40);
    CHECK(it.position().epoch == epoch + 1);
    CHECK(it.position().row == 0);
  }
}

TEST_CASE("bptt iterator: length distribution of AWD-LSTM's draw", "[data]") {
  // bptt 70: base 70 (p 0.95) or 35, + N(0, 5), truncated: mean 0.95 * 69.5 + 0.05 * 34.5 = 67.75.
  BpttIterator it(batchify(iota_ids(150'000), 1), BpttOptions{.seed = 3});
  double sum = 0;
  std::int64_t n = 0, half = 0;
  const std::vector<Step> steps = run_epoch(it);
  for (std::size_t i = 0; i + 1 < steps.size(); ++i) {  // the last batch is capped
    const Step& s = steps[i];
    CHECK(s.seq_len == s.drawn);
    CHECK(s.drawn >= 5);
    CHECK(s.drawn <= 70 + 30);  // 6 standard deviations
    sum += static_cast<double>(s.drawn);
    ++n;
    if (s.drawn < 52) ++half;  // the two bases are 7 standard deviations apart
  }
  const double mean = sum / static_cast<double>(n);
  const double half_share = static_cast<double>(half) / static_cast<double>(n);
  INFO("batches " << n << ", mean length " << mean << ", half-length share " << half_share);
  CHECK(n > 2000);
  CHECK(std::abs(mean - 67.75) < 0.75);            // standard error ~0.2
  CHECK(std::abs(half_share - 0.05) < 0.015);      // standard error ~0.005
}

TEST_CASE("bptt iterator: deterministic per seed, resume replays the rest exactly", "[data]") {
  const Tensor data = batchify(iota_ids(4 * 3001), 4);
  BpttOptions opt;
  opt.bptt = 20;
  opt.seed = 11;
  BpttIterator a(data, opt), b(data, opt);
  BpttOptions other = opt;
  other.seed = 12;
  BpttIterator c(data, other);
  const std::vector<Step> ea = run_epoch(a), eb = run_epoch(b), ec = run_epoch(c);
  CHECK(ea == eb);
  CHECK(ea != ec);

  // Epoch 1 of `a`: save the position (as a checkpoint string) after 17 batches.
  for (int i = 0; i < 17; ++i) REQUIRE(a.next());
  const std::string saved = to_string(a.position());
  CHECK(saved == to_string(BpttPosition{1, a.position().row, {11, 4 * (ea.size() + 17)}}));
  std::vector<Step> rest_a = run_epoch(a);
  const std::vector<Step> next_epoch_a = run_epoch(a);

  // A fresh iterator with another seed, moved to the saved position, continues identically:
  // the rest of epoch 1 and all of epoch 2, values included.
  other.seed = 999;
  BpttIterator r(data, other);
  r.restore(saved);
  CHECK(r.position() == parse_bptt_position(saved));
  const std::optional<Batch> first = r.next();
  REQUIRE(first);
  CHECK(step_of(*first, 20) == rest_a.front());
  CHECK(first->input.to_vector<std::int64_t>() ==
        get_batch(data, rest_a.front().row, rest_a.front().seq_len).input.to_vector<std::int64_t>());
  std::vector<Step> rest_r = run_epoch(r);
  rest_r.insert(rest_r.begin(), step_of(*first, 20));
  CHECK(rest_r == rest_a);
  CHECK(run_epoch(r) == next_epoch_a);
  CHECK(r.position() == a.position());
  CHECK(a.position().epoch == 3);
}

TEST_CASE("bptt iterator: start_epoch, fixed lengths, steps per epoch", "[data]") {
  const Tensor data = batchify(iota_ids(2 * 101), 2);  // T = 101: input rows 0..99
  BpttIterator it(data, BpttOptions{.bptt = 30, .variable_length = false, .seed = 4});
  CHECK(it.approx_steps_per_epoch() == 3);
  it.start_epoch();  // no-op on a fresh iterator
  CHECK(it.position() == BpttPosition{0, 0, {4, 0}});
  std::vector<Step> steps = run_epoch(it);
  // Fixed lengths: 30, 30, 30, 10 with lr_scale 1 (drawn = 30 for every batch), no random draws.
  CHECK(steps == std::vector<Step>{{0, 30, 30}, {30, 30, 30}, {60, 30, 30}, {90, 10, 30}});
  CHECK(it.position() == BpttPosition{1, 0, {4, 0}});
  it.start_epoch();  // no-op right after an epoch ended
  CHECK(it.position().epoch == 1);
  REQUIRE(it.next());
  it.start_epoch();  // mid-epoch: the rest of epoch 1 is dropped
  CHECK(it.position() == BpttPosition{2, 0, {4, 0}});
  CHECK(it.next()->row == 0);
}

TEST_CASE("bptt position: text form and errors", "[data]") {
  const BpttPosition p{7, 1234, {18446744073709551615ull, 96}};
  CHECK(to_string(p) == "epoch=7 row=1234 seed=18446744073709551615 rng_offset=96");
  CHECK(parse_bptt_position(to_string(p)) == p);
  CHECK_THAT(error_of([] { parse_bptt_position("epoch=1 row=2 seed=3"); }), Contains("expected 'rng_offset=<n>'"));
  CHECK_THAT(error_of([] { parse_bptt_position("epoch=1 row=x seed=3 rng_offset=4"); }), Contains("not followed by a number"));
  CHECK_THAT(error_of([] { parse_bptt_position("epoch=1 row=2 seed=3 rng_offset=4 more"); }), Contains("trailing text 'more'"));
  CHECK_THAT(error_of([] { parse_bptt_position("epoch=-1 row=2 seed=3 rng_offset=4"); }), Contains("negative epoch or row"));

  BpttIterator it(batchify(iota_ids(10), 1), BpttOptions{});
  CHECK_THAT(error_of([&] { it.set_position({0, 10, {1, 0}}); }), Contains("row 10 is outside [0, 9]"));
}

TEST_CASE("bptt iterator: bad data and options are refused", "[data]") {
  CHECK_THAT(error_of([] { BpttIterator(batchify(iota_ids(4), 4), BpttOptions{}); }),
             Contains("data has 1 row(s); at least 2 are needed"));
  CHECK_THAT(error_of([] { BpttIterator(zeros({5, 2}), BpttOptions{}); }), Contains("data must be int64, got float32"));
  CHECK_THAT(error_of([] { BpttIterator(batchify(iota_ids(10), 1), BpttOptions{.bptt = 0}); }),
             Contains("bptt must be at least 1, got 0"));
  CHECK_THAT(error_of([] { BpttIterator(batchify(iota_ids(10), 1), BpttOptions{.full_length_prob = 1.5}); }),
             Contains("full_length_prob must be in [0, 1], got 1.5"));
  CHECK_THAT(error_of([] { FixedLengthIterator(batchify(iota_ids(10), 1), 0); }), Contains("seq_len must be at least 1, got 0"));
}

TEST_CASE("fixed-length iterator: evaluation batches cover the data once", "[data]") {
  const Tensor data = batchify(iota_ids(2 * 23), 2);  // T = 23: inputs rows 0..21
  FixedLengthIterator it(data, 5);
  std::vector<std::int64_t> rows, lens;
  while (std::optional<Batch> b = it.next()) {
    rows.push_back(b->row);
    lens.push_back(b->seq_len);
    CHECK(b->lr_scale == 1.0);
    CHECK(b->target.to_vector<std::int64_t>() == get_batch(data, b->row, b->seq_len).target.to_vector<std::int64_t>());
  }
  CHECK(rows == std::vector<std::int64_t>{0, 5, 10, 15, 20});
  CHECK(lens == std::vector<std::int64_t>{5, 5, 5, 5, 2});
  // Back at row 0 for the next evaluation; set_row resumes mid-way.
  CHECK(it.row() == 0);
  it.set_row(15);
  REQUIRE(it.next()->row == 15);
  CHECK(it.next()->seq_len == 2);
  CHECK_FALSE(it.next());
}
