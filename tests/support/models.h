// Helpers shared by the model tests: a model built from a config text as `define params` /
// `define train` build it, and one part's row of a parameter-count table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/registry.h"

namespace define::test {

// The model of the config text `json` (its "model" section), built with Generator(1); checks that
// every key of the section was used. vocab: the data's vocabulary size, for configs that take it
// from the corpus (0: from the config).
models::BuiltModel build_from_json(const std::string& json, std::int64_t vocab = 0);

// The count of part `name` in a table from count_parameter_parts, -1 when the table has no such
// row (a part with no parameters is listed with 0).
std::int64_t part(const std::vector<models::ParameterPart>& parts, const std::string& name);

}  // namespace define::test
