// Graph-owned updates (Note [Auto-dispatch capture] in dispatch.hpp).
#include "dispatch.hpp"

#include <atomic>
#include <string>

#include "args.hpp"

namespace npugraph::python {

std::shared_ptr<DispatchRecords>& active_dispatch() {
  thread_local std::shared_ptr<DispatchRecords> active;
  return active;
}

void reset_graph(PyGraph& g) {
  std::shared_ptr<DispatchRecords> records = g.dispatch;
  {
    py::gil_scoped_release release;
    if (records) records->updates.reset(g.graph);  // waits for an update or a recorded call in flight
    else g.graph.reset();
  }
  if (g.dispatch == records) {  // not replaced by a capture another thread began meanwhile
    g.auto_dispatch_capture = false;
    g.dispatch.reset();
  }
  py::gil_scoped_release release;
  records.reset();  // may free the records' tensors
}

namespace {

std::atomic<bool> g_replay_blocks{true};

// graph.update(cpu_update_input=...): parse every dict (GIL held), then re-issue without the GIL.
void update_graph(PyGraph& g, py::handle cpu_update_input) {
  NG_CHECK_STATE(g.auto_dispatch_capture && g.dispatch,
                 "NPUGraph.update: graph ", g.graph.id(), " was not captured with auto_dispatch_capture="
                 "True; capture it inside npugraph.npu.graph(g, auto_dispatch_capture=True) to update "
                 "its recorded calls (or update task groups with graph_task_update_begin/end)");
  const std::shared_ptr<DispatchRecords> hold = g.dispatch;  // alive until this update returns
  RecordedUpdates::Update u(hold->updates, g.graph, "NPUGraph.update");  // never blocks
  {
    py::gil_scoped_release release;  // a replay holds the order without the GIL, never needing it
    u.wait_for_replays();
  }
  stage_fia_updates(u, cpu_update_input);
  py::gil_scoped_release release;
  u.issue();
}

}  // namespace

bool replay_blocks_by_default() { return g_replay_blocks.load(std::memory_order_relaxed); }
void set_replay_blocks_by_default(bool blocking) { g_replay_blocks.store(blocking); }

void bind_dispatch(py::class_<PyGraph>& graph_class) {
  graph_class
      .def("update", &update_graph, py::arg("cpu_update_input"),
           "Re-issues the fused_infer_attention_score calls recorded by an auto_dispatch_capture "
           "capture with new keyword arguments: one dict per call, or one dict for all ([{}] re-issues "
           "the current ones). Each replay needs an update before it. Raises StateError if another "
           "thread is updating the graph (nothing is changed then).")
      .def_property_readonly("auto_dispatch_capture", [](const PyGraph& g) { return g.auto_dispatch_capture; })
      .def_property_readonly("num_dispatch_records",
                             [](const PyGraph& g) -> std::size_t { return g.dispatch ? g.dispatch->updates.size() : 0; })
      .def_property_readonly("update_stream", [](const PyGraph& g) {
        return g.dispatch ? g.dispatch->updates.update_stream() : RecordedUpdates::update_stream_for(Device::cpu());
      }, "The stream g.update() issues on: one for every graph of the device (Note [One update stream]).");
}

}  // namespace npugraph::python
