// Internal checking helpers shared by every stage.
#pragma once

#include <new>
#include <sstream>
#include <string>
#include <utility>

#include "yolocu/error.hpp"

namespace yolocu::detail {

template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, Args&&... args) {
  throw Error(code, cat(std::forward<Args>(args)...));
}

// Runs f(); a failed allocation (std::bad_alloc: the machine's memory, a ulimit -v or cgroup
// limit) becomes kOutOfMemory naming `what`, the library's one error type.
template <typename F>
auto oom_as_error(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::kOutOfMemory, what,
         ": out of host memory (an allocation failed: the machine's memory, a ulimit -v or cgroup limit)");
  }
}

}  // namespace yolocu::detail

// YOLOCU_CHECK(cond, code, message parts...): throws yolocu::Error(code, message) if !cond.
#define YOLOCU_CHECK(cond, code, ...)                                  \
  do {                                                                 \
    if (!(cond)) ::yolocu::detail::fail(::yolocu::ErrorCode::code, __VA_ARGS__); \
  } while (0)
