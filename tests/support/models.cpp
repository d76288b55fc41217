#include "support/models.h"

#include "core/config.h"

namespace define::test {

models::BuiltModel build_from_json(const std::string& json, std::int64_t vocab) {
  Generator gen(1);
  const Config cfg = Config::from_text(json, "<test>");
  models::BuiltModel m = models::build_model(cfg.section("model"), vocab, gen);
  cfg.require_all_used();
  return m;
}

std::int64_t part(const std::vector<models::ParameterPart>& parts, const std::string& name) {
  for (const models::ParameterPart& p : parts)
    if (p.name == name) return p.count;
  return -1;
}

}  // namespace define::test
