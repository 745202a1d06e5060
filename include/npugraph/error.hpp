// npugraph's one error model.
//
// Every failure the library reports is a `npugraph::Error` (a std::runtime_error) carrying the call
// site and a message that names the argument, the value and the rule. The library never aborts.
// Subclasses say what kind of failure it is, so bindings can map them (ArgumentError -> ValueError).
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace npugraph {

enum class ErrorKind {
  argument,     // a bad argument value or shape
  state,        // the call is illegal in the current state (capture, update, lifetime)
  timeout,      // a wait exceeded its deadline
  task,         // a task failed while executing on a stream
  unsupported,  // the backend lacks the feature
  resource,     // out of memory or another resource
  internal,     // a bug in npugraph
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message,
        std::source_location where = std::source_location::current())
      : std::runtime_error(message), kind_(kind), file_(where.file_name()), line_(where.line()) {}

  ErrorKind kind() const noexcept { return kind_; }
  // Where in npugraph the error was raised.
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return static_cast<int>(line_); }

 private:
  ErrorKind kind_;
  const char* file_;
  unsigned line_;
};

#define NPUGRAPH_DEFINE_ERROR(Name, Kind)                                              \
  class Name : public Error {                                                          \
   public:                                                                             \
    explicit Name(const std::string& message,                                          \
                  std::source_location where = std::source_location::current())       \
        : Error(ErrorKind::Kind, message, where) {}                                    \
  };

NPUGRAPH_DEFINE_ERROR(ArgumentError, argument)
NPUGRAPH_DEFINE_ERROR(StateError, state)
NPUGRAPH_DEFINE_ERROR(TimeoutError, timeout)
NPUGRAPH_DEFINE_ERROR(TaskError, task)
NPUGRAPH_DEFINE_ERROR(UnsupportedError, unsupported)
NPUGRAPH_DEFINE_ERROR(ResourceError, resource)
NPUGRAPH_DEFINE_ERROR(InternalError, internal)
#undef NPUGRAPH_DEFINE_ERROR

namespace detail {

template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <class E, class... Args>
[[noreturn]] void raise(std::source_location where, Args&&... args) {
  throw E(cat(std::forward<Args>(args)...), where);
}

}  // namespace detail
}  // namespace npugraph

// Note [Check macros are the library's own]
// NG_CHECK_AS, NG_CHECK_ARG, NG_CHECK_STATE and NG_THROW are how npugraph's sources (src/,
// python/src/) raise the errors above. No public header uses them in inline code, so they are
// defined only where the build defines NPUGRAPH_INTERNAL_CHECKS (the npugraph library and the Python
// module, CMakeLists.txt): including <npugraph/npugraph.hpp> from user code defines no NG_* macro
// (tests/consumer/ checks it). User code throws or catches the error classes directly.
#if defined(NPUGRAPH_INTERNAL_CHECKS)
// Checks evaluate their condition exactly once; the message parts are only formatted on failure.
#define NG_CHECK_AS(ErrorType, cond, ...)                                                   \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::npugraph::detail::raise<ErrorType>(std::source_location::current(), __VA_ARGS__);   \
  } while (0)

#define NG_CHECK_ARG(cond, ...) NG_CHECK_AS(::npugraph::ArgumentError, cond, __VA_ARGS__)
#define NG_CHECK_STATE(cond, ...) NG_CHECK_AS(::npugraph::StateError, cond, __VA_ARGS__)
#define NG_THROW(ErrorType, ...) \
  ::npugraph::detail::raise<ErrorType>(std::source_location::current(), __VA_ARGS__)
#endif  // NPUGRAPH_INTERNAL_CHECKS
