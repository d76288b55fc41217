// Catch2 entry point for define_tests.
// GCC 12 reports a false -Wmaybe-uninitialized inside <regex> (used by Catch2) in sanitizer builds.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
