#include "data/token_batches.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include <fmt/format.h>
#include <zlib.h>

#include "core/error.h"
#include "core/factory.h"
#include "core/philox.h"

namespace define::data {

namespace {

std::int64_t len(const std::vector<std::int32_t>& v) { return static_cast<std::int64_t>(v.size()); }

}  // namespace

TokenBatcher::TokenBatcher(const ParallelData& data, std::int64_t max_tokens, bool shuffle, std::uint64_t seed)
    : data_(&data), max_tokens_(max_tokens), shuffle_(shuffle), seed_(seed) {
  constexpr std::string_view who = "TokenBatcher";
  if (max_tokens < 1) fail(who, "max_tokens must be at least 1, got {}", max_tokens);
  if (data.src.size() != data.tgt.size())
    fail(who, "the data has {} source but {} target sentences", data.src.size(), data.tgt.size());
  const std::int64_t n = data.size();
  if (n == 0) fail(who, "no sentences to batch");
  // Names a sentence in errors by its index and, when the data records it, its line.
  const auto name = [&](std::int64_t i) {
    const auto k = static_cast<std::size_t>(i);
    return k < data.line.size() ? fmt::format("sentence {} (line {})", i, data.line[k]) : fmt::format("sentence {}", i);
  };

  std::vector<std::int64_t> sorted(static_cast<std::size_t>(n));
  std::iota(sorted.begin(), sorted.end(), 0);
  for (std::int64_t i : sorted) {
    const auto k = static_cast<std::size_t>(i);
    if (data.src[k].empty() || data.tgt[k].empty()) fail(who, "{} has an empty side", name(i));
    const std::int64_t need = std::max(len(data.src[k]), len(data.tgt[k]));
    if (need > max_tokens)
      fail(who, "{} has {} source and {} target tokens, more than max_tokens {} (raise max_tokens, or load the data "
           "with a max_len)", name(i), len(data.src[k]), len(data.tgt[k]), max_tokens);
  }
  std::sort(sorted.begin(), sorted.end(), [&](std::int64_t a, std::int64_t b) {
    const auto ka = static_cast<std::size_t>(a), kb = static_cast<std::size_t>(b);
    return std::tuple(len(data.src[ka]), len(data.tgt[ka]), a) < std::tuple(len(data.src[kb]), len(data.tgt[kb]), b);
  });

  // Greedy in sorted order: a batch grows while its padded size B * max(S, T) stays within budget.
  std::vector<std::int64_t> cur;
  std::int64_t cur_len = 0;
  for (std::int64_t i : sorted) {
    const auto k = static_cast<std::size_t>(i);
    const std::int64_t need = std::max(len(data.src[k]), len(data.tgt[k]));
    const std::int64_t grown = std::max(cur_len, need);
    if (!cur.empty() && (static_cast<std::int64_t>(cur.size()) + 1) * grown > max_tokens) {
      batches_.push_back(std::move(cur));
      cur.clear();
      cur_len = need;
    } else {
      cur_len = grown;
    }
    cur.push_back(i);
  }
  batches_.push_back(std::move(cur));
  build_order();
}

void TokenBatcher::build_order() {
  const std::int64_t n = static_cast<std::int64_t>(batches_.size());
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  if (shuffle_) {
    // Fisher-Yates; draw i uses Philox block (counter = i | epoch << 64, key = seed). The 64-bit draw
    // modulo i + 1 is biased by less than n / 2^64: far below anything a training run could notice.
    const auto e = static_cast<std::uint64_t>(epoch_);
    for (std::int64_t i = n - 1; i > 0; --i) {
      const auto c = static_cast<std::uint64_t>(i);
      const philox::U32x4 r = philox::philox4x32_10(
          {{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32), static_cast<std::uint32_t>(e),
            static_cast<std::uint32_t>(e >> 32)}},
          static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32));
      const std::uint64_t draw = (static_cast<std::uint64_t>(r.v[0]) << 32) | r.v[1];
      std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(draw % (c + 1))]);
    }
  }
  order_.clear();
  for (std::int64_t k = rank_; k < n; k += world_) order_.push_back(all[static_cast<std::size_t>(k)]);
}

void TokenBatcher::set_position(std::int64_t epoch, std::int64_t index) {
  if (epoch < 0) fail("TokenBatcher::set_position", "epoch must be >= 0, got {}", epoch);
  if (epoch != epoch_ || order_.empty()) {
    epoch_ = epoch;
    build_order();
  }
  if (index < 0 || index > num_batches())
    fail("TokenBatcher::set_position", "batch {} is outside [0, {}] (epoch {} has {} batches)", index, num_batches(),
         epoch, num_batches());
  index_ = index;
}

void TokenBatcher::shard(int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    fail("TokenBatcher::shard", "rank {} of world {}: need world >= 1 and 0 <= rank < world", rank, world);
  rank_ = rank;
  world_ = world;
  build_order();
  index_ = 0;
}

std::optional<TranslationBatch> TokenBatcher::next() {
  if (index_ >= num_batches()) return std::nullopt;
  return make_batch(order_[static_cast<std::size_t>(index_++)]);
}

TranslationBatch TokenBatcher::make_batch(std::int64_t k) const {
  if (k < 0 || k >= static_cast<std::int64_t>(batches_.size()))
    fail("TokenBatcher::make_batch", "batch {} is outside [0, {})", k, batches_.size());
  const ParallelData& d = *data_;
  TranslationBatch b;
  b.ids = batches_[static_cast<std::size_t>(k)];
  const std::int64_t B = static_cast<std::int64_t>(b.ids.size());
  std::int64_t S = 0, T = 0;
  for (std::int64_t i : b.ids) {
    S = std::max(S, len(d.src[static_cast<std::size_t>(i)]));
    T = std::max(T, len(d.tgt[static_cast<std::size_t>(i)]));
  }
  // Row-major [time, batch]: entry (t, c) at t * B + c.
  std::vector<std::int64_t> src(static_cast<std::size_t>(S * B), d.pad_id);
  std::vector<std::int64_t> tin(static_cast<std::size_t>(T * B), d.pad_id), tout(tin);
  for (std::int64_t c = 0; c < B; ++c) {
    const auto& x = d.src[static_cast<std::size_t>(b.ids[static_cast<std::size_t>(c)])];
    const auto& y = d.tgt[static_cast<std::size_t>(b.ids[static_cast<std::size_t>(c)])];
    for (std::int64_t t = 0; t < len(x); ++t) src[static_cast<std::size_t>(t * B + c)] = x[static_cast<std::size_t>(t)];
    // y ends with eos: tgt_out is y as stored, tgt_in is bos followed by y without its eos.
    tin[static_cast<std::size_t>(c)] = d.bos_id;
    for (std::int64_t t = 0; t < len(y); ++t) {
      tout[static_cast<std::size_t>(t * B + c)] = y[static_cast<std::size_t>(t)];
      if (t + 1 < len(y)) tin[static_cast<std::size_t>((t + 1) * B + c)] = y[static_cast<std::size_t>(t)];
    }
    b.src_tokens += len(x);
    b.tgt_tokens += len(y);
  }
  b.src = from_vector(src, Shape{S, B});
  b.tgt_in = from_vector(tin, Shape{T, B});
  b.tgt_out = from_vector(tout, Shape{T, B});
  return b;
}

std::string TokenBatcher::fingerprint() const {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto add = [&](std::int64_t v) { crc = crc32(crc, reinterpret_cast<const Bytef*>(&v), sizeof v); };
  for (const auto& batch : batches_) {
    add(static_cast<std::int64_t>(batch.size()));
    for (std::int64_t i : batch) add(i);
  }
  return fmt::format("{} sentences, {} batches, max_tokens {}, CRC-32 {:08x}", data_->size(), batches_.size(),
                     max_tokens_, static_cast<std::uint32_t>(crc));
}

}  // namespace define::data
