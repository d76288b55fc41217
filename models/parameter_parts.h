// The per-part parameter table the DeFINE and DeLighT papers print: the token-representation unit
// ("DeFINE" — a DeFINE, DExTra or released define-iclr unit), the context model (LSTM layers,
// Transformer / DeLighT blocks), the input-output layers (embedding tables, projections, softmax),
// and the total. A model says which parameter-name prefixes belong to which part; each shared
// (tied) tensor is counted once, under its first name, as Module::named_parameters() lists it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace define::models {

inline constexpr const char* kPartDefine = "DeFINE";
inline constexpr const char* kPartContext = "context model";
inline constexpr const char* kPartInputOutput = "input-output";

// (name prefix, part). The longest matching prefix wins; "" matches everything.
using PartRules = std::vector<std::pair<std::string, std::string>>;

struct ParameterPart {
  std::string name;
  std::int64_t count = 0;
};

// The part a parameter name belongs to (the longest matching prefix); throws naming the parameter
// when no rule matches it.
std::string part_of(const std::string& parameter, const PartRules& rules);

// `params` grouped by part, in the order count_parameter_parts lists the parts (parts without
// parameters left out): what per-part diagnostics such as gradient norms iterate over.
std::vector<std::pair<std::string, optim::NamedParameters>> group_by_part(const optim::NamedParameters& params,
                                                                       const PartRules& rules);

// Counts per part, in the papers' order (DeFINE, context model, input-output), then any other
// part in the order `rules` names it; parts with no parameters are
// listed with 0. Throws naming the parameter when no rule matches it (a model whose rules miss a
// parameter would print a wrong table).
std::vector<ParameterPart> count_parameter_parts(const nn::Module& model, const PartRules& rules);

// The table as `define params` prints it: one line per part plus "total", exact counts with
// thousands separators and millions to two decimals.
std::string format_parameter_table(const std::vector<ParameterPart>& parts);

}  // namespace define::models
