// Models by name, built from a config's `model` section, so every command (params, train, eval,
// generate) builds the same model from the same file:
//   model.type = "lstm_lm"      LSTM language model with any token representation (models/lstm_lm.h)
//   model.type = "transformer_xl"  Transformer-XL language model, any token representation
//                               (models/transformer_xl.h)
//   model.type = "delight_nmt"  DeLighT encoder-decoder with shared embeddings (models/delight_nmt.h)
//   model.type = "transformer_nmt"  Transformer encoder-decoder, any token representation with a
//                               table (models/transformer_nmt.h)
//   model.type = "delight_lm"   DeLighT language model (models/delight_lm.h)
// Each built model comes with the rules that split its parameters into the papers' parts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/generator.h"
#include "models/parameter_parts.h"
#include "nn/module.h"

namespace define::models {

struct BuiltModel {
  std::string type;
  std::shared_ptr<nn::Module> module;
  PartRules parts;
};

// `model` is the config's model section; `vocab` the data's vocabulary size, or 0 to read the
// section's `vocab_size` (counting parameters without data). Throws naming an unknown type.
BuiltModel build_model(const Config& model, std::int64_t vocab, Generator& gen = default_generator());

}  // namespace define::models
