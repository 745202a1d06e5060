// npugraph.npu: streams, events, graphs, task groups — one class or function per C++ one.
//
// Note [Blocking replays from Python]
// On the CPU backend a "device" tensor is host memory that numpy and torch read directly, with no
// copy that could synchronize. So from Python, replay() and eager ops return once their work has run
// (blocking=True, the default), as torch's CPU ops do; pass blocking=False for the asynchronous form
// and synchronize yourself. Capture and update are unaffected (nothing runs then). The GIL is
// released around everything that may block: capture, replay, update, synchronize, and op calls.
#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "convert.hpp"
#include "dispatch.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {

namespace {

Device device_arg(py::handle device) {
  if (device.is_none()) return Device::cpu();
  if (py::isinstance<py::int_>(device)) {
    const int index = device.cast<int>();
    NG_CHECK_ARG(index == 0, "device = ", index, ": this build has one device, 0 (the cpu)");
    return Device::cpu();
  }
  if (py::hasattr(device, "type") && !py::isinstance<py::str>(device))  // torch.device
    return Device::parse(py::str(device.attr("type")));
  return Device::parse(py::str(device));
}

// empty(2, 3) or empty((2, 3)) / empty([2, 3]), as torch.
Shape shape_of(const py::args& size) {
  Shape shape;
  if (size.size() == 1 && !py::isinstance<py::int_>(size[0])) {
    for (auto d : size[0]) shape.push_back(d.cast<std::int64_t>());
  } else {
    for (auto d : size) shape.push_back(d.cast<std::int64_t>());
  }
  return shape;
}

Stream stream_arg(py::handle s) {
  if (s.is_none()) return current_stream();
  return s.cast<Stream>();
}

// `with npugraph.npu.stream(s):` — makes s current, restores the previous stream on exit.
struct StreamContext {
  std::optional<Stream> stream, previous;
  void enter() {
    if (!stream) return;
    previous = current_stream();
    set_current_stream(*stream);
  }
  void exit() {
    if (previous) set_current_stream(*previous);
  }
};

// `with npugraph.npu.graph(g, pool=None, stream=None, capture_error_mode="global",
//                          auto_dispatch_capture=False):`
struct GraphContext {
  PyGraph* graph;
  std::optional<Stream> stream;
  CaptureOptions options;
  bool auto_dispatch_capture = false;
  std::unique_ptr<CaptureScope> scope;
  DispatchRecords* previous = nullptr;
};

// "stream" / "launch" -> UpdateOrder.
UpdateOrder order_arg(const std::string& order) {
  if (order == "stream") return UpdateOrder::stream;
  if (order == "launch") return UpdateOrder::launch;
  NG_THROW(ArgumentError, "graph_task_update_begin: order = '", order, "': must be 'stream' or 'launch'");
}

// One handle, or a list/tuple of them (a batched update).
std::vector<TaskGroupHandle> handles_arg(py::handle h) {
  if (py::isinstance<TaskGroupHandle>(h)) return {h.cast<TaskGroupHandle>()};
  if (!py::isinstance<py::list>(h) && !py::isinstance<py::tuple>(h))
    throw py::type_error("graph_task_update_begin: handle must be a task group handle or a list of them");
  std::vector<TaskGroupHandle> out;
  for (auto x : h) out.push_back(x.cast<TaskGroupHandle>());
  return out;
}

}  // namespace

void bind_runtime(py::module_& m, py::module_& npu) {
  py::class_<Stream>(npu, "Stream")
      .def(py::init([](py::object device, int priority) {
             (void)priority;  // one priority on the cpu backend
             return Stream::create(device_arg(device));
           }),
           py::arg("device") = py::none(), py::arg("priority") = 0)
      .def("synchronize", [](const Stream& s) { s.synchronize(); }, py::call_guard<py::gil_scoped_release>())
      .def("query", &Stream::query, py::call_guard<py::gil_scoped_release>())
      .def("wait_event", [](const Stream& s, const Event& e) { s.wait(e); })
      .def("wait_stream", [](const Stream& s, const Stream& other) { s.wait(other); })
      .def("record_event", [](const Stream& s, py::object event) {
             Event e = event.is_none() ? Event() : event.cast<Event>();
             e.record(s);
             return e;
           }, py::arg("event") = py::none())
      .def_property_readonly("id", &Stream::id)
      .def_property_readonly("device", [](const Stream& s) { return s.device().str(); })
      .def("__eq__", [](const Stream& a, const Stream& b) { return a == b; })
      .def("__hash__", [](const Stream& s) { return s.id(); })
      .def("__repr__", [](const Stream& s) { return "<npugraph.npu.Stream " + s.str() + ">"; });

  npu.def("current_stream", [](py::object device) { return current_stream(device_arg(device)); },
          py::arg("device") = py::none());
  npu.def("default_stream", [](py::object device) { return Stream::default_stream(device_arg(device)); },
          py::arg("device") = py::none());
  npu.def("set_stream", [](const Stream& s) { set_current_stream(s); });
  npu.def("set_device", [](py::object device) { device_arg(device); });
  npu.def("current_device", [] { return 0; });
  npu.def("device_count", [] { return 1; });
  npu.def("is_available", [] { return true; });
  npu.def("synchronize", [](py::object device) {
            const Device d = device_arg(device);
            py::gil_scoped_release release;
            device_synchronize(d);
          }, py::arg("device") = py::none());

  py::class_<StreamContext>(npu, "stream")
      .def(py::init([](py::object s) {
             StreamContext c;
             if (!s.is_none()) c.stream = s.cast<Stream>();
             return c;
           }), py::arg("stream"))
      .def("__enter__", [](StreamContext& c) { c.enter(); return c.stream; })
      .def("__exit__", [](StreamContext& c, py::args) { c.exit(); return false; });

  py::class_<Event>(npu, "Event")
      .def(py::init([](bool enable_timing, bool blocking, bool interprocess) {
             (void)blocking;
             NG_CHECK_ARG(!interprocess, "Event: interprocess = True: not supported on the cpu backend");
             return Event({.enable_timing = enable_timing});
           }),
           py::arg("enable_timing") = false, py::arg("blocking") = false, py::arg("interprocess") = false)
      .def("record", [](Event& e, py::object s) { e.record(stream_arg(s)); }, py::arg("stream") = py::none())
      .def("wait", [](const Event& e, py::object s) { e.wait(stream_arg(s)); }, py::arg("stream") = py::none())
      .def("query", &Event::query, py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("elapsed_time", &Event::elapsed_time, py::arg("end_event"));

  py::class_<ExternalEvent>(npu, "ExternalEvent")
      .def(py::init<std::string>(), py::arg("name") = "")
      .def("record", [](ExternalEvent& e, py::object s) { e.record(stream_arg(s)); }, py::arg("stream") = py::none())
      .def("wait", [](ExternalEvent& e, py::object s) { e.wait(stream_arg(s)); }, py::arg("stream") = py::none())
      .def("reset", [](ExternalEvent& e, py::object s) { e.reset(stream_arg(s)); }, py::arg("stream") = py::none())
      .def_property_readonly("name", &ExternalEvent::name)
      .def("is_set", &ExternalEvent::is_set)
      .def("collapsed_records", &ExternalEvent::collapsed_records)
      .def("set_wait_deadline", [](ExternalEvent& e, double seconds) {
             e.set_wait_deadline(std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
           }, py::arg("seconds"));

  py::class_<PoolHandle>(npu, "_PoolHandle")
      .def_property_readonly("id", &PoolHandle::id)
      .def("__eq__", [](const PoolHandle& a, const PoolHandle& b) { return a == b; });
  npu.def("graph_pool_handle", [] { return graph_pool_handle(); });

  auto capture_options = [](py::object pool, const std::string& mode) {
    CaptureOptions o;
    if (!pool.is_none()) o.pool = pool.cast<PoolHandle>();
    o.mode = parse_capture_mode(mode);
    return o;
  };

  py::class_<PyGraph> graph_class(npu, "NPUGraph");
  graph_class.def(py::init<>())
      .def("capture_begin", [capture_options](PyGraph& g, py::object pool, const std::string& mode) {
             const CaptureOptions o = capture_options(pool, mode);
             g.auto_dispatch_capture = false;
             g.dispatch.reset();
             py::gil_scoped_release release;
             g.graph.capture_begin(o);
           }, py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global")
      .def("capture_end", [](PyGraph& g) { g.graph.capture_end(); }, py::call_guard<py::gil_scoped_release>())
      .def("replay", [](const PyGraph& g, py::object stream, bool blocking) {
             const Stream s = stream_arg(stream);
             py::gil_scoped_release release;
             g.graph.replay(s);
             if (blocking) s.synchronize();
           }, py::arg("stream") = py::none(), py::arg("blocking") = true)
      .def("reset", [](PyGraph& g) {
             g.auto_dispatch_capture = false;
             std::shared_ptr<DispatchRecords> records = std::move(g.dispatch);
             py::gil_scoped_release release;
             g.graph.reset();
             records.reset();
           })
      .def("pool", [](const PyGraph& g) { return g.graph.pool(); })
      .def("debug_dump", [](const PyGraph& g, const std::string& path) { g.graph.debug_dump(path); },
           py::arg("debug_path"))
      .def("dot", [](const PyGraph& g) { return g.graph.dot(); })
      .def_property_readonly("num_tasks", [](const PyGraph& g) { return g.graph.num_tasks(); })
      .def_property_readonly("id", [](const PyGraph& g) { return g.graph.id(); });
  bind_dispatch(graph_class);

  py::class_<GraphContext>(npu, "graph")
      .def(py::init([capture_options](PyGraph& g, py::object pool, py::object stream,
                                      const std::string& capture_error_mode, bool auto_dispatch_capture) {
             auto c = std::make_unique<GraphContext>();
             c->graph = &g;
             c->options = capture_options(pool, capture_error_mode);
             if (!stream.is_none()) c->stream = stream.cast<Stream>();
             c->auto_dispatch_capture = auto_dispatch_capture;
             return c;
           }),
           py::arg("npu_graph"), py::arg("pool") = py::none(), py::arg("stream") = py::none(),
           py::arg("capture_error_mode") = "global", py::arg("auto_dispatch_capture") = false,
           py::keep_alive<1, 2>())
      .def("__enter__", [](GraphContext& c) {
        PyGraph& g = *c.graph;
        g.auto_dispatch_capture = c.auto_dispatch_capture;
        g.dispatch.reset();
        {
          py::gil_scoped_release release;
          c.scope = c.stream ? std::make_unique<CaptureScope>(g.graph, *c.stream, c.options)
                             : std::make_unique<CaptureScope>(g.graph, c.options);
        }
        if (c.auto_dispatch_capture) {
          g.dispatch = std::make_shared<DispatchRecords>(
              Stream::create(c.stream ? c.stream->device() : Device::cpu()));
          c.previous = std::exchange(active_dispatch(), g.dispatch.get());
        }
      })
      .def("__exit__", [](GraphContext& c, py::object exc_type, py::object, py::object) {
        if (c.auto_dispatch_capture) active_dispatch() = c.previous;
        if (!c.scope) return false;
        std::unique_ptr<CaptureScope> scope = std::move(c.scope);
        try {
          py::gil_scoped_release release;
          if (!exc_type.is_none()) scope->abandon();
          else scope->end();
        } catch (...) {
          c.graph->dispatch.reset();  // a failed capture records nothing
          throw;
        }
        if (!exc_type.is_none()) c.graph->dispatch.reset();
        return false;
      });

  py::class_<TaskGroupHandle>(npu, "_TaskGroupHandle")
      .def_property_readonly("valid", &TaskGroupHandle::valid)
      .def_property_readonly("num_tasks", &TaskGroupHandle::num_tasks)
      .def_property_readonly("graph_id", &TaskGroupHandle::graph_id);
  npu.def("graph_task_group_begin", [](const Stream& s) { task_group_begin(s); }, py::arg("stream"));
  npu.def("graph_task_group_end", [](const Stream& s) { return task_group_end(s); }, py::arg("stream"));
  npu.def("graph_task_update_begin", [](const Stream& s, py::handle handle, const std::string& order) {
            const std::vector<TaskGroupHandle> handles = handles_arg(handle);
            const UpdateOrder o = order_arg(order);
            py::gil_scoped_release release;
            task_update_begin(s, handles, o);
          }, py::arg("stream"), py::arg("handle"), py::kw_only(), py::arg("order") = "stream");
  npu.def("graph_task_update_end", [](const Stream& s) { task_update_end(s); }, py::arg("stream"),
          py::call_guard<py::gil_scoped_release>());

  m.def("empty", [](py::args size, py::object dtype, py::object device) {
          (void)device_arg(device);
          const Shape shape = shape_of(size);
          const DType dt = dtype.is_none() ? DType::f32 : to_dtype(dtype);
          return from_tensor(empty(shape, dt), dtype.is_none() ? Kind::numpy : kind_of_dtype(dtype));
        }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("zeros", [](py::args size, py::object dtype, py::object device) {
          (void)device_arg(device);
          const Shape shape = shape_of(size);
          const DType dt = dtype.is_none() ? DType::f32 : to_dtype(dtype);
          Tensor t = zeros(shape, dt);
          const Stream s = current_stream();
          if (!s.is_capturing()) {
            py::gil_scoped_release release;
            s.synchronize();
          }
          return from_tensor(t, dtype.is_none() ? Kind::numpy : kind_of_dtype(dtype));
        }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("memory_stats", [] {
    const MemoryStats s = memory_stats();
    py::dict d;
    d["reserved_bytes"] = s.reserved_bytes;
    d["allocated_bytes"] = s.allocated_bytes;
    d["segments"] = s.segments;
    d["pools"] = s.pools;
    return d;
  });
}

}  // namespace npugraph::python
