#include "data/batching.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "core/error.h"
#include "core/factory.h"
#include "core/philox.h"

namespace define::data {

Tensor batchify(const std::vector<std::int64_t>& ids, std::int64_t batch_size, Device device) {
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  if (batch_size < 1) fail("batchify", "batch size must be at least 1, got {}", batch_size);
  const std::int64_t T = n / batch_size;
  if (T == 0) fail("batchify", "{} tokens cannot fill one row of {} streams", n, batch_size);
  // Stream b is the contiguous stretch ids[b*T, (b+1)*T); laid out time-major so that a batch of
  // consecutive time steps is a contiguous block of rows.
  // Written straight into the tensor: a corpus of WikiText-103's size is 0.8 GB of int64 ids, and
  // a vector in between would hold a third copy at the peak.
  Tensor host = empty(Shape{T, batch_size}, {.dtype = DType::Int64});
  std::int64_t* out = host.data<std::int64_t>();
  for (std::int64_t b = 0; b < batch_size; ++b)
    for (std::int64_t t = 0; t < T; ++t) out[t * batch_size + b] = ids[static_cast<std::size_t>(b * T + t)];
  return device.is_cpu() ? host : copy_to_device(host, device);
}

namespace {

void check_batched(const Tensor& data, std::string_view who) {
  if (!data.defined()) fail(who, "undefined data tensor");
  if (data.dim() != 2) fail(who, "data must be [T, B] (batchify's output), got {} dims", data.dim());
  if (data.dtype() != DType::Int64) fail(who, "data must be int64, got {}", dtype_name(data.dtype()));
  if (!data.is_contiguous()) fail(who, "data must be contiguous");
  if (data.size(0) < 2) fail(who, "data has {} row(s); at least 2 are needed for one input/target pair", data.size(0));
}

Batch slice_batch(const Tensor& data, std::int64_t row, std::int64_t len, double lr_scale) {
  const std::int64_t B = data.size(1);
  Batch b;
  b.input = data.as_strided({len, B}, {B, 1}, data.offset() + row * B);
  b.target = data.as_strided({len, B}, {B, 1}, data.offset() + (row + 1) * B);
  b.row = row;
  b.seq_len = len;
  b.lr_scale = lr_scale;
  return b;
}

}  // namespace

Batch get_batch(const Tensor& data, std::int64_t row, std::int64_t seq_len) {
  check_batched(data, "get_batch");
  const std::int64_t T = data.size(0);
  if (row < 0 || row > T - 2) fail("get_batch", "row {} is outside [0, {}] for {} rows", row, T - 2, T);
  if (seq_len < 1) fail("get_batch", "seq_len must be at least 1, got {}", seq_len);
  return slice_batch(data, row, std::min(seq_len, T - 1 - row), 1.0);
}

std::string to_string(const BpttPosition& pos) {
  return fmt::format("epoch={} row={} seed={} rng_offset={}", pos.epoch, pos.row, pos.rng.seed, pos.rng.offset);
}

namespace {

// Reads "<key>=<number>" at the front of `text` (after spaces) and removes it.
template <typename T>
T take_field(std::string_view& text, std::string_view key, std::string_view whole) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  const std::string prefix = std::string(key) + "=";
  if (!text.starts_with(prefix))
    fail("parse_bptt_position", "expected '{}<n>' in '{}' (format: epoch=E row=R seed=S rng_offset=O)", prefix, whole);
  text.remove_prefix(prefix.size());
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data())
    fail("parse_bptt_position", "'{}' in '{}' is not followed by a number in range", prefix, whole);
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  if (!text.empty() && text.front() != ' ')
    fail("parse_bptt_position", "unexpected character after '{}' in '{}'", key, whole);
  return value;
}

}  // namespace

BpttPosition parse_bptt_position(std::string_view text) {
  std::string_view rest = text;
  BpttPosition pos;
  pos.epoch = take_field<std::int64_t>(rest, "epoch", text);
  pos.row = take_field<std::int64_t>(rest, "row", text);
  pos.rng.seed = take_field<std::uint64_t>(rest, "seed", text);
  pos.rng.offset = take_field<std::uint64_t>(rest, "rng_offset", text);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (!rest.empty()) fail("parse_bptt_position", "trailing text '{}' in '{}'", rest, text);
  if (pos.epoch < 0 || pos.row < 0) fail("parse_bptt_position", "negative epoch or row in '{}'", text);
  return pos;
}

BpttIterator::BpttIterator(Tensor data, BpttOptions options) : data_(std::move(data)), options_(options) {
  check_batched(data_, "BpttIterator");
  if (options_.bptt < 1) fail("BpttIterator", "bptt must be at least 1, got {}", options_.bptt);
  if (options_.min_len < 1) fail("BpttIterator", "min_len must be at least 1, got {}", options_.min_len);
  if (!(options_.full_length_prob >= 0.0 && options_.full_length_prob <= 1.0))
    fail("BpttIterator", "full_length_prob must be in [0, 1], got {}", options_.full_length_prob);
  if (!(options_.stddev >= 0.0)) fail("BpttIterator", "stddev must be >= 0, got {}", options_.stddev);
  pos_.rng = GeneratorState{options_.seed, 0};
}

std::optional<Batch> BpttIterator::next() {
  const std::int64_t T = rows();
  if (pos_.row >= T - 1) {
    ++pos_.epoch;
    pos_.row = 0;
    return std::nullopt;
  }
  if (!options_.variable_length) {
    const std::int64_t len = std::min(options_.bptt, T - 1 - pos_.row);
    Batch b = slice_batch(data_, pos_.row, len, 1.0);
    pos_.row += len;
    return b;
  }
  // One Philox block per batch (see the header): word 0 chooses the base, words 1-2 Box-Muller.
  const std::uint64_t seed = pos_.rng.seed, off = pos_.rng.offset;
  pos_.rng.offset += 4;
  const double u0 = philox::u32_to_unit_double(philox::random_u32(seed, off, 0));
  const double u1 = 1.0 - philox::u32_to_unit_double(philox::random_u32(seed, off, 1));  // (0, 1]
  const double u2 = philox::u32_to_unit_double(philox::random_u32(seed, off, 2));
  const double base =
      u0 < options_.full_length_prob ? static_cast<double>(options_.bptt) : static_cast<double>(options_.bptt) / 2.0;
  const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  // trunc like Python's int(); the max() then keeps the length >= min_len whatever the draw.
  const std::int64_t drawn =
      std::max(options_.min_len, static_cast<std::int64_t>(std::trunc(base + options_.stddev * normal)));
  const std::int64_t len = std::min(drawn, T - 1 - pos_.row);
  Batch b = slice_batch(data_, pos_.row, len, static_cast<double>(drawn) / static_cast<double>(options_.bptt));
  pos_.row += len;
  return b;
}

void BpttIterator::start_epoch() {
  if (pos_.row == 0) return;
  ++pos_.epoch;
  pos_.row = 0;
}

std::int64_t BpttIterator::approx_steps_per_epoch() const {
  return std::max<std::int64_t>(1, (rows() - 1) / options_.bptt);
}

void BpttIterator::set_position(const BpttPosition& pos) {
  if (pos.epoch < 0) fail("BpttIterator::set_position", "negative epoch {}", pos.epoch);
  if (pos.row < 0 || pos.row > rows() - 1)
    fail("BpttIterator::set_position", "row {} is outside [0, {}] for data of {} rows", pos.row, rows() - 1, rows());
  pos_ = pos;
}

FixedLengthIterator::FixedLengthIterator(Tensor data, std::int64_t seq_len)
    : data_(std::move(data)), seq_len_(seq_len) {
  check_batched(data_, "FixedLengthIterator");
  if (seq_len_ < 1) fail("FixedLengthIterator", "seq_len must be at least 1, got {}", seq_len_);
}

std::optional<Batch> FixedLengthIterator::next() {
  const std::int64_t T = rows();
  if (row_ >= T - 1) {
    row_ = 0;
    return std::nullopt;
  }
  const std::int64_t len = std::min(seq_len_, T - 1 - row_);
  Batch b = slice_batch(data_, row_, len, 1.0);
  row_ += len;
  return b;
}

void FixedLengthIterator::set_row(std::int64_t row) {
  if (row < 0 || row > rows() - 1)
    fail("FixedLengthIterator::set_row", "row {} is outside [0, {}] for data of {} rows", row, rows() - 1, rows());
  row_ = row;
}

}  // namespace define::data
