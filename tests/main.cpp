// Entry point of define_tests (Catch2's implementation: tests/support/catch_session.cpp).
#include "catch_session.h"

int main(int argc, char** argv) { return define::test::run_catch_session(argc, argv); }
