// Graph-owned updates (torch_npu's auto_dispatch_capture and NPUGraph.update) as one C++ component:
// calls recorded while a graph is captured, each into its own task group behind its own
// ExternalEvent, and re-issued before every replay by an update that may change their arguments. The
// Python bindings' NPUGraph.update and the FIA record (npugraph/ops/fia_record.hpp) are built on it.
//
// Note [Recorded updates]
// A recorded call is captured as torch_npu captures it: ExternalEvent wait + reset, then its own task
// group holding its launches. An update applies new arguments to every recorded call (each call
// stages its own change; RecordedCall), re-issues all of them in one batched, stream-ordered update on
// the update stream, and records each call's event after it — so the next replay waits for the new
// parameters, as in the seed example. Every replay needs an update before it (a replay consumes the
// events): a replay with recorded calls and no successful update since the capture or the last
// replay would wait for events nobody records (until the ExternalEvent deadline), so it is refused at
// once with a StateError. That is one flag per graph: a successful update sets it, a replay clears it.
// Staged changes persist once issued: a later update changes only what it stages. If a change or the
// re-issue fails, nothing is installed and every staged change is rolled back.
//
// Note [Updates after replays]
// An update records each call's ExternalEvent; a replay's waits consume them. If an update's records
// could land while the previous replay still waits, a record would collapse into the unconsumed
// signal of the same event, the replay would consume it, and the next replay (allowed: an update was
// made) would wait forever for that event (seen with asynchronous replays and with updater threads
// racing a replaying one). So an update's re-issue waits, on the update stream, for an Event recorded
// after the last replay's launch: its parameters and records come after that replay has run (which is
// also what a stream-ordered update must not overtake). A replay that finds no update mark while
// another thread's update is in flight waits for that update to end and then consumes its mark, as the
// device's replay would wait for its records; it is refused only when no update was made and none is
// in flight. The `order` mutex makes "take the update mark, launch, record last_replay" and "wait on
// last_replay ... record the events" atomic with respect to each other, so a replay launched during an
// update belongs to the update before it. Two updates with no replay between collapse their records
// harmlessly (the next replay waits once per event and the mark is a flag).
//
// Threads: share the records with std::shared_ptr between the graph's owner, the capture recording
// into them and every update in flight, so a reset on one thread never frees what another one uses.
// One mutex orders who touches the calls: an update try-locks it (the loser gets a StateError naming
// the graph and what the other holder does, and changes nothing: two updates of one graph never
// interleave), a recorded call and reset() lock it. Nothing here calls back into a caller while
// holding a lock except RecordedCall's own functions and record()'s `issue`.
// For callers that hold a lock of their own (Python's GIL): RecordedUpdates::Update's constructor
// never blocks; wait_for_replays(), issue(), replay(), record() and reset() may, so release it around
// them.
//
// Note [Stream-ordered records]
// UpdateOrdering::stream is the variant for one thread that updates and replays on one stream (the
// decode engine's update_then_replay step): the calls wait on no ExternalEvent, an update is issued
// on that stream itself (the records' update stream is the replay stream), so its patch lands in the
// stream's order before every replay launched after it, and a replay needs no update before it (it
// runs with the parameters last installed). Without host-visible events a CUDA graph stays one
// graph launch (Note [CUDA graphs from the node table]). A replay on another stream is refused:
// nothing would order it after the update.
//
// Note [One update stream]
// As in torch_npu master, every graph's update issues on one update stream per device
// (update_stream_for; Python: graph_dispatch_mode.update_stream). Updates of different graphs from
// different threads then share a stream that can be in update mode for one of them at a time: a
// process-wide mutex is held from the wait on the graph's last replay to task_update_end, so no other
// update's tasks interleave with them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "npugraph/event.hpp"
#include "npugraph/external_event.hpp"
#include "npugraph/graph.hpp"
#include "npugraph/stream.hpp"
#include "npugraph/task_group.hpp"

namespace npugraph {

// One call recorded into its own task group. An update stages a change into it (a subclass's own
// functions), then re-issues it; commit() keeps the staged change, rollback() undoes it. Both end
// the update's staging: the next update starts clean.
class RecordedCall {
 public:
  virtual ~RecordedCall() = default;
  // Launches the call on `stream`, which captures it into the call's group (RecordedUpdates::record).
  virtual void launch(const Stream& stream) = 0;
  // Re-issues the call's launches on `update_stream`, which is in update mode for its group.
  virtual void reissue(const Stream& update_stream) = 0;
  virtual void commit() noexcept {}
  virtual void rollback() noexcept {}
};

// How an update reaches the replays: through each call's ExternalEvent (torch_npu's protocol, the
// default), or in the order of one stream (Note [Stream-ordered records]).
enum class UpdateOrdering : std::uint8_t { events, stream };

class RecordedUpdates {
 public:
  // Records for `graph` (its id names it in errors), updated on `update_stream`: with events
  // normally update_stream_for(the capture's device) (Note [One update stream]); with stream
  // ordering the stream the graph replays on.
  RecordedUpdates(const Graph& graph, Stream update_stream, UpdateOrdering ordering = UpdateOrdering::events);
  RecordedUpdates(const RecordedUpdates&) = delete;
  RecordedUpdates& operator=(const RecordedUpdates&) = delete;

  // Records one call on `stream` when it is capturing: prepare(stream) makes the call (its checks
  // and buffers: when it throws, nothing was captured), then (with events) a new ExternalEvent is
  // waited on and reset on the stream, and the call launched into its own task group. Returns the call, or null
  // when `stream` does not capture (the caller then runs the call eagerly). `prepare` runs with the
  // records' lock held: state kept per graph (a shared workspace) is safe to touch there. Throws
  // StateError, naming `what`, after reset().
  RecordedCall* record(const Stream& stream, std::string_view what,
                       const std::function<std::unique_ptr<RecordedCall>(const Stream&)>& prepare);

  // One update in flight: stage changes into call(i), then issue(). Destroyed without a successful
  // issue(), it rolls back every staged change.
  class Update {
   public:
    // Never blocks. Throws StateError when another update or a recording of this graph is in
    // progress (naming what it does), when the graph was reset or is still capturing, and
    // ArgumentError when nothing was recorded. `what` names the caller in errors ("NPUGraph.update").
    Update(RecordedUpdates& records, const Graph& graph, std::string_view what);
    Update(const Update&) = delete;
    Update& operator=(const Update&) = delete;
    ~Update();

    // Waits until no replay is between taking its update mark and recording its launch (Note
    // [Updates after replays]). Call before issue(); may block.
    void wait_for_replays();
    std::size_t size() const { return records_.calls_.size(); }
    RecordedCall& call(std::size_t i) { return *records_.calls_[i]; }
    // Re-issues every call (their staged changes included) in one batched update on the update
    // stream — with events after the last replay has run, recording each call's event after it;
    // with stream ordering in that stream's order. On any error nothing is installed, every staged
    // change is rolled back, and the error propagates.
    void issue();

   private:
    // Counts the update in updates_in_flight_ for its whole life (a replay waits for it).
    struct InFlight {
      explicit InFlight(RecordedUpdates& r);
      InFlight(const InFlight&) = delete;
      InFlight& operator=(const InFlight&) = delete;
      ~InFlight();
      RecordedUpdates& r_;
    };
    RecordedUpdates& records_;
    InFlight in_flight_;
    std::unique_lock<std::mutex> lock_, order_;
    bool issued_ = false;
  };

  // Replays `graph` on `stream` (Note [Updates after replays]): waits for an update in flight when no
  // update mark is set, consumes the mark, launches, and records the replay for the next update.
  // Throws StateError when calls were recorded and no update was made since the last replay. With
  // stream ordering it only launches, on the update stream (ArgumentError for another stream).
  void replay(const Graph& graph, const Stream& stream);
  // g.reset() once no update or recording of these records is in flight; later records and updates
  // are refused.
  void reset(Graph& graph);

  std::size_t size() const { return count_.load(); }  // recorded calls; readable any time
  std::uint64_t graph_id() const { return graph_id_; }
  const Stream& update_stream() const { return update_stream_; }

  // The device's one update stream (Note [One update stream]); never destroyed.
  static Stream update_stream_for(Device device);

 private:
  void mark(const char* what) { busy_.store(what, std::memory_order_relaxed); }
  bool take_replay_mark(const Graph& graph);
  void wait_for_updates_in_flight();

  std::vector<std::unique_ptr<RecordedCall>> calls_;
  std::vector<TaskGroupHandle> handles_;  // the calls' groups, in order
  std::vector<ExternalEvent> events_;     // the calls' events, in order
  Stream update_stream_;
  std::uint64_t graph_id_;
  UpdateOrdering ordering_;
  std::mutex mutex_;                       // held by an update, a recording, reset
  std::mutex order_;                       // Note [Updates after replays]
  std::optional<Event> last_replay_;       // recorded after each replay's launch (under order_)
  std::atomic<const char*> busy_{nullptr};  // what the last holder of mutex_ did ("updating", ...)
  bool dead_ = false;                      // reset (under mutex_)
  std::atomic<bool> updated_{false};       // a successful update since the capture / last replay
  int updates_in_flight_ = 0;              // Update objects alive (under in_flight_mutex_)
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_cv_;
  std::atomic<std::size_t> count_{0};      // calls_.size()
};

}  // namespace npugraph
