#include "models/token_cache.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/fnv1a.h"
#include "nn/define_unit.h"
#include "nn/safetensors.h"

namespace define::models {
namespace {

constexpr const char* kFormatKey = "define.format";
constexpr const char* kFormat = "token-cache/1";
constexpr const char* kTable = "table";
// Vocabulary rows per chunk when running the unit over the whole vocabulary.
constexpr std::int64_t kChunk = 4096;

std::int64_t parse_int(const std::string& path, const std::string& key, const std::string& v) {
  std::int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size())
    fail("load_token_cache", "'{}': metadata '{}' is not an integer ('{}')", path, key, v);
  return x;
}

const std::string& meta(const nn::Metadata& m, const std::string& path, const std::string& key) {
  const auto it = m.find(key);
  if (it == m.end()) fail("load_token_cache", "'{}' lacks the metadata entry '{}'", path, key);
  return it->second;
}

const nn::DefineUnit* paper_unit(const TokenInput& input) {
  if (input.config().kind != TokenInputKind::Define) return nullptr;
  return dynamic_cast<const nn::DefineUnit*>(&input.submodule("unit"));
}

Tensor id_range(std::int64_t first, std::int64_t n, Device device) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = first + i;
  return from_vector(v, {n}, device);
}

}  // namespace

std::string weights_fingerprint(const nn::Module& module) {
  std::uint64_t h = kFnv1aOffset;
  for (const auto& [name, t] : module.state_dict()) {
    fnv1a(h, name.data(), name.size() + 1);  // with the terminator: "ab"+"c" != "a"+"bc"
    for (std::int64_t d : t.shape()) fnv1a(h, &d, sizeof d);
    const Tensor host = copy_to_device(t, Device::cpu());
    fnv1a(h, host.raw_data(), static_cast<std::size_t>(host.numel()) * dtype_size(host.dtype()));
  }
  return fmt::format("{:016x}", h);
}

void save_token_cache(const std::string& path, const TokenInput& input, const std::string& source_checkpoint) {
  const Tensor table = input.compute_cache();
  nn::Metadata m;
  m[kFormatKey] = kFormat;
  m["vocab_size"] = std::to_string(table.size(0));
  m["width"] = std::to_string(table.size(1));
  m["input_type"] = to_string(input.config().kind);
  m["source_checkpoint"] = source_checkpoint;
  m["input_fingerprint"] = weights_fingerprint(input);
  nn::save_safetensors(path, {{kTable, table}}, m);
}

TokenCacheFile load_token_cache(const std::string& path) {
  const char* op = "load_token_cache";
  nn::SafetensorsContents file = nn::load_safetensors(path);
  const auto format = file.metadata.find(kFormatKey);
  if (format == file.metadata.end() || format->second != kFormat)
    fail(op, "'{}' is not a token cache (metadata '{}' is '{}', expected '{}'; write one with `define export-cache`)",
         path, kFormatKey, format == file.metadata.end() ? "" : format->second, kFormat);
  TokenCacheFile c;
  c.vocab_size = parse_int(path, "vocab_size", meta(file.metadata, path, "vocab_size"));
  c.width = parse_int(path, "width", meta(file.metadata, path, "width"));
  c.input_type = meta(file.metadata, path, "input_type");
  c.source_checkpoint = meta(file.metadata, path, "source_checkpoint");
  c.input_fingerprint = meta(file.metadata, path, "input_fingerprint");
  for (auto& [name, t] : file.tensors) {
    if (name != kTable) fail(op, "'{}': unexpected tensor '{}' (a token cache holds only '{}')", path, name, kTable);
    c.table = std::move(t);
  }
  if (!c.table.defined()) fail(op, "'{}' has no tensor '{}'", path, kTable);
  const Shape want{c.vocab_size, c.width};
  if (c.table.shape() != want)
    fail(op, "'{}': table has shape {} but the metadata says {}", path, shape_str(c.table.shape()), shape_str(want));
  return c;
}

void check_cache_matches(const TokenCacheFile& cache, const TokenInput& input, const std::string& path) {
  const char* op = "token cache";
  const TokenInputConfig& cfg = input.config();
  if (cache.input_type != to_string(cfg.kind))
    fail(op, "'{}' was made for input type '{}', the model's is '{}'", path, cache.input_type, to_string(cfg.kind));
  if (cache.vocab_size != cfg.vocab)
    fail(op, "'{}' has {} rows, the model's vocabulary has {} words", path, cache.vocab_size, cfg.vocab);
  if (cache.width != cfg.out_dim)
    fail(op, "'{}' is {} wide, the model's unit outputs {}", path, cache.width, cfg.out_dim);
  const std::string fp = weights_fingerprint(input);
  if (cache.input_fingerprint != fp)
    fail(op,
         "'{}' was computed from other weights (exported from '{}', input fingerprint {}; the loaded model's is {}): "
         "export the cache again from this checkpoint",
         path, cache.source_checkpoint, cache.input_fingerprint, fp);
}

std::vector<std::string> representation_names(const TokenInput& input) {
  std::vector<std::string> names;
  if (input.config().kind != TokenInputKind::Adaptive) names.emplace_back("map");
  if (const nn::DefineUnit* unit = paper_unit(input))
    for (std::size_t i = 0; i < unit->layers().size(); ++i) names.push_back(fmt::format("unit.{}", i));
  if (input.has_unit()) names.emplace_back("out");
  return names;
}

std::vector<Tensor> define_layer_outputs(const TokenInput& input, const Tensor& ids) {
  const nn::DefineUnit* unit = paper_unit(input);
  if (!unit)
    fail("TokenInput", "per-layer outputs need the paper-form DeFINE unit (input type 'define'), not '{}'",
         to_string(input.config().kind));
  NoGradGuard no_grad;
  return unit->layer_outputs(input.map_rows(ids));
}

Tensor representation_gram(const TokenInput& input, const std::string& name) {
  const std::vector<std::string> names = representation_names(input);
  if (std::find(names.begin(), names.end(), name) == names.end())
    fail("TokenInput", "input type '{}' has no representation '{}' (it has: {})", to_string(input.config().kind), name,
         fmt::join(names, ", "));
  NoGradGuard no_grad;
  const std::int64_t V = input.config().vocab;
  const Device device = input.device();
  std::int64_t layer = -1;
  if (name.rfind("unit.", 0) == 0) layer = std::stoll(name.substr(5));
  Tensor gram;
  for (std::int64_t first = 0; first < V; first += kChunk) {
    const std::int64_t n = std::min(kChunk, V - first);
    const Tensor ids = id_range(first, n, device);
    Tensor r;
    if (name == "map") {
      // The table itself (unscaled), or an adaptive map's rows.
      r = input.adaptive() ? input.map_rows(ids) : embedding(input.table(), ids);
    } else if (layer >= 0) {
      r = define_layer_outputs(input, ids)[static_cast<std::size_t>(layer)];
    } else {
      r = reshape(input.forward(reshape(ids, {n, 1})), {n, input.out_dim()});
    }
    r = to_dtype(r, DType::Float64);
    const Tensor g = matmul(transpose(r, 0, 1), r);
    gram = gram.defined() ? add(gram, g) : g;
  }
  return copy_to_device(gram, Device::cpu());
}

}  // namespace define::models
