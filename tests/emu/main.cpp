// Catch2 entry point of the CUDA emulator's own test suite (define_emu_tests).
// Catch2's implementation uses std::regex, whose std::function members trip a GCC 12
// -Wmaybe-uninitialized false positive under -fsanitize=address,undefined -O2.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
