// Graph-owned updates (torch_npu's auto_dispatch_capture): the NPUGraph Python object, the FIA calls
// recorded while it was captured, and their re-issue by NPUGraph.update().
//
// Note [Auto-dispatch capture]
// Inside `with npugraph.npu.graph(g, auto_dispatch_capture=True):` each eager FIA call is recorded:
// captured into its own task group behind an ExternalEvent, with a max-size workspace shared by the
// stream's calls and outputs allocated in the graph's pool (Note [FIA record] in
// npugraph/ops/fia_record.hpp). g.update(cpu_update_input=[{...}, ...]) applies one dict of keyword
// arguments per record (or one dict to all) and re-issues every recorded call in one batched,
// stream-ordered update; every replay needs an update before it. The protocol — records, updates
// with rollback, the order of updates after replays, one update stream, threads — is C++'s
// (Note [Recorded updates] and Note [Updates after replays] in npugraph/recorded_updates.hpp). This
// layer keeps only what is Python's: the keyword names of the update dicts (fia_keywords.cpp) and
// the GIL, released around every call of the protocol that may block (its holder may need the GIL to
// finish); RecordedUpdates::Update's constructor never blocks, so it runs with the GIL held.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "bindings.hpp"
#include "npugraph/npugraph.hpp"
#include "npugraph/ops/fia_record.hpp"
#include "npugraph/recorded_updates.hpp"

namespace npugraph::python {

using ops::FieldSwap;

// Which op a call was made with, whose keyword names its update dicts use:
// npu_fused_infer_attention_score's, npu_fused_infer_attention_score_v2's, or _npu_paged_attention's
// (context_lens; its calls are parsed with v1's names) (fia_keywords.cpp). A recorded FiaCall's tag.
enum class FiaNames : unsigned char { v1, v2, paged };

// One graph's records: the protocol's, and the FIA recorder's shared workspaces.
struct DispatchRecords {
  DispatchRecords(const Graph& graph, Stream update_stream) : updates(graph, std::move(update_stream)) {}
  RecordedUpdates updates;
  ops::FiaRecorder fia;
};

// The NPUGraph Python object: the graph plus its auto-dispatch records.
struct PyGraph {
  Graph graph;
  bool auto_dispatch_capture = false;
  bool keep_graph = false;                    // NPUGraph(keep_graph=...), recorded only
  std::shared_ptr<DispatchRecords> dispatch;  // set by an auto-dispatch capture
};

// The records of the auto-dispatch capture running on this thread (null when none).
std::shared_ptr<DispatchRecords>& active_dispatch();

// Frees the graph (g.reset()) once no update or recorded call of its records is in flight.
void reset_graph(PyGraph& g);

// Whether NPUGraph.replay() waits for the replay when `blocking` is not given: true, except under
// the torch_npu shim (npugraph.compat.install sets it false; Note [Blocking replays from Python]).
bool replay_blocks_by_default();
void set_replay_blocks_by_default(bool blocking);

// fia.cpp: NPUGraph.update's FIA part, with the GIL held: applies cpu_update_input (one dict of FIA
// keyword arguments per record, or one for all) to the update's calls (each value parsed and swapped
// into the recorded options, no copies). On any error (a bad key or value: TypeError / ValueError; a
// value that changes what the captured task cannot change: ArgumentError "not updatable") the
// update, destroyed unissued, restores every recorded argument.
void stage_fia_updates(RecordedUpdates::Update& u, py::handle cpu_update_input);

void bind_dispatch(py::class_<PyGraph>& graph_class);

}  // namespace npugraph::python
