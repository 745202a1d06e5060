// Python arguments converted to C++ values with errors that name the argument, the value given and
// what was expected (pybind11's own casts say only "Unable to cast Python instance to C++ type").
//
//   num_heads = '2': expected an int, got str                    (TypeError)
//   num_heads = 9223372036854775808: out of range for int64      (npugraph.ArgumentError)
//
// `name` is the argument as the caller wrote it ("num_heads", "size[1]", "stream"); callers that
// know the call prefix it ("npu_fused_infer_attention_score: ") with with_context().
#pragma once

#include <cstdint>
#include <string>

#include <pybind11/pybind11.h>

#include "npugraph/stream.hpp"

namespace npugraph::python {

namespace py = pybind11;

std::string type_name(py::handle v);
// repr(v), cut to about 80 characters (a tensor's repr can be pages long).
std::string short_repr(py::handle v);

// TypeError "<name> = <repr>: expected <expected>, got <type>".
[[noreturn]] void throw_type_error(const std::string& name, py::handle v, const char* expected);

// A Python int (or anything with __index__: numpy integers); bool and floats are refused.
std::int64_t int_arg(py::handle v, const char* name);
// The same for element `index` of the list `name` ("name[index]" in the message). A plain int is
// read here, inline (FIA's length lists are parsed on every call and every update); anything else,
// and every error, goes to int_element_slow.
inline std::int64_t int_element(py::handle v, const char* name, std::ptrdiff_t index);
std::int64_t int_element_slow(py::handle v, const char* name, std::ptrdiff_t index);
// A Python float or int (or anything with __float__: numpy floats); bool and str are refused.
double float_arg(py::handle v, const char* name);
// True/False or a numpy bool_; ints and strings are refused.
bool bool_arg(py::handle v, const char* name);
std::string str_arg(py::handle v, const char* name);

// An npugraph.npu.Stream, or the current stream for None.
Stream stream_arg(py::handle v, const char* name = "stream");
// An npugraph.npu.Stream (None refused).
Stream stream_required(py::handle v, const char* name = "stream");

// Note [Eager calls finish on their device]
// An eager op called from Python returns once its work has run (Note [Blocking replays from
// Python]): this synchronizes the calling thread's current stream of `device`, the device of the
// op's tensors (a cuda:N op runs on cuda:N's current stream, not the cpu's). Nothing waits while that
// stream captures or records an update: the call was only recorded. Call it without the GIL.
void finish_eager(Device device);

// Runs f(); a TypeError, ValueError or npugraph error it raises gets `context` put in front of its
// message (the same exception type). For the error path only: the call costs nothing otherwise.
template <class F>
decltype(auto) with_context(const char* context, F&& f);

// Re-raises the exception in flight (call it in a catch block) with `context` put in front of a
// TypeError's, ValueError's or npugraph.ArgumentError's message; other errors pass unchanged.
[[noreturn]] void rethrow_with_context(const std::string& context);

inline std::int64_t int_element(py::handle v, const char* name, std::ptrdiff_t index) {
  if (PyLong_CheckExact(v.ptr())) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    if (overflow == 0 && !(x == -1 && PyErr_Occurred())) return x;
  }
  return int_element_slow(v, name, index);
}

template <class F>
decltype(auto) with_context(const char* context, F&& f) {
  try {
    return f();
  } catch (...) {
    rethrow_with_context(context);
  }
}

}  // namespace npugraph::python
