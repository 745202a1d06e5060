// npugraph's errors as Python exceptions, with Python advice.
//
// Note [C++ advice in Python errors]
// The library's messages say what to do in C++ terms ("use Stream::create() with a StreamGuard",
// "EventOptions{.enable_timing = true}", "task_update_end"). One translator maps every npugraph
// error to its Python type and rewrites those words into the Python spelling (npugraph.npu.Stream(),
// `with npugraph.npu.stream(s):`, Event(enable_timing=True), graph_task_update_end) — a table here,
// so that no binding has to catch and reword errors one by one. It runs on the error path only.
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "bindings.hpp"
#include "npugraph/error.hpp"

namespace npugraph::python {
namespace {

// Whole phrases first (they contain names the word table also rewrites).
constexpr std::pair<std::string_view, std::string_view> kPhrases[] = {
    {"CaptureScope makes one current for you, or use Stream::create() with a StreamGuard",
     "`with npugraph.npu.graph(g):` makes one current for you, or make an npugraph.npu.Stream() "
     "current with `with npugraph.npu.stream(s):`"},
    {"EventOptions{.enable_timing = true}", "npugraph.npu.Event(enable_timing=True)"},
    {"Stream::create() with a StreamGuard", "npugraph.npu.Stream() made current with `with npugraph.npu.stream(s):`"},
    {"Stream::create()", "npugraph.npu.Stream()"},
    {"UpdateOrder::stream or UpdateOrder::launch", "'stream' or 'launch'"},
    {"Stream::wait(event)", "Stream.wait_event(event)"},
    {"CaptureScope::end", "npugraph.npu.graph.__exit__"},
    {"CaptureScope", "`with npugraph.npu.graph(g):`"},
    {"StreamGuard", "`with npugraph.npu.stream(s):`"},
    {"ExternalEvent::", "ExternalEvent."},
    {"Event::", "Event."},
    {"Stream::", "Stream."},
    {"Graph::", "NPUGraph."},
};

// C++ function names whose Python name differs: rewritten where they stand as a whole word.
constexpr std::pair<std::string_view, std::string_view> kWords[] = {
    {"task_group_begin", "graph_task_group_begin"},
    {"task_group_end", "graph_task_group_end"},
    {"task_update_begin", "graph_task_update_begin"},
    {"task_update_end", "graph_task_update_end"},
    {"task_update_abort", "graph_task_update_abort"},
    {"fia_max_workspace", "_npu_fused_infer_attention_score_get_max_workspace"},
    {"device_synchronize", "npugraph.npu.synchronize"},
};

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

void replace_all(std::string& s, std::string_view from, std::string_view to, bool whole_word) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at)) {
    const std::size_t end = at + from.size();
    if (whole_word && ((at > 0 && word_char(s[at - 1])) || (end < s.size() && word_char(s[end])))) {
      at = end;
      continue;
    }
    s.replace(at, from.size(), to);
    at += to.size();
  }
}

PyObject* g_error = nullptr;
PyObject* g_argument = nullptr;
PyObject* g_state = nullptr;
PyObject* g_timeout = nullptr;
PyObject* g_task = nullptr;
PyObject* g_unsupported = nullptr;
PyObject* g_resource = nullptr;

struct Tag {};

// `bases`: one class, or a tuple (npugraph.Error and the built-in exception it also is).
PyObject* make_type(py::module_& m, const char* name, py::handle bases, const char* doc) {
  py::exception<Tag> type(m, name, bases);  // the Python class only; the translator is below
  type.attr("__doc__") = doc;
  PyObject* raw = type.ptr();
  Py_INCREF(raw);  // kept for the interpreter's lifetime (the module holds it too)
  return raw;
}

}  // namespace

std::string python_message(std::string message) {
  for (const auto& [from, to] : kPhrases) replace_all(message, from, to, false);
  for (const auto& [from, to] : kWords) replace_all(message, from, to, true);
  return message;
}

void bind_errors(py::module_& m) {
  // Every kind is an npugraph.Error (`except npugraph.Error` catches them all) and the built-in
  // exception Python code expects: argument errors are ValueErrors, the rest RuntimeErrors (and the
  // like). docs/errors.md lists them.
  g_error = make_type(m, "Error", PyExc_RuntimeError, "Base of npugraph's errors (a RuntimeError).");
  auto with = [](PyObject* builtin) {
    return py::make_tuple(py::handle(g_error), py::handle(builtin));
  };
  g_argument = make_type(m, "ArgumentError", with(PyExc_ValueError),
                         "A bad argument: the message names the argument, the value and the rule.");
  g_state = make_type(m, "StateError", with(PyExc_RuntimeError),
                      "A call that is illegal in the current state (capture, update, lifetime).");
  g_timeout = make_type(m, "WaitTimeoutError", with(PyExc_RuntimeError),
                        "A wait passed its deadline (a stalled ExternalEvent wait, a timed synchronize).");
  g_task = make_type(m, "TaskError", with(PyExc_RuntimeError), "A task failed while it ran on a stream.");
  g_unsupported = make_type(m, "UnsupportedError", with(PyExc_NotImplementedError),
                            "The backend lacks the feature.");
  g_resource = make_type(m, "ResourceError", with(PyExc_MemoryError), "Out of memory or another resource.");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const ArgumentError& e) {
      PyErr_SetString(g_argument, python_message(e.what()).c_str());
    } catch (const StateError& e) {
      PyErr_SetString(g_state, python_message(e.what()).c_str());
    } catch (const TimeoutError& e) {
      PyErr_SetString(g_timeout, python_message(e.what()).c_str());
    } catch (const TaskError& e) {
      PyErr_SetString(g_task, python_message(e.what()).c_str());
    } catch (const UnsupportedError& e) {
      PyErr_SetString(g_unsupported, python_message(e.what()).c_str());
    } catch (const ResourceError& e) {
      PyErr_SetString(g_resource, python_message(e.what()).c_str());
    } catch (const Error& e) {
      PyErr_SetString(g_error, python_message(e.what()).c_str());
    }
  });
}

}  // namespace npugraph::python
