// Runs the Catch2 session of a test binary (tests/support/catch_session.cpp): what each binary's
// main() returns.
#pragma once

namespace define::test {

int run_catch_session(int argc, char** argv);

}  // namespace define::test
