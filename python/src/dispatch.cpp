// Graph-owned updates (Note [Auto-dispatch capture] in dispatch.hpp).
#include "dispatch.hpp"

#include <string>

#include "args.hpp"

namespace npugraph::python {

void mark_busy(DispatchRecords& d, const char* what) { d.busy.store(what, std::memory_order_relaxed); }

std::shared_ptr<DispatchRecords>& active_dispatch() {
  thread_local std::shared_ptr<DispatchRecords> active;
  return active;
}

void reset_graph(PyGraph& g) {
  std::shared_ptr<DispatchRecords> records = g.dispatch;
  {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock;
    if (records) {
      lock = std::unique_lock(records->mutex);  // waits for an update or a recorded call in flight
      mark_busy(*records, "resetting");
      records->dead = true;
    }
    g.graph.reset();
  }
  if (g.dispatch == records) {  // not replaced by a capture another thread began meanwhile
    g.auto_dispatch_capture = false;
    g.dispatch.reset();
  }
  py::gil_scoped_release release;
  records.reset();  // may free the records' tensors
}

bool take_replay_mark(const PyGraph& g, DispatchRecords* d) {
  // d is non-null only for an auto-dispatch graph (the caller read that with the GIL held).
  if (!d || d->count.load() == 0) return false;
  if (d->updated.exchange(false)) return true;
  if (g.graph.state() != Graph::State::ready) return false;  // replay() says what is wrong
  NG_THROW(StateError, "NPUGraph.replay: graph ", d->graph_id, " was captured with auto_dispatch_capture=True "
           "and its ", d->count.load(), " recorded fused_infer_attention_score call(s) wait for an update "
           "before every replay, but none was made since the capture or the last replay (the replay "
           "would block until the ExternalEvent deadline). Call g.update(cpu_update_input=[{}]) to "
           "re-issue them with their current arguments (or pass new ones), then replay");
}

void wait_for_updates_in_flight(DispatchRecords& d) {
  if (d.updated.load()) return;
  std::unique_lock lock(d.in_flight_mutex);
  d.in_flight_cv.wait(lock, [&] { return d.updates_in_flight == 0 || d.updated.load(); });
}

namespace {

std::atomic<bool> g_replay_blocks{true};

// Counts one g.update in DispatchRecords::updates_in_flight for its whole call.
class UpdateInFlight {
 public:
  explicit UpdateInFlight(DispatchRecords& d) : d_(d) {
    std::lock_guard lock(d_.in_flight_mutex);
    ++d_.updates_in_flight;
  }
  UpdateInFlight(const UpdateInFlight&) = delete;
  UpdateInFlight& operator=(const UpdateInFlight&) = delete;
  ~UpdateInFlight() {
    {
      std::lock_guard lock(d_.in_flight_mutex);
      --d_.updates_in_flight;
    }
    d_.in_flight_cv.notify_all();
  }

 private:
  DispatchRecords& d_;
};

// graph.update(cpu_update_input=...): parse every dict (GIL held), then re-issue without the GIL.
void update_graph(PyGraph& g, py::handle cpu_update_input) {
  NG_CHECK_STATE(g.auto_dispatch_capture && g.dispatch,
                 "NPUGraph.update: graph ", g.graph.id(), " was not captured with auto_dispatch_capture="
                 "True; capture it inside npugraph.npu.graph(g, auto_dispatch_capture=True) to update "
                 "its recorded calls (or update task groups with graph_task_update_begin/end)");
  const std::shared_ptr<DispatchRecords> hold = g.dispatch;  // alive until this update returns
  DispatchRecords& d = *hold;
  const UpdateInFlight in_flight(d);
  std::unique_lock lock(d.mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    const char* busy = d.busy.load(std::memory_order_relaxed);
    NG_THROW(StateError, "NPUGraph.update: graph ", d.graph_id, ": another thread is ",
             busy ? busy : "using", " it; one update of a graph runs at a time, so this one "
             "changed nothing (serialize the updates of a graph, or retry)");
  }
  mark_busy(d, "updating");
  NG_CHECK_STATE(!d.dead, "NPUGraph.update: graph ", d.graph_id,
                 " was reset by another thread; capture it again to update it");
  NG_CHECK_STATE(g.graph.state() == Graph::State::ready, "NPUGraph.update: graph ", d.graph_id,
                 " is still being captured; update it after its capture ends");
  NG_CHECK_ARG(!d.records.empty(), "NPUGraph.update: graph ", g.graph.id(),
               " recorded no fused_infer_attention_score call during its capture: nothing to update");
  std::unique_lock<std::mutex> order;
  {
    py::gil_scoped_release release;  // a replay holds it without the GIL and never needs the GIL
    order = std::unique_lock(d.order);  // the wait on d.last_replay: update_fia_records
  }
  update_fia_records(d, cpu_update_input);
  d.updated.store(true);
}

}  // namespace

std::mutex& shared_update_mutex() {
  static std::mutex mu;
  return mu;
}

Stream shared_update_stream(Device device) {
  // Never destroyed: graphs alive at exit may still name it (their records hold a copy).
  static std::mutex mu;
  static auto* streams = new std::vector<std::pair<Device, Stream>>();
  std::lock_guard lock(mu);
  for (const auto& [d, s] : *streams)
    if (d == device) return s;
  streams->emplace_back(device, Stream::create(device));
  return streams->back().second;
}

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
                             [](const PyGraph& g) -> std::size_t { return g.dispatch ? g.dispatch->count.load() : 0; })
      .def_property_readonly("update_stream", [](const PyGraph& g) {
        return g.dispatch ? g.dispatch->update_stream : shared_update_stream(Device::cpu());
      }, "The stream g.update() issues on: one for every graph of the device (Note [One update stream]).");
}

}  // namespace npugraph::python
