// The `define` command table and its dispatch, outside main() so that the tests and the
// command-line fuzzer (tests/fuzz/fuzz_cli.cpp) run a subcommand exactly as the binary does.
#pragma once

#include <string>
#include <vector>

namespace define::cli {

// Prints the list of subcommands (`define --help`).
void print_help();

// Runs subcommand `name` with its arguments and returns the process exit status: the command's
// own, 0 for `--help` / `-h` / `help`, 1 for an unknown command, 2 for a define::Error (printed as
// one line on stderr), 3 for any other exception (an internal error: a bug).
int run_command(const std::string& name, const std::vector<std::string>& args);

}  // namespace define::cli
