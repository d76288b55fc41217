#include "harness/family_tags.h"

namespace define::test {
namespace {

constexpr std::string_view kFamilyTagPrefix = "family:";

}  // namespace

bool has_tag(const Catch::TestCaseInfo& test, std::string_view tag) {
  for (const std::string& t : test.tags)
    if (t == tag) return true;
  return false;
}

std::string family_of(const Catch::TestCaseInfo& test) {
  std::string family;
  for (const std::string& t : test.tags) {
    if (!std::string_view(t).starts_with(kFamilyTagPrefix)) continue;
    INFO("test case \"" << test.name << "\" names two op families: " << family << " and " << t);
    REQUIRE(family.empty());
    family = t.substr(kFamilyTagPrefix.size());
  }
  return family;
}

const Catch::TestCaseInfo& current_test_case() {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  const Catch::TestCase* running = nullptr;
  for (const Catch::TestCase& t : Catch::getRegistryHub().getTestCaseRegistry().getAllTests())
    if (t.name == name) running = &t;
  INFO("the running test case \"" << name << "\" is not in Catch2's registry");
  REQUIRE(running != nullptr);
  return *running;
}

}  // namespace define::test
