// npugraph.npu: NPUGraph, the capture context behind npugraph.npu.graph, pools, task groups and task
// update — one class or function per C++ one.
//
// Every binding that changes a graph's Python-side state (its auto-dispatch records) does so only
// after the C++ call that may refuse has succeeded: a refused capture_begin or `with graph(g):` leaves
// the graph, its records and the capture in flight as they were (Note [Auto-dispatch capture]).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "dispatch.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {

namespace {

// `with npugraph.npu.graph(g, pool=None, stream=None, capture_error_mode="global",
//                          auto_dispatch_capture=False):` (npugraph.npu.graph, in Python, wraps it)
struct GraphContext {
  PyGraph* graph;
  std::optional<Stream> stream;
  CaptureOptions options;
  bool auto_dispatch_capture = false;
  std::unique_ptr<CaptureScope> scope;
  std::shared_ptr<DispatchRecords> previous;  // the enclosing capture's records on this thread
};

CaptureOptions capture_options(py::handle pool, py::handle mode) {
  CaptureOptions o;
  if (!pool.is_none()) {
    if (!py::isinstance<PoolHandle>(pool))
      throw_type_error("pool", pool, "a pool handle (npugraph.npu.graph_pool_handle() or g.pool()) or None");
    o.pool = pool.cast<PoolHandle>();
  }
  o.mode = parse_capture_mode(str_arg(mode, "capture_error_mode"));
  return o;
}

// "stream" / "launch" -> UpdateOrder.
UpdateOrder order_arg(py::handle order) {
  const std::string text = with_context("graph_task_update_begin: ", [&] { return str_arg(order, "order"); });
  if (text == "stream") return UpdateOrder::stream;
  if (text == "launch") return UpdateOrder::launch;
  NG_THROW(ArgumentError, "graph_task_update_begin: order = '", text, "': must be 'stream' or 'launch'");
}

TaskGroupHandle handle_element(py::handle h, const std::string& name) {
  if (!py::isinstance<TaskGroupHandle>(h))
    throw_type_error(name, h, "a task group handle (graph_task_group_end returns one)");
  return h.cast<TaskGroupHandle>();
}

// One handle, or a list/tuple of them (a batched update).
std::vector<TaskGroupHandle> handles_arg(py::handle h) {
  if (py::isinstance<TaskGroupHandle>(h)) return {h.cast<TaskGroupHandle>()};
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr()))
    throw_type_error("graph_task_update_begin: handle", h, "a task group handle or a list of them");
  std::vector<TaskGroupHandle> out;
  std::size_t i = 0;
  for (auto x : h) out.push_back(handle_element(x, "graph_task_update_begin: handle[" + std::to_string(i++) + "]"));
  return out;
}

std::shared_ptr<DispatchRecords> new_records(const PyGraph& g, const Stream& capture_stream) {
  return std::make_shared<DispatchRecords>(g.graph, RecordedUpdates::update_stream_for(capture_stream.device()));
}

}  // namespace

void bind_graph(py::module_& m, py::module_& npu) {
  (void)m;
  py::class_<PoolHandle>(npu, "_PoolHandle", "A memory pool graphs captured one after another can share.")
      .def(py::init([] { return graph_pool_handle(); }), "A new private pool (graph_pool_handle()).")
      .def_property_readonly("id", &PoolHandle::id)
      .def("__eq__", [](const PoolHandle& a, py::handle b) {
        return py::isinstance<PoolHandle>(b) && a == b.cast<const PoolHandle&>();
      });
  npu.def("_set_replay_blocking_default", &set_replay_blocks_by_default, py::arg("blocking"),
          "Whether NPUGraph.replay() waits when blocking is not given (npugraph.compat.install() sets "
          "False: asynchronous, as on the device; Note [Blocking replays from Python]).");
  npu.def("_graph_update_stream", [] { return RecordedUpdates::update_stream_for(Device::cpu()); },
          "The one update stream every auto-dispatch graph's update() issues on (Note [One update "
          "stream] in npugraph/recorded_updates.hpp; torch_npu's graph_dispatch_mode.update_stream).");
  py::class_<UsePool>(npu, "_UsePool", "`with npugraph.npu.use_mem_pool(pool):` (npugraph/_npu_api.py)")
      .def(py::init([](const PoolHandle& pool) { return std::make_unique<UsePool>(pool); }),
           py::arg("pool"));
  npu.def("graph_pool_handle", [] { return graph_pool_handle(); },
          "A new pool handle: pass it as pool= to captures that should share memory.");

  py::class_<PyGraph> graph_class(npu, "NPUGraph", "A captured graph of stream work (torch_npu.npu.NPUGraph).");
  graph_class
      .def(py::init([](py::object keep_graph) {
             auto g = std::make_unique<PyGraph>();
             g->keep_graph = bool_arg(keep_graph, "keep_graph");
             return g;
           }), py::kw_only(), py::arg("keep_graph") = false,
           "A graph to capture into (torch_npu.npu.NPUGraph / torch.cuda.CUDAGraph). npugraph always "
           "keeps the captured graph next to its executable form, so keep_graph only records the "
           "choice: instantiate() is accepted either way and replay() needs no explicit instantiate.")
      .def("instantiate", [](const PyGraph& g) {
             NG_CHECK_STATE(g.graph.state() == Graph::State::ready, "NPUGraph.instantiate: graph ",
                            g.graph.id(), " has no finished capture to instantiate (capture it first; "
                            "capture_end instantiates it)");
           }, "Checks that the graph holds a finished capture: npugraph instantiates at capture_end "
              "(torch.cuda.CUDAGraph.instantiate with keep_graph=True).")
      .def_property_readonly("keep_graph", [](const PyGraph& g) { return g.keep_graph; })
      .def("capture_begin", [](PyGraph& g, py::object pool, py::object mode) {
             const CaptureOptions o = capture_options(pool, mode);
             {
               py::gil_scoped_release release;
               g.graph.capture_begin(o);  // may refuse: nothing is touched before it succeeds
             }
             g.auto_dispatch_capture = false;
             g.dispatch.reset();
           }, py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global",
           "Begins capturing the current stream (which must not be the default stream).")
      .def("capture_end", [](PyGraph& g) { g.graph.capture_end(); }, py::call_guard<py::gil_scoped_release>(),
           "Ends the capture begun on the current stream and instantiates the graph.")
      .def("replay", [](const PyGraph& g, py::object stream, py::object blocking) {
             const Stream s = stream_arg(stream);
             const bool block = blocking.is_none() ? replay_blocks_by_default() : bool_arg(blocking, "blocking");
             const std::shared_ptr<DispatchRecords> d = g.auto_dispatch_capture ? g.dispatch : nullptr;
             py::gil_scoped_release release;
             if (d) d->updates.replay(g.graph, s);  // Note [Updates after replays]
             else g.graph.replay(s);
             if (block) s.synchronize();
           }, py::arg("stream") = py::none(), py::arg("blocking") = py::none(),
           "Replays the graph on `stream` (default: the current one); blocking=True waits for it, "
           "blocking=False returns once it is launched. The default (None) waits, except under the "
           "torch_npu shim (npugraph.compat), where replays are asynchronous as on the device (Note "
           "[Blocking replays from Python]).")
      .def("reset", &reset_graph,
           "Frees the graph, its pool and its task groups (their handles go stale). Waits for an update "
           "of the graph running on another thread.")
      .def("pool", [](const PyGraph& g) { return g.graph.pool(); },
           "The graph's memory pool handle: pass it as pool= to a later capture to share its memory.")
      .def("debug_dump", [](const PyGraph& g, py::handle path) {
             g.graph.debug_dump(str_arg(path, "debug_path"));
           }, py::arg("debug_path"),
           "Writes the graph to debug_path: JSON (json()) when it ends in .json, else Graphviz DOT. "
           "(npugraph/_graph.py wraps it: torch_npu's aligned trace beside a JSON dump.)")
      .def("dot", [](const PyGraph& g) { return g.graph.dot(); },
           "The graph as Graphviz DOT text (what debug_dump writes for a path not ending in .json).")
      .def("json", [](const PyGraph& g) { return g.graph.json(); },
           "The graph as a Chrome-trace JSON document, torch_npu's debug_dump format (Note [Graph "
           "dump as JSON] in src/graph/graph_def.cpp).")
      .def("groups", [](const PyGraph& g) {
             py::list out;
             for (const TaskGroupHandle& h : g.graph.groups()) out.append(py::cast(h));
             return out;
           },
           "The graph's task groups in capture order: handles (index, num_tasks, valid) equal to the "
           "ones graph_task_group_end returned; [] before the capture ends.")
      .def_property_readonly("num_tasks", [](const PyGraph& g) { return g.graph.num_tasks(); })
      .def_property_readonly("id", [](const PyGraph& g) { return g.graph.id(); });
  bind_dispatch(graph_class);

  py::class_<GraphContext>(npu, "_GraphCapture",
                           "The C++ capture scope behind npugraph.npu.graph (use that instead).")
      .def(py::init([](py::handle graph, py::object pool, py::object stream, py::object capture_error_mode,
                       py::object auto_dispatch_capture) {
             if (!py::isinstance<PyGraph>(graph))
               throw_type_error("npu_graph", graph, "an npugraph.npu.NPUGraph");
             auto c = std::make_unique<GraphContext>();
             c->graph = &graph.cast<PyGraph&>();
             c->options = capture_options(pool, capture_error_mode);
             if (!stream.is_none()) c->stream = stream_required(stream);
             c->auto_dispatch_capture = bool_arg(auto_dispatch_capture, "auto_dispatch_capture");
             return c;
           }),
           py::arg("npu_graph"), py::arg("pool") = py::none(), py::arg("stream") = py::none(),
           py::arg("capture_error_mode") = "global", py::arg("auto_dispatch_capture") = false,
           py::keep_alive<1, 2>())
      .def("__enter__", [](GraphContext& c) {
        NG_CHECK_STATE(!c.scope, "npugraph.npu.graph: this context is already entered (its capture of graph ",
                       c.graph->graph.id(), " is running); use one `with npugraph.npu.graph(g):` per capture");
        PyGraph& g = *c.graph;
        std::unique_ptr<CaptureScope> scope;
        {
          py::gil_scoped_release release;  // may refuse: nothing is touched before it succeeds
          scope = c.stream ? std::make_unique<CaptureScope>(g.graph, *c.stream, c.options)
                           : std::make_unique<CaptureScope>(g.graph, c.options);
        }
        std::shared_ptr<DispatchRecords> records;
        if (c.auto_dispatch_capture) {
          try {
            records = new_records(g, scope->stream());
          } catch (...) {
            scope->abandon();
            throw;
          }
        }
        c.scope = std::move(scope);
        g.auto_dispatch_capture = c.auto_dispatch_capture;
        g.dispatch = records;
        // A plain capture inside an auto-dispatch one records nothing into the outer one.
        c.previous = std::exchange(active_dispatch(), std::move(records));
      })
      .def("__exit__", [](GraphContext& c, py::object exc_type, py::object, py::object) {
        if (!c.scope) return false;
        active_dispatch() = std::move(c.previous);
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

  py::class_<TaskGroupHandle>(npu, "_TaskGroupHandle", "Names one task group of a captured graph.")
      .def_property_readonly("valid", &TaskGroupHandle::valid)
      .def_property_readonly("num_tasks", &TaskGroupHandle::num_tasks)
      .def_property_readonly("graph_id", &TaskGroupHandle::graph_id)
      .def_property_readonly("index", &TaskGroupHandle::index,
                             "The group's number in its graph, from 0 in capture order.")
      .def("__eq__", [](const TaskGroupHandle& a, py::handle b) {
        return py::isinstance<TaskGroupHandle>(b) && a == b.cast<const TaskGroupHandle&>();
      })
      .def("__hash__", [](const TaskGroupHandle& h) {
        return std::hash<std::uint64_t>()(h.graph_id() * 0x9e3779b97f4a7c15ull ^ h.index());
      })
      .def("__repr__", [](const TaskGroupHandle& h) {
        return "<npugraph task group " + std::to_string(h.index()) + " of graph " +
               std::to_string(h.graph_id()) + ": " + std::to_string(h.num_tasks()) + " task(s)" +
               (h.valid() ? "" : ", stale: its graph was reset or destroyed") + ">";
      });
  npu.def("graph_task_group_begin", [](py::handle s) { task_group_begin(stream_required(s)); },
          py::arg("stream"), "Opens a task group on the capturing stream: its kernel launches are updatable.");
  npu.def("graph_task_group_end", [](py::handle s) { return task_group_end(stream_required(s)); },
          py::arg("stream"), "Closes the stream's task group and returns its handle.");
  npu.def("graph_task_update_begin", [](py::handle s, py::handle handle, py::handle order) {
            const Stream stream = stream_required(s);
            const std::vector<TaskGroupHandle> handles = handles_arg(handle);
            const UpdateOrder o = order_arg(order);
            py::gil_scoped_release release;
            task_update_begin(stream, handles, o);
          }, py::arg("stream"), py::arg("handle"), py::kw_only(), py::arg("order") = "stream",
          "Begins updating the group(s) named by handle (one or a list) on a stream that is not "
          "capturing; re-issue the same ops on it, then call graph_task_update_end (or "
          "graph_task_update_abort).");
  npu.def("graph_task_update_end", [](py::handle s) {
            const Stream stream = stream_required(s);
            py::gil_scoped_release release;
            task_update_end(stream);
          }, py::arg("stream"), "Installs the re-issued launches' parameters (all groups or none).");
  npu.def("graph_task_update_abort", [](py::handle s) {
            const Stream stream = stream_required(s);
            py::gil_scoped_release release;
            task_update_abort(stream);
          }, py::arg("stream"),
          "Leaves update mode on the stream installing nothing (after an exception between "
          "graph_task_update_begin and graph_task_update_end); the groups are free to update again.");
}

}  // namespace npugraph::python
