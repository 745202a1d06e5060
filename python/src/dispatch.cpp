// Graph-owned updates (Note [Auto-dispatch capture] in dispatch.hpp).
#include "dispatch.hpp"

#include <algorithm>
#include <string>

#include "args.hpp"

namespace npugraph::python {

namespace {

// Says what the holder of d.mutex does, for the StateError of an update that finds it taken. Set
// after each lock and never cleared, so a loser never reads an empty value.
void mark_busy(DispatchRecords& d, const char* what) { d.busy.store(what, std::memory_order_relaxed); }

}  // namespace

std::shared_ptr<DispatchRecords>& active_dispatch() {
  thread_local std::shared_ptr<DispatchRecords> active;
  return active;
}

std::optional<std::pair<Tensor, Tensor>> record_fia(DispatchRecords& d, const Tensor& query,
                                                    const Tensor& key, const Tensor& value,
                                                    const ops::FiaOptions& options) {
  std::lock_guard lock(d.mutex);
  mark_busy(d, "recording a call into");
  NG_CHECK_STATE(!d.dead, "npu_fused_infer_attention_score: graph ", d.graph_id,
                 " was reset (g.reset()) during its auto-dispatch capture, which ended it; the call is "
                 "not recorded (capture the graph again)");
  const Stream s = current_stream();
  if (!s.is_capturing()) return std::nullopt;  // e.g. inside `with npugraph.npu.stream(other):`
  FiaRecord r{query, key, value, options, {}, {}, {}, {}, ExternalEvent("fia record " + std::to_string(d.records.size()))};
  const std::int64_t need = ops::fia_workspace_bytes(query, key, value, options);
  auto it = std::find_if(d.workspaces.begin(), d.workspaces.end(),
                         [&](const auto& w) { return w.first == s.id(); });
  if (it == d.workspaces.end()) {
    d.workspaces.emplace_back(s.id(), Tensor());
    it = d.workspaces.end() - 1;
  }
  if (!it->second.defined() || it->second.numel() < need)  // earlier calls keep their smaller one
    it->second = empty({need}, DType::u8, query.device());
  r.workspace = it->second;
  const DType out_dtype = options.quant_scale2.defined() ? DType::i8 : query.dtype();
  r.attention_out = empty(ops::fia_output_shape(query, key, value, options), out_dtype, query.device());
  r.softmax_lse = options.softmax_lse_flag
                      ? empty(ops::fia_lse_shape(query, key, value, options), DType::f32, query.device())
                      : zeros({1}, DType::f32, query.device());
  r.event.wait(s);
  r.event.reset(s);
  task_group_begin(s);
  ops::fused_infer_attention_score_out(query, key, value, options, r.workspace, r.attention_out,
                                       r.softmax_lse);
  r.handle = task_group_end(s);
  d.handles.push_back(r.handle);
  d.events.push_back(r.event);
  d.records.push_back(std::move(r));
  d.count.store(d.records.size());
  return std::pair{d.records.back().attention_out, d.records.back().softmax_lse};
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

bool take_replay_mark(const PyGraph& g) {
  DispatchRecords* d = g.dispatch.get();
  if (!g.auto_dispatch_capture || !d || d->count.load() == 0) return false;
  if (d->updated.exchange(false)) return true;
  if (g.graph.state() != Graph::State::ready) return false;  // replay() says what is wrong
  NG_THROW(StateError, "NPUGraph.replay: graph ", d->graph_id, " was captured with auto_dispatch_capture=True "
           "and its ", d->count.load(), " recorded fused_infer_attention_score call(s) wait for an update "
           "before every replay, but none was made since the capture or the last replay (the replay "
           "would block until the ExternalEvent deadline). Call g.update(cpu_update_input=[{}]) to "
           "re-issue them with their current arguments (or pass new ones), then replay");
}

void restore_replay_mark(const PyGraph& g) {
  if (g.dispatch) g.dispatch->updated.store(true);
}

namespace {

// graph.update(cpu_update_input=...): parse every dict (GIL held), then re-issue without the GIL.
void update_graph(PyGraph& g, py::handle cpu_update_input) {
  NG_CHECK_STATE(g.auto_dispatch_capture && g.dispatch,
                 "NPUGraph.update: graph ", g.graph.id(), " was not captured with auto_dispatch_capture="
                 "True; capture it inside npugraph.npu.graph(g, auto_dispatch_capture=True) to update "
                 "its recorded calls (or update task groups with graph_task_update_begin/end)");
  const std::shared_ptr<DispatchRecords> hold = g.dispatch;  // alive until this update returns
  DispatchRecords& d = *hold;
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
  if (!py::isinstance<py::list>(cpu_update_input) && !py::isinstance<py::tuple>(cpu_update_input))
    throw py::type_error("NPUGraph.update: cpu_update_input must be a list of dicts, got " +
                         type_name(cpu_update_input) + " (" + short_repr(cpu_update_input) + ")");
  const py::sequence inputs = py::reinterpret_borrow<py::sequence>(cpu_update_input);
  const std::size_t n = d.records.size(), given = inputs.size();
  NG_CHECK_ARG(given == 1 || given == n, "NPUGraph.update: cpu_update_input has ", given,
               " dicts: pass one per recorded call (", n, ") or one for all");
  // The new values are swapped into the records' options field by field (no copies); on any error
  // the same swaps, undone in reverse, restore every recorded argument.
  d.staging.resize(n);
  d.undo.clear();
  std::vector<FieldSwap>& swaps = d.swaps;
  auto rollback = [&] {
    for (auto it = d.undo.rbegin(); it != d.undo.rend(); ++it)
      it->second(d.records[it->first].options, d.staging[it->first]);
    d.undo.clear();
  };
  try {
    for (std::size_t i = 0; i < n; ++i) {
      swaps.clear();
      try {
        apply_fia_kwargs(d.records[i].options, d.staging[i], inputs[given == 1 ? 0 : i],
                         given == 1 ? 0 : i, swaps);
      } catch (...) {
        for (FieldSwap f : swaps) d.undo.emplace_back(i, f);
        throw;
      }
      for (FieldSwap f : swaps) d.undo.emplace_back(i, f);
    }
    py::gil_scoped_release release;
    const Stream& u = d.update_stream;
    StreamGuard on(u);
    task_update_begin(u, d.handles);
    for (const FiaRecord& r : d.records)
      ops::fused_infer_attention_score_out(r.query, r.key, r.value, r.options, r.workspace,
                                           r.attention_out, r.softmax_lse);
    // One stream task installs every call's parameters, then sets every call's event.
    task_update_end(u, d.events);
  } catch (...) {
    abandon_update_on_error(d.update_stream);  // a failed call installs nothing
    rollback();
    throw;
  }
  d.undo.clear();
  d.updated.store(true);
}

}  // namespace

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
      .def_property_readonly("update_stream", [](const PyGraph& g) -> py::object {
        if (!g.dispatch) return py::none();
        return py::cast(g.dispatch->update_stream);
      });
}

}  // namespace npugraph::python
