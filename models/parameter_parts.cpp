#include "models/parameter_parts.h"

#include <fmt/format.h>

#include "core/error.h"

namespace define::models {
namespace {

std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  const int lead = static_cast<int>(digits.size()) % 3;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (static_cast<int>(i) - lead) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::vector<ParameterPart> count_parameter_parts(const nn::Module& model, const PartRules& rules) {
  std::vector<ParameterPart> parts;
  auto part_index = [&](const std::string& name) {
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (parts[i].name == name) return i;
    parts.push_back({name, 0});
    return parts.size() - 1;
  };
  // The papers' column order first, then any other part in the order the rules name it.
  for (const char* canonical : {kPartDefine, kPartContext, kPartInputOutput})
    for (const auto& rule : rules)
      if (rule.second == canonical) {
        part_index(rule.second);
        break;
      }
  for (const auto& rule : rules) part_index(rule.second);
  for (const auto& [name, t] : model.named_parameters()) {
    const std::pair<std::string, std::string>* best = nullptr;
    for (const auto& rule : rules)
      if (name.compare(0, rule.first.size(), rule.first) == 0 && (!best || rule.first.size() > best->first.size()))
        best = &rule;
    if (!best) fail("count_parameter_parts", "parameter '{}' of {} belongs to no part", name, model.type_name());
    parts[part_index(best->second)].count += t.numel();
  }
  return parts;
}

std::string format_parameter_table(const std::vector<ParameterPart>& parts) {
  std::int64_t total = 0;
  for (const ParameterPart& p : parts) total += p.count;
  std::string out = fmt::format("{:<16}{:>16}{:>12}\n", "part", "parameters", "millions");
  for (const ParameterPart& p : parts)
    out += fmt::format("{:<16}{:>16}{:>12.2f}\n", p.name, with_commas(p.count), static_cast<double>(p.count) / 1e6);
  out += fmt::format("{:<16}{:>16}{:>12.2f}\n", "total", with_commas(total), static_cast<double>(total) / 1e6);
  return out;
}

}  // namespace define::models
