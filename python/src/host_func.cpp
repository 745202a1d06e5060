// npugraph.npu.launch_host_func: a Python callable as a stream task (torch_npu.npu.launch_host_func),
// and the task that replays one captured torch op (npugraph/_torch_capture.py).
//
// Note [Python callables on stream workers]
// A host-function task runs on the stream's worker thread (or, in a replay, on whichever thread runs
// the graph's node), never on the thread that issued it. So the task takes the GIL to call into
// Python, and gives up without calling when the interpreter is finalizing (the work of a process
// that is exiting has nobody left to read it). The callable itself is a Python object that the
// task holds: the task may be destroyed on a thread without the GIL (a graph's executable form is
// released by the last replay that used it), so the holder never touches a reference count there:
// it queues the object, and the queue is drained by Py_AddPendingCall on the main thread (or by the
// next launch_host_func call, whichever comes first). A Python exception in the callable becomes
// the task's error, raised as npugraph.TaskError (naming the task and the Python exception) by the
// next synchronizing call on that stream; the stream stays usable.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {

namespace {

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

// Objects released on threads without the GIL, waiting for a thread with it.
std::mutex g_orphans_mutex;
std::vector<PyObject*> g_orphans;
bool g_drain_scheduled = false;

// With the GIL held.
int drain_orphans(void*) {
  std::vector<PyObject*> drop;
  {
    std::lock_guard lock(g_orphans_mutex);
    drop.swap(g_orphans);
    g_drain_scheduled = false;
  }
  for (PyObject* o : drop) Py_DECREF(o);
  return 0;
}

class PyCallable {
 public:
  explicit PyCallable(py::object fn) : fn_(fn.release().ptr()) {}
  PyCallable(const PyCallable&) = delete;
  PyCallable& operator=(const PyCallable&) = delete;
  ~PyCallable() {
    if (finalizing()) return;  // leaked on purpose: the interpreter is going away
    if (PyGILState_Check()) {
      Py_DECREF(fn_);
      return;
    }
    std::lock_guard lock(g_orphans_mutex);
    g_orphans.push_back(fn_);
    if (!g_drain_scheduled && Py_AddPendingCall(&drain_orphans, nullptr) == 0) g_drain_scheduled = true;
  }

  void operator()() const {
    if (finalizing()) return;
    py::gil_scoped_acquire gil;
    try {
      py::handle{fn_}();
    } catch (py::error_already_set& e) {
      throw std::runtime_error(e.what());  // the task's error (Note [Python callables on stream workers])
    }
  }

 private:
  PyObject* fn_;
};

void launch_callable(const Stream& stream, py::object fn) {
  drain_orphans(nullptr);
  auto holder = std::make_shared<PyCallable>(std::move(fn));
  py::gil_scoped_release release;
  launch_host_func(stream, [holder = std::move(holder)] { (*holder)(); });
}

}  // namespace

void bind_host_func(py::module_& m, py::module_& npu) {
  npu.def("launch_host_func", [](py::handle stream, py::object fn, py::object args) {
            const Stream s = stream_required(stream);
            if (!PyCallable_Check(fn.ptr()))
              throw_type_error("launch_host_func: fn", fn, "a callable (called as fn(args) on the stream)");
            py::object call = py::cpp_function([fn, args] { fn(args); });
            launch_callable(s, std::move(call));
          }, py::arg("stream"), py::arg("fn"), py::arg("args") = py::none(),
          "Enqueues fn(args) on `stream` (torch_npu.npu.launch_host_func): it runs on the stream's worker "
          "once the work issued before it has run, holding the GIL; inside a capture it becomes a graph "
          "task that every replay calls. An exception in fn is raised as TaskError by the next "
          "synchronizing call on the stream.");
  // The torch-op recorder's first question, per op, in one call (no Stream object is made): 0 run the
  // op now, 1 record it (the current stream captures), 2 queue it behind the current stream's
  // pending work (only asked with `ordering`, under the shim).
  m.def("_torch_op_route", [](bool ordering) {
          if (in_internal_torch()) return 0;
          const Stream& s = current_stream_ref();
          if (s.is_capturing()) return 1;
          return ordering && !s.query() ? 2 : 0;
        }, py::arg("ordering"),
        "How npugraph/_torch_capture.py routes a torch op: 0 now, 1 into the capture, 2 behind pending work.");
  m.def("_launch_callable", [](py::handle stream, py::object fn) {
          const Stream s = stream_required(stream);
          if (!PyCallable_Check(fn.ptr()))
            throw_type_error("_launch_callable: fn", fn, "a callable taking no arguments");
          launch_callable(s, std::move(fn));
        }, py::arg("stream"), py::arg("fn"),
        "Enqueues fn() on `stream` (the task that replays a captured torch op; npugraph/_torch_capture.py).");
}

}  // namespace npugraph::python
