// Entry point of the CUDA emulator's own test suite, define_emu_tests (Catch2's implementation:
// tests/support/catch_session.cpp).
#include "catch_session.h"

int main(int argc, char** argv) { return define::test::run_catch_session(argc, argv); }
