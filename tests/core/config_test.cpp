// Config (core/config.h): typed getters, defaults recorded in the resolved config, --set
// overrides, and the errors a user meets: missing file, bad JSON with its position, wrong type,
// missing key, unknown (unread) key.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/config.h"
#include "core/error.h"

using define::Config;
using Catch::Contains;

TEST_CASE("config: typed getters, sections and defaults", "[core][config]") {
  Config c = Config::from_text(R"({"model": {"type": "lstm", "hidden": 1150, "dropout": 0.4,
                                   "tied": true, "cutoffs": [2000, 6000]}, "seed": 7})", "<test>");
  const Config m = c.section("model");
  CHECK(m.get_string("type") == "lstm");
  CHECK(m.get_int("hidden") == 1150);
  CHECK(m.get_double("dropout") == 0.4);
  CHECK(m.get_double("hidden") == 1150.0);  // an integer is a number
  CHECK(m.get_bool("tied"));
  CHECK(m.get_int_list("cutoffs") == std::vector<std::int64_t>{2000, 6000});
  CHECK(m.get_int("layers", 3) == 3);
  CHECK(c.get_int("seed") == 7);
  CHECK(m.path("hidden") == "model.hidden");
  CHECK(c.has("model.hidden"));
  CHECK_FALSE(c.has("model.layers"));
  c.require_all_used();  // every key was read
  // The default is part of what the run ran with.
  CHECK_THAT(c.resolved(), Contains("\"layers\": 3"));
}

TEST_CASE("config: errors name the key, the source and the problem", "[core][config]") {
  Config c = Config::from_text(R"({"train": {"lr": "fast", "epochs": 2.5}, "typo_key": 1})", "a.json");
  CHECK_THROWS_WITH(c.get_double("train.lr"),
                    Contains("key 'train.lr' in a.json: expected a number, got the string \"fast\""));
  CHECK_THROWS_WITH(c.get_int("train.epochs"), Contains("expected an integer, got the number 2.5"));
  CHECK_THROWS_WITH(c.get_int("train.batch"), Contains("missing required key 'train.batch' in a.json"));
  CHECK_THROWS_WITH(c.require_all_used(), Contains("unknown config key 'typo_key' in a.json"));
  CHECK_THROWS_WITH(Config::from_file("/nonexistent/x.json"), Contains("cannot open config file '/nonexistent/x.json'"));
  CHECK_THROWS_WITH(Config::from_text("{\"a\": 1,\n \"b\": }", "bad.json"), Contains("bad.json:2:"));
  CHECK_THROWS_WITH(Config::from_text("[1, 2]", "list.json"), Contains("top level must be a JSON object"));
}

TEST_CASE("config: --set overrides, creates, and refuses to clobber sections", "[core][config]") {
  Config c = Config::from_text(R"({"model": {"hidden": 200, "name": "x"}})", "<test>");
  c.set("model.hidden=400");
  c.set("model.name=big");            // a bare word is a string
  c.set("train.cutoffs=[1,2,3]");     // JSON values
  CHECK(c.get_int("model.hidden") == 400);
  CHECK(c.get_string("model.name") == "big");
  CHECK(c.get_int_list("train.cutoffs") == std::vector<std::int64_t>{1, 2, 3});
  c.require_all_used();
  CHECK_THROWS_WITH(c.set("model=3"), Contains("'model' is a section"));
  CHECK_THROWS_WITH(c.set("model.hidden.x=3"), Contains("'model.hidden' is the integer 400, not a section"));
  CHECK_THROWS_WITH(c.set("novalue"), Contains("--set expects key=value"));
  c.set("model.hiden=3");  // a typo creates a key nobody reads
  CHECK_THROWS_WITH(c.require_all_used(), Contains("unknown config key 'model.hiden'"));
}

TEST_CASE("config: from_file reads a file", "[core][config]") {
  const std::string path = "config_test_tmp.json";
  {
    std::ofstream f(path);
    f << R"({"x": {"y": [3]}})";
  }
  Config c = Config::from_file(path);
  CHECK(c.source() == path);
  CHECK(c.get_int_list("x.y") == std::vector<std::int64_t>{3});
  std::remove(path.c_str());
}

// Found by the config fuzzer (tests/fuzz/fuzz_config.cpp, inputs in tests/fuzz/regressions/fuzz_config/):
// each of these let an nlohmann::json exception escape instead of a define::Error.
TEST_CASE("config: a key below a value that is not a section is an error naming that value", "[core][config]") {
  Config c = Config::from_text(R"({"model": {"input": "define", "cutoffs": [1, 2]}})", "a.json");
  // As a model builder reads a section the user wrote as a string: the default is not recorded
  // through the string.
  CHECK_THROWS_WITH(c.section("model.input").get_string("type", "projected"),
                    Contains("key 'model.input.type' in a.json: 'model.input' is the string \"define\", not a section"));
  CHECK_THROWS_WITH(c.get_int("model.input.dim"), Contains("'model.input' is the string \"define\", not a section"));
  CHECK_THROWS_WITH(c.get_int("model.cutoffs.0", 3), Contains("'model.cutoffs' is a list, not a section"));
  CHECK_THROWS_WITH(c.get_int("model.cutoffs.99999999999999999999999", 3), Contains("is a list, not a section"));
  CHECK_FALSE(c.has("model.input.type"));
  CHECK_FALSE(c.has("model.cutoffs.0"));
}

TEST_CASE("config: keys are dotted names, whatever other characters they hold", "[core][config]") {
  Config c = Config::from_text(R"({"a~b": {"c/d": 1}})", "a.json");
  CHECK(c.get_int("a~b.c/d") == 1);
  c.set("x~2.y/z=5");
  CHECK(c.get_int("x~2.y/z") == 5);
  CHECK(c.get_int("e~f", 4) == 4);
  CHECK_THAT(c.resolved(), Contains("\"e~f\": 4"));
}

TEST_CASE("config: numbers out of range and bytes that are not UTF-8 are refused or kept as text", "[core][config]") {
  CHECK_THROWS_WITH(Config::from_text(R"({"lr": 1e400})", "a.json"), Contains("a.json: not valid JSON"));
  Config c;
  c.set("train.lr=1e400");  // not a JSON number: taken as a plain string, like any bare word
  CHECK_THROWS_WITH(c.get_double("train.lr"), Contains("expected a number, got the string \"1e400\""));
  CHECK_THROWS_WITH(c.set("train.name=\xff"), Contains("--set train.name: the value is not valid UTF-8"));
  CHECK_THROWS_WITH(c.set("train.\xff=1"), Contains("(not valid UTF-8)"));
  CHECK_THROWS_WITH(c.get_int("train.\xff", 1), Contains("(not valid UTF-8)"));
  CHECK_NOTHROW(Config::from_text(c.resolved(), "<resolved>"));
}
