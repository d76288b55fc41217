// Catch2's implementation, compiled once (the define_catch_session object library of
// tests/CMakeLists.txt) and linked into every test binary, each of which keeps its own few-line
// main(). Catch2 v2 is a single header whose implementation takes longer to compile than most test
// files; compiled per binary it was built four times in each preset.
// GCC 12 reports a false -Wmaybe-uninitialized inside <regex> (used by Catch2) in sanitizer builds.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.h"

namespace define::test {

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace define::test
