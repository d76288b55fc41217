// Errors: every user-facing failure is a define::Error whose message starts with the
// name of the op that refused the input, then says what was wrong with it
// ("matmul: shapes [2,3] and [4,5] do not match"). Nothing in the library aborts on bad input.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace define {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws define::Error("<op>: <formatted message>").
template <typename... Args>
[[noreturn]] void fail(std::string_view op, fmt::format_string<Args...> f, Args&&... args) {
  std::string msg(op);
  msg += ": ";
  msg += fmt::format(f, std::forward<Args>(args)...);
  throw Error(msg);
}

}  // namespace define

// DEFINE_CHECK(cond, "op", "fmt", args...): throw a define::Error when cond is false.
#define DEFINE_CHECK(cond, op, ...)              \
  do {                                           \
    if (!(cond)) ::define::fail(op, __VA_ARGS__); \
  } while (0)
