// What the commands that use a trained model need from its token representation, beyond
// forward(): the token cache file (DeFINE paper §3.4) and whole-vocabulary representations for
// correlation maps (paper Appendix B).
//
// Token cache file (`define export-cache`): a safetensors file (nn/safetensors.h) with
//   tensor   "table"  [V, m]: the unit's output for every vocabulary id (TokenInput::compute_cache)
//   metadata "define.format" = "token-cache/1", "vocab_size", "width", "input_type",
//            "source_checkpoint" (informative), "input_fingerprint" (see below)
// A cache is only valid for the weights it was computed from, and a stale one would silently
// give wrong perplexities, so loading checks the fingerprint of the input's weights (a 64-bit
// FNV-1a hash over the names, shapes and bytes of every tensor of the TokenInput).
//
// Representations (`define corrmap --layer`), each [V, features] for all V ids:
//   map       the map table E [V, n] (any input with a single table)
//   unit.<i>  the output of layer i of the paper-form DeFINE unit (input type define only)
//   out       the unit's output [V, m] (inputs with a unit)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/token_representation.h"

namespace define::models {

// 16 hex digits; changes when any weight of the module changes.
std::string weights_fingerprint(const nn::Module& module);

struct TokenCacheFile {
  Tensor table;  // [V, m]
  std::int64_t vocab_size = 0;
  std::int64_t width = 0;
  std::string input_type;
  std::string source_checkpoint;
  std::string input_fingerprint;
};

// Computes the input's cache (eval mode required) and writes it atomically.
void save_token_cache(const std::string& path, const TokenInput& input, const std::string& source_checkpoint);
// Reads and validates the file itself (format, metadata, table shape); refuses naming the path.
TokenCacheFile load_token_cache(const std::string& path);
// Refuses, naming the path and the disagreeing value, a cache made for another vocabulary size,
// width, input type or other weights than `input`'s.
void check_cache_matches(const TokenCacheFile& cache, const TokenInput& input, const std::string& path);

// The names of the representations `input` has, in order: map, unit.0 .. unit.{N-1}, out.
std::vector<std::string> representation_names(const TokenInput& input);
// The outputs of every layer of the paper-form DeFINE unit for `ids` (int64 [n]): N tensors
// [n, o_l], computed exactly as DefineUnit::forward does (no graph; eval mode expected).
std::vector<Tensor> define_layer_outputs(const TokenInput& input, const Tensor& ids);
// G = R^T R [f, f] (float64) of representation `name` over all V ids, accumulated in chunks of
// the vocabulary so no [V, k] activation of a large vocabulary is held at once. Throws naming
// the representation and the ones available when `input` has no such representation.
Tensor representation_gram(const TokenInput& input, const std::string& name);

}  // namespace define::models
