// npugraph.npu: streams, events, ExternalEvent, devices; npugraph.empty / zeros / memory_stats — one
// class or function per C++ one. Graphs and task groups are in graph.cpp.
//
// Note [Blocking replays from Python]
// On the CPU backend a "device" tensor is host memory that numpy and torch read directly, with no
// copy that could synchronize. So from Python, replay() and eager ops return once their work has run
// (blocking=None, the default, means True), as torch's CPU ops do; pass blocking=False for the
// asynchronous form and synchronize yourself. Under the torch_npu shim (npugraph.compat.install())
// the default becomes asynchronous, as torch_npu's replay is: vllm-ascend replays first and updates
// after, the replay's ExternalEvent waits released by the update's records, which a blocking replay
// would wait for forever. There torch ops are what reads results, and the shim orders the installing
// thread's eager torch ops after its current stream's pending work (Note [Eager torch ops in stream
// order] in npugraph/_torch_capture.py), so `g.replay(); torch.equal(out, expected)` sees the replay.
// Capture and update are unaffected (nothing runs then). The GIL is released around everything that
// may block: capture, replay, update, synchronize, and op calls.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {

namespace {

// Deadlines above this are treated as this (about 3.2 years: "never" for a wait, and far from the
// ranges of std::chrono's millisecond and nanosecond clocks).
constexpr double kMaxDeadlineSeconds = 1e8;

Device device_arg(py::handle device) {
  if (device.is_none()) return Device::cpu();
  if (PyBool_Check(device.ptr()))
    throw_type_error("device", device, "an int, a str ('cpu', 'npu:0') or a torch.device");
  Device d = Device::cpu();
  if (py::isinstance<py::int_>(device)) {
    const std::int64_t index = int_arg(device, "device");
    NG_CHECK_ARG(index == 0, "device = ", index, ": this build has one device, 0 (the cpu)");
    return d;
  }
  if (py::isinstance<py::str>(device)) {
    d = Device::parse(str_arg(device, "device"));
  } else if (py::hasattr(device, "type") && py::hasattr(device, "index")) {  // torch.device
    d = Device::parse(py::str(device));
  } else {
    throw_type_error("device", device, "an int, a str ('cpu', 'npu:0') or a torch.device");
  }
  NG_CHECK_ARG(d.type() != DeviceType::cpu || d.index() == 0, "device = ", short_repr(device),
               ": this build has one device, 0 (the cpu)");
  return d;
}

// empty(2, 3) or empty((2, 3)) / empty([2, 3]), as torch.
Shape shape_of(const py::args& size) {
  Shape shape;
  if (size.size() == 1 && !PyLong_Check(size[0].ptr()) && !PyIndex_Check(size[0].ptr())) {
    const py::handle s = size[0];
    if (PyUnicode_Check(s.ptr()) || PyBytes_Check(s.ptr()) || !py::isinstance<py::sequence>(s))
      throw_type_error("size", s, "ints or one sequence of ints");
    std::ptrdiff_t i = 0;
    for (auto d : py::reinterpret_borrow<py::sequence>(s)) shape.push_back(int_element(d, "size", i++));
  } else {
    std::ptrdiff_t i = 0;
    for (auto d : size) shape.push_back(int_element(d, "size", i++));
  }
  return shape;
}

DType dtype_arg(py::handle dtype) { return dtype.is_none() ? DType::f32 : to_dtype(dtype); }
Kind kind_arg(py::handle dtype) { return dtype.is_none() ? Kind::numpy : kind_of_dtype(dtype); }

// The kind empty/zeros return on `device`: what the dtype implies on the cpu; on a CUDA device a
// torch tensor (numpy holds host memory only) for no dtype, a torch dtype or a name ("float16"),
// and a numpy dtype object there is refused before allocating.
Kind kind_on(const char* fn, Device device, py::handle dtype) {
  if (device.is_cpu()) return kind_arg(dtype);
  const bool numpy_dtype = !dtype.is_none() && !PyUnicode_Check(dtype.ptr()) && kind_of_dtype(dtype) == Kind::numpy;
  NG_CHECK_ARG(!numpy_dtype, fn, ": device = ", device.str(),
               ", dtype = ", short_repr(dtype), ": a numpy array holds host memory only; give a torch dtype "
               "(torch.float32, ...) for a tensor on ", device.str());
  return Kind::torch;
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

const Event& event_arg(py::handle v, const char* name) {
  if (!py::isinstance<Event>(v)) throw_type_error(name, v, "an npugraph.npu.Event");
  return v.cast<const Event&>();
}

// Seconds from Python -> a deadline (Note: saturates at kMaxDeadlineSeconds).
std::chrono::milliseconds deadline_arg(py::handle v) {
  const double seconds = float_arg(v, "deadline");
  if (!(std::isfinite(seconds) && seconds >= 0)) {
    std::ostringstream text;
    text << seconds;
    NG_THROW(ArgumentError, "deadline = ", text.str(), " s: must be a finite number of seconds >= 0");
  }
  return std::chrono::milliseconds(std::llround(std::min(seconds, kMaxDeadlineSeconds) * 1000.0));
}

double seconds_of(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; }

// Note [Streams die without the GIL]
// The last reference to a stream joins its worker, which first runs the work still queued, and
// that work may be Python (a torch op queued behind pending work under the shim, a
// launch_host_func callable) that takes the GIL. A Stream object dropped by Python
// (`_eager(x, torch.npu.Stream())`) is destroyed in its dealloc, holding the GIL: the join would
// wait for a task that waits for the GIL, forever. So the Python object's holder destroys the
// stream with the GIL released.
struct DeleteWithoutGil {
  void operator()(Stream* s) const {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      delete s;
    } else {
      delete s;
    }
  }
};
using StreamHolder = std::unique_ptr<Stream, DeleteWithoutGil>;

}  // namespace

void bind_runtime(py::module_& m, py::module_& npu) {
  py::class_<Stream, StreamHolder> stream_class(npu, "Stream", "An asynchronous in-order queue of work (torch.npu.Stream).");
  stream_class
      .def(py::init([](py::object device, py::object priority) {
             (void)int_arg(priority, "priority");  // one priority on the cpu backend
             return Stream::create(device_arg(device));
           }),
           py::arg("device") = py::none(), py::arg("priority") = 0)
      .def("synchronize", [](const Stream& s) { s.synchronize(); }, py::call_guard<py::gil_scoped_release>(),
           "Waits until all work issued so far has run. Raises the first error a task raised since the "
           "last synchronize (TaskError naming the task), WaitTimeoutError when the stream (or one it "
           "waits on) is stalled in an ExternalEvent wait past its deadline, StateError inside a "
           "capture that forbids synchronizing.")
      .def("query", &Stream::query, py::call_guard<py::gil_scoped_release>(),
           "True when all work issued so far has run (never blocks).")
      .def("wait_event", [](const Stream& s, py::handle e) { s.wait(event_arg(e, "event")); }, py::arg("event"),
           "Orders later work on this stream after the event's most recent record.")
      .def("wait_stream", [](const Stream& s, py::handle other) { s.wait(stream_required(other)); },
           py::arg("stream"), "Orders later work on this stream after all work issued so far on `stream`.")
      .def_property_readonly("id", &Stream::id)
      .def("is_capturing", &Stream::is_capturing, "True while the stream records into a graph.")
      .def("_capture_mark", &Stream::capture_mark,
           "While capturing, a value that changes whenever something is recorded on the stream (0 "
           "otherwise): the torch-op recorder extends its last task while it is unchanged.")
      .def("is_updating", &Stream::is_updating,
           "True between graph_task_update_begin and graph_task_update_end on this stream.")
      .def_property_readonly("device", [](const Stream& s) { return s.device().str(); })
      .def("__eq__", [](const Stream& a, py::handle b) {
             return py::isinstance<Stream>(b) && a == b.cast<const Stream&>();
           })
      .def("__hash__", [](const Stream& s) { return s.id(); })
      .def("__repr__", [](const Stream& s) { return "<npugraph.npu.Stream " + s.str() + ">"; });

  npu.def("current_stream", [](py::object device) { return current_stream(device_arg(device)); },
          py::arg("device") = py::none(),
          "The calling thread's current stream (the default stream unless set_stream or a "
          "`with npugraph.npu.stream(s):` block chose another).");
  npu.def("default_stream", [](py::object device) { return Stream::default_stream(device_arg(device)); },
          py::arg("device") = py::none(), "The device's default stream (which never captures).");
  npu.def("set_stream", [](py::handle s) { set_current_stream(stream_required(s)); }, py::arg("stream"),
          "Makes `stream` the calling thread's current stream.");
  npu.def("set_device", [](py::object device) { device_arg(device); }, py::arg("device"),
          "Selects the device: npugraph has one, 0 / 'cpu' / 'npu' / 'npu:0'; any other value raises "
          "ArgumentError naming it.");
  npu.def("current_device", [] { return 0; }, "The current device's index: always 0 (the cpu).");
  npu.def("device_count", [] { return 1; }, "The number of devices: 1 (the cpu).");
  npu.def("is_available", [] { return true; }, "True: the cpu backend is always available.");
  // npugraph.cuda: what torch.cuda says of the GPUs (the streams, graphs and ops are npugraph.npu's
  // and the top level's, on device='cuda:N' / torch CUDA tensors: docs/python.md, "On CUDA").
  py::module_ cuda = m.def_submodule("cuda", "the CUDA devices (torch.cuda names)");
  cuda.def("device_count", [] { return device_count(DeviceType::cuda); },
           "The number of CUDA devices: 0 without a GPU, a driver, or the CUDA backend in this build.");
  cuda.def("is_available", [] { return device_count(DeviceType::cuda) > 0; },
           "Whether a cuda:N device can be used (device_count() > 0).");
  npu.def("synchronize", [](py::object device) {
            const Device d = device_arg(device);
            py::gil_scoped_release release;
            device_synchronize(d);
          }, py::arg("device") = py::none(),
          "Waits for every stream of the device; raises the first task error, or WaitTimeoutError "
          "naming a stalled ExternalEvent wait and its stream.");

  py::class_<StreamContext>(npu, "stream", "`with npugraph.npu.stream(s):` makes s the current stream.")
      .def(py::init([](py::object s) {
             StreamContext c;
             if (!s.is_none()) c.stream = stream_required(s);
             return c;
           }), py::arg("stream"))
      .def("__enter__", [](StreamContext& c) { c.enter(); return c.stream; })
      .def("__exit__", [](StreamContext& c, py::args) { c.exit(); return false; });

  py::class_<Event>(npu, "Event", "A stream event (torch.npu.Event).")
      .def(py::init([](py::object enable_timing, py::object blocking, py::object interprocess) {
             const bool timing = bool_arg(enable_timing, "enable_timing");
             (void)bool_arg(blocking, "blocking");
             NG_CHECK_ARG(!bool_arg(interprocess, "interprocess"),
                          "Event: interprocess = True: not supported on the cpu backend");
             return Event({.enable_timing = timing});
           }),
           py::arg("enable_timing") = false, py::arg("blocking") = false, py::arg("interprocess") = false)
      .def("record", [](Event& e, py::object s) { e.record(stream_arg(s)); }, py::arg("stream") = py::none(),
           "Records the event on `stream` (default: the current one): it completes when the work "
           "issued there before it has run.")
      .def("wait", [](const Event& e, py::object s) { e.wait(stream_arg(s)); }, py::arg("stream") = py::none(),
           "Orders later work on `stream` (default: the current one) after this event's last record.")
      .def("query", &Event::query, py::call_guard<py::gil_scoped_release>(),
           "True when the last record has completed (or the event was never recorded).")
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Waits for the last record to complete; raises WaitTimeoutError if the recording stream is "
           "stalled in an ExternalEvent wait past its deadline.")
      .def("elapsed_time", [](const Event& e, py::handle end) { return e.elapsed_time(event_arg(end, "end_event")); },
           py::arg("end_event"),
           "Milliseconds between this event and end_event; both need Event(enable_timing=True).");
  // After Event's binding, so that its signature names npugraph.npu.Event.
  stream_class.def("record_event", [](const Stream& s, py::object event) {
             Event e = event.is_none() ? Event() : event_arg(event, "event");
             e.record(s);
             return e;
           }, py::arg("event") = py::none(), "Records `event` (a new Event when None) on this stream; returns it.");

  py::class_<ExternalEvent>(npu, "ExternalEvent",
                            "A binary signal across the graph boundary: record sets it, wait blocks the "
                            "stream until it is set and clears it, reset clears it.")
      .def(py::init([](py::object name) { return ExternalEvent(str_arg(name, "name")); }), py::arg("name") = "")
      .def("record", [](ExternalEvent& e, py::object s) { e.record(stream_arg(s)); }, py::arg("stream") = py::none(),
           "Sets the signal when `stream` (default: the current one) reaches this point. Recording an "
           "event that is already set delivers nothing new (a collapsed record: counted, reported).")
      .def("wait", [](ExternalEvent& e, py::object s) { e.wait(stream_arg(s)); }, py::arg("stream") = py::none(),
           "Blocks `stream` (default: the current one; captured into a graph inside a capture) until "
           "the signal is set, then consumes it. A wait past the deadline is reported and the waiting "
           "stream's synchronize raises WaitTimeoutError.")
      .def("reset", [](ExternalEvent& e, py::object s) { e.reset(stream_arg(s)); }, py::arg("stream") = py::none(),
           "Clears the signal when `stream` (default: the current one) reaches this point.")
      .def_property_readonly("name", &ExternalEvent::name)
      .def("is_set", &ExternalEvent::is_set, "True when the signal is set now (a snapshot).")
      .def("collapsed_records", &ExternalEvent::collapsed_records,
           "How many records of this event found it already set (each delivered nothing).")
      .def("set_wait_deadline", [](ExternalEvent& e, py::handle seconds) {
             e.set_wait_deadline(with_context("ExternalEvent.set_wait_deadline: ", [&] { return deadline_arg(seconds); }));
           }, py::arg("seconds"),
           "How long (seconds) a wait on this event may block before it is reported and the waiting "
           "stream's synchronize raises WaitTimeoutError. A finite number >= 0, rounded to the "
           "millisecond; values above 1e8 s (about 3 years) mean 1e8 s.")
      .def_property_readonly("wait_deadline", [](const ExternalEvent& e) { return seconds_of(e.wait_deadline()); },
                             "This event's wait deadline in seconds (the default one unless set).");
  npu.attr("MAX_EXTERNAL_WAIT_DEADLINE") = kMaxDeadlineSeconds;
  npu.def("set_default_external_wait_deadline", [](py::handle seconds) {
            set_default_external_wait_deadline(
                with_context("set_default_external_wait_deadline: ", [&] { return deadline_arg(seconds); }));
          }, py::arg("seconds"),
          "The wait deadline (seconds) of every ExternalEvent without its own; initially 10 s. Values "
          "above MAX_EXTERNAL_WAIT_DEADLINE (1e8 s) mean that.");
  npu.def("total_collapsed_records", &total_collapsed_records,
          "Collapsed records of every ExternalEvent so far (a record that found its event already set; "
          "each event counts its own in collapsed_records()).");
  npu.def("default_external_wait_deadline", [] { return seconds_of(default_external_wait_deadline()); },
          "The default ExternalEvent wait deadline, in seconds.");

  m.def("empty", [](py::args size, py::object dtype, py::object device) {
          const Device d = device_arg(device);
          const Shape shape = with_context("empty: ", [&] { return shape_of(size); });
          const Kind kind = kind_on("empty", d, dtype);
          return from_tensor(empty(shape, dtype_arg(dtype), d), kind);
        }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        "An uninitialised tensor (numpy array, or torch tensor for a torch dtype); inside a capture it "
        "comes from the graph's pool.");
  m.def("zeros", [](py::args size, py::object dtype, py::object device) {
          const Device d = device_arg(device);
          const Shape shape = with_context("zeros: ", [&] { return shape_of(size); });
          const Kind kind = kind_on("zeros", d, dtype);
          Tensor t = zeros(shape, dtype_arg(dtype), d);
          const Stream s = current_stream(d);
          if (!s.is_capturing()) {
            py::gil_scoped_release release;
            s.synchronize();
          }
          return from_tensor(t, kind);
        }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        "A zero-filled tensor; inside a capture the fill is a graph task (replays zero it again).");
  m.def("memory_stats", [] {
    const MemoryStats s = memory_stats();
    py::dict d;
    d["reserved_bytes"] = s.reserved_bytes;
    d["allocated_bytes"] = s.allocated_bytes;
    d["segments"] = s.segments;
    d["pools"] = s.pools;
    d["peak_allocated_bytes"] = s.peak_allocated_bytes;
    d["peak_reserved_bytes"] = s.peak_reserved_bytes;
    return d;
  }, "The caching allocator's totals over every pool: reserved_bytes (held from the system), "
     "allocated_bytes (handed to live tensors), segments, pools, and the peaks of the first two "
     "since reset_peak_memory_stats().");
  m.def("_allocator_stats", [] {
    const AllocatorStats s = allocator_stats();
    py::dict d;
    const char* pools[] = {"all", "small_pool", "large_pool"};
    auto put = [&](const char* stat, const std::array<StatCounter, 3>& counters) {
      for (int p = 0; p < 3; ++p) {
        const StatCounter& c = counters[static_cast<std::size_t>(p)];
        const std::string key = std::string(stat) + "." + pools[p] + ".";
        d[py::str(key + "current")] = c.current;
        d[py::str(key + "peak")] = c.peak;
        d[py::str(key + "allocated")] = c.allocated;
        d[py::str(key + "freed")] = c.freed;
      }
    };
    put("allocation", s.allocation);
    put("allocated_bytes", s.allocated_bytes);
    put("requested_bytes", s.requested_bytes);
    put("segment", s.segment);
    put("reserved_bytes", s.reserved_bytes);
    d["num_alloc_retries"] = s.num_alloc_retries;
    d["num_ooms"] = s.num_ooms;
    d["num_sync_all_streams"] = s.num_sync_all_streams;
    d["num_device_alloc"] = s.num_device_alloc;
    d["num_device_free"] = s.num_device_free;
    return d;
  }, "torch's allocator counters (allocation, allocated_bytes, requested_bytes, segment, "
     "reserved_bytes; each .{all,small_pool,large_pool}.{current,peak,allocated,freed}) and event "
     "counts; npugraph.npu.memory_stats() adds the rest of torch's keys.");
  m.def("_memory_snapshot", [] {
    py::list out;
    for (const SegmentSnapshot& s : memory_snapshot()) {
      py::dict d;
      d["address"] = s.address;
      d["size"] = s.size;
      d["requested_size"] = s.requested_size;
      d["allocated"] = s.allocated;
      d["stream"] = s.stream;
      d["pool_id"] = s.pool_id;
      d["private_pool"] = s.private_pool;
      out.append(std::move(d));
    }
    return out;
  }, "Every segment of the allocator (one block each), by address; npugraph.npu.memory_snapshot() "
     "gives them torch's shape.");
  m.def("reset_accumulated_memory_stats", [] { reset_accumulated_memory_stats(); },
        "Zeroes the allocated/freed totals and the event counts of npugraph.npu.memory_stats().");
  m.def("start_trace", [] { start_trace(); },
        "Begins recording a timeline of every task the streams run (npugraph.profile wraps it).");
  m.def("stop_trace", [](py::object path) -> py::object {
          if (path.is_none()) {
            std::string json;
            {
              py::gil_scoped_release release;
              json = stop_trace();
            }
            return py::str(json);
          }
          const std::string p = str_arg(path, "path");
          py::gil_scoped_release release;
          stop_trace(p);
          return py::none();
        }, py::arg("path") = py::none(),
        "Ends the recording: writes Chrome trace JSON to `path`, or returns it when path is None.");
  m.def("set_log_level", [](py::handle level) {
          const std::string v = str_arg(level, "level");
          if (v == "off") set_log_level(LogLevel::off);
          else if (v == "info") set_log_level(LogLevel::info);
          else if (v == "debug") set_log_level(LogLevel::debug);
          else NG_THROW(ArgumentError, "set_log_level: level = '", v, "': must be 'off', 'info' or 'debug'");
        }, py::arg("level"),
        "Logs capture, instantiation, task updates (info) and replay launches (debug) to stderr; "
        "NPUGRAPH_LOG=info sets it from the environment.");
  m.def("set_kernel_fusion", [](bool on) { set_kernel_fusion(on); }, py::arg("on"),
        "Whether graphs instantiated from now on run registered pairs of neighbouring kernels as one "
        "task (add then rms_norm, a rotation then its cache write), with the same bits; on by default, "
        "NPUGRAPH_KERNEL_FUSION=0 starts it off. Graphs already instantiated keep their tasks.");
  m.def("kernel_fusion", [] { return kernel_fusion(); }, "Whether graphs instantiated now fuse (set_kernel_fusion).");
  m.def("reset_peak_memory_stats", [] { reset_peak_memory_stats(); },
        "Restarts the peak_* values of memory_stats() from the current ones.");
  m.def("empty_cache", [] { empty_cache(); }, py::call_guard<py::gil_scoped_release>(),
        "Returns the default pool's cached free blocks to the system (waits for queued work first; "
        "a synchronizing call, refused inside a capture).");
}

}  // namespace npugraph::python
