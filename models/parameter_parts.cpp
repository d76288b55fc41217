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

// The papers' column order first, then any other part in the order the rules name it.
std::vector<std::string> ordered_part_names(const PartRules& rules) {
  std::vector<std::string> names;
  auto add = [&](const std::string& name) {
    for (const std::string& n : names)
      if (n == name) return;
    names.push_back(name);
  };
  for (const char* canonical : {kPartDefine, kPartContext, kPartInputOutput})
    for (const auto& rule : rules)
      if (rule.second == canonical) {
        add(rule.second);
        break;
      }
  for (const auto& rule : rules) add(rule.second);
  return names;
}

std::size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  std::size_t i = 0;
  while (names[i] != name) ++i;  // every part a rule names is in `names`
  return i;
}

// The longest matching prefix's part, or null.
const std::string* match_part(const std::string& parameter, const PartRules& rules) {
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& rule : rules)
    if (parameter.compare(0, rule.first.size(), rule.first) == 0 && (!best || rule.first.size() > best->first.size()))
      best = &rule;
  return best ? &best->second : nullptr;
}

}  // namespace

std::string part_of(const std::string& parameter, const PartRules& rules) {
  const std::string* part = match_part(parameter, rules);
  if (!part) fail("parameter parts", "parameter '{}' belongs to no part", parameter);
  return *part;
}

std::vector<std::pair<std::string, optim::NamedParameters>> group_by_part(const optim::NamedParameters& params,
                                                                       const PartRules& rules) {
  const std::vector<std::string> names = ordered_part_names(rules);
  std::vector<optim::NamedParameters> groups(names.size());
  for (const auto& np : params) groups[index_of(names, part_of(np.first, rules))].push_back(np);
  std::vector<std::pair<std::string, optim::NamedParameters>> out;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (!groups[i].empty()) out.emplace_back(names[i], std::move(groups[i]));
  return out;
}

std::vector<ParameterPart> count_parameter_parts(const nn::Module& model, const PartRules& rules) {
  const std::vector<std::string> names = ordered_part_names(rules);
  std::vector<ParameterPart> parts;
  for (const std::string& n : names) parts.push_back({n, 0});
  for (const auto& [name, t] : model.named_parameters()) {
    const std::string* part = match_part(name, rules);
    if (!part) fail("count_parameter_parts", "parameter '{}' of {} belongs to no part", name, model.type_name());
    parts[index_of(names, *part)].count += t.numel();
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
