// Graph-owned updates (torch_npu's auto_dispatch_capture): the NPUGraph Python object, the FIA calls
// recorded while it was captured, and their re-issue by NPUGraph.update().
//
// Note [Auto-dispatch capture]
// Inside `with npugraph.npu.graph(g, auto_dispatch_capture=True):` each eager FIA call is captured as
// torch_npu captures it: ExternalEvent wait + reset, then its own task group holding the `.out` form
// with a max-size workspace and outputs allocated in the graph's pool; the call (tensors and options)
// is recorded. Calls captured on one stream share a workspace (the largest they need): the capture
// orders them, so they never run at once, and a decode step's 80 calls touch one workspace, not 80. g.update(cpu_update_input=[{...}, ...]) applies one dict of keyword arguments per
// record (or one dict to all), re-issues every recorded call in one batched, stream-ordered update on
// the graph's update stream, and records each call's event after it — so the next replay waits for
// the new parameters, as in the seed example. Every replay needs an update before it (the events are
// reset by the replay): a replay with recorded calls and no successful update since the capture or
// the last replay would wait for events nobody records (until the ExternalEvent deadline), so it is
// refused at once with a StateError that says to call g.update(cpu_update_input=[{}]) (which
// re-issues every call with its current arguments). That is tracked per graph: a successful update
// sets DispatchRecords::updated, a replay clears it. The new arguments persist: a later update changes
// only the keys it names. If any call fails its checks, nothing is installed and the recorded
// arguments stay as they were. Only the values the op re-plans are updatable (Update rules in
// npugraph/ops/fia.hpp); a dict that changes another one is refused as "not updatable".
//
// Note [Updates after replays]
// An update records each call's ExternalEvent; a replay's waits consume them. If an update's records
// could land while the previous replay still waits, a record would collapse into the unconsumed
// signal of the same event, the replay would consume it, and the next replay (allowed: an update was
// made) would wait forever for that event (seen with g.replay(blocking=False) and with updater
// threads racing a replaying one). So an update's re-issue waits, on the update stream, for an Event
// recorded after the last replay's launch: its parameters and records come after that replay has run
// (which is also what a stream-ordered update must not overtake). A replay that finds no update
// mark while another thread's g.update is in flight (DispatchRecords::updates_in_flight) waits for
// that update to end and then consumes its mark, as the device's replay would wait for its records;
// it is refused only when no update was made and none is in flight. DispatchRecords::order makes
// "take the update mark, launch, record last_replay" and "wait on last_replay ... record the events"
// atomic with respect to each other, so a replay launched during an update belongs to the update
// before it. Two updates with no replay between collapse their records harmlessly (the next replay
// waits once per event and the mark is a flag).
//
// Threads: the records are shared (std::shared_ptr) by the graph, the capture recording into them
// (active_dispatch()) and every update in flight, so g.reset() on one thread never frees what another
// one uses. DispatchRecords::mutex orders who touches them: an update try-locks it (the loser gets a
// StateError naming the graph and changes nothing: two updates of one graph never interleave their
// parsing and re-issue), a recorded call and reset() lock it with the GIL released. Nobody blocks on
// it while holding the GIL (the holder may need the GIL to finish).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {

// Swaps one field of two FiaOptions (swapping again restores both).
using FieldSwap = void (*)(ops::FiaOptions&, ops::FiaOptions&);

// Which op a call was made with, whose keyword names its update dicts use:
// npu_fused_infer_attention_score's, npu_fused_infer_attention_score_v2's, or _npu_paged_attention's
// (context_lens; its calls are parsed with v1's names) (fia_keywords.cpp).
enum class FiaNames : unsigned char { v1, v2, paged };

struct FiaRecord {
  Tensor query, key, value;
  ops::FiaOptions options;
  Tensor workspace, attention_out, softmax_lse;
  TaskGroupHandle handle;
  ExternalEvent event;
  // Its tensors and static options are still the captured call's (no update has set a tensor or a
  // static option): an update then re-issues it with its host values only (Note [FIA host-value
  // update] in src/ops/attention/fia_plan.hpp), never comparing the ~25 tensors.
  bool captured_inputs = true;
  FiaNames names = FiaNames::v1;
};

// The caller's buffers of a `.out` call: the outputs, and the workspace when one was given.
struct FiaOutArgs {
  Tensor workspace;  // undefined: the graph's shared workspace
  Tensor attention_out, softmax_lse;
};

struct DispatchRecords {
  explicit DispatchRecords(Stream update) : update_stream(std::move(update)) {}
  std::vector<FiaRecord> records;
  std::vector<TaskGroupHandle> handles;   // the records' handles, in order
  std::vector<ExternalEvent> events;      // the records' events, in order
  std::vector<std::pair<std::uint64_t, Tensor>> workspaces;  // per capture stream id
  std::vector<ops::FiaOptions> staging;   // per record: parsed values / the old ones after a swap
  std::vector<std::pair<std::size_t, FieldSwap>> undo;  // (record, swap) of the update in progress
  std::vector<FieldSwap> swaps;                         // one record's, while it is parsed
  std::vector<char> host_only;  // per record, during an update: its dict set host values only
  Stream update_stream;
  std::uint64_t graph_id = 0;
  std::mutex mutex;                       // see the Note: held by an update, a recorded call, reset
  // Orders updates after replays (Note [Updates after replays]): held by an update from its wait
  // on last_replay to its last record, and by a replay from taking the update mark to recording
  // last_replay. Both lock it with the GIL released.
  std::mutex order;
  std::optional<Event> last_replay;        // recorded after each replay's launch (under `order`)
  std::atomic<const char*> busy{nullptr};  // what the last holder of `mutex` did ("updating", ...)
  bool dead = false;                       // the graph was reset (under mutex)
  std::atomic<bool> updated{false};        // a successful update since the capture / last replay
  // g.update calls inside update_graph (waiting for the mutex included); a replay that finds no
  // update mark waits for them on `in_flight_cv` (Note [Updates after replays]).
  int updates_in_flight = 0;               // under in_flight_mutex
  std::mutex in_flight_mutex;
  std::condition_variable in_flight_cv;
  std::atomic<std::size_t> count{0};       // records.size(), readable without the mutex
};

// Says what the holder of d.mutex does, for the StateError of an update that finds it taken. Set
// after each lock and never cleared, so a loser never reads an empty value.
void mark_busy(DispatchRecords& d, const char* what);

// The NPUGraph Python object: the graph plus its auto-dispatch records.
struct PyGraph {
  Graph graph;
  bool auto_dispatch_capture = false;
  bool keep_graph = false;                    // NPUGraph(keep_graph=...), recorded only
  std::shared_ptr<DispatchRecords> dispatch;  // set by an auto-dispatch capture
};

// Note [One update stream]
// As in torch_npu master, every graph's g.update() issues on one update stream per device
// (graph_dispatch_mode.update_stream; npugraph.npu._graph_update_stream()). Updates of different
// graphs from different threads then share a stream that can be in update mode for one of them at a
// time: shared_update_mutex() is held (with the GIL released) from the wait on the graph's last
// replay to task_update_end, so no other update's tasks interleave with them.
std::mutex& shared_update_mutex();
Stream shared_update_stream(Device device);

// The records of the auto-dispatch capture running on this thread (null when none).
std::shared_ptr<DispatchRecords>& active_dispatch();

// fia.cpp: captures one eager FIA call into its own group and records it (planned once: the
// workspace, the outputs and the launch all come from one ops::FiaPlan); returns (attention_out,
// lse), or nothing when the current stream no longer captures (then the call runs eagerly). A
// `.out` call passes its buffers (`given`): it writes them, on every replay and update. Locks
// d.mutex: call it with the GIL released.
std::optional<std::pair<Tensor, Tensor>> record_fia(DispatchRecords& d, const Tensor& query,
                                                    const Tensor& key, const Tensor& value,
                                                    const ops::FiaOptions& options, FiaNames names,
                                                    const FiaOutArgs* given = nullptr);

// Frees the graph (g.reset()) once no update or recorded call of its records is in flight.
void reset_graph(PyGraph& g);
// Refuses a replay of an auto-dispatch graph that waits for an update nobody made (see the Note);
// returns whether it consumed an update mark (to restore if the replay is not issued). d is
// g.dispatch when g is an auto-dispatch graph, else null; called with d->order held.
bool take_replay_mark(const PyGraph& g, DispatchRecords* d);
// Before a replay of an auto-dispatch graph takes d.order: when no update mark is set and another
// thread's g.update is in flight, waits (GIL released) until it ends, so the replay consumes that
// update instead of being refused (Note [Updates after replays]).
void wait_for_updates_in_flight(DispatchRecords& d);

// Whether NPUGraph.replay() waits for the replay when `blocking` is not given: true, except under
// the torch_npu shim (npugraph.compat.install sets it false; Note [Blocking replays from Python]).
bool replay_blocks_by_default();
void set_replay_blocks_by_default(bool blocking);

// fia.cpp: NPUGraph.update's FIA part, with d.mutex held and the GIL held: applies
// cpu_update_input (one dict of FIA keyword arguments per record, or one for all) to the records'
// options, and re-issues every recorded call in one batched, stream-ordered update on
// d.update_stream (the GIL released), recording each call's event after it. Each value is parsed
// and swapped into the recorded options (no copies); on any error (a bad key or value: TypeError /
// ValueError; a value that changes what the captured task cannot change: ArgumentError "not
// updatable"; a failed re-issue) nothing is installed and every recorded argument is restored.
void update_fia_records(DispatchRecords& d, py::handle cpu_update_input);

void bind_dispatch(py::class_<PyGraph>& graph_class);

}  // namespace npugraph::python
