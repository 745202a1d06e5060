// Graph-owned updates (Note [Recorded updates] in npugraph/recorded_updates.hpp).
#include "npugraph/recorded_updates.hpp"

#include <string>
#include <utility>

#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph {

namespace {

// Held from the wait on a graph's last replay to task_update_end (Note [One update stream]).
std::mutex& shared_update_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

RecordedUpdates::RecordedUpdates(const Graph& graph, Stream update_stream, UpdateOrdering ordering)
    : update_stream_(std::move(update_stream)), graph_id_(graph.id()), ordering_(ordering) {}

Stream RecordedUpdates::update_stream_for(Device device) {
  // Never destroyed: graphs alive at exit may still name it (their records hold a copy).
  static std::mutex mu;
  static auto* streams = new std::vector<std::pair<Device, Stream>>();
  std::lock_guard lock(mu);
  for (const auto& [d, s] : *streams)
    if (d == device) return s;
  streams->emplace_back(device, Stream::create(device));
  return streams->back().second;
}

RecordedCall* RecordedUpdates::record(const Stream& stream, std::string_view what,
                                      const std::function<std::unique_ptr<RecordedCall>(const Stream&)>& prepare) {
  std::lock_guard lock(mutex_);
  mark("recording a call into");
  NG_CHECK_STATE(!dead_, what, ": graph ", graph_id_, " was reset (g.reset()) during its auto-dispatch "
                 "capture, which ended it; the call is not recorded (capture the graph again)");
  if (!stream.is_capturing()) return nullptr;  // e.g. inside `with npugraph.npu.stream(other):`
  std::unique_ptr<RecordedCall> call = prepare(stream);
  std::optional<ExternalEvent> event;
  if (ordering_ == UpdateOrdering::events) {
    event.emplace("recorded " + std::string(what) + " call " + std::to_string(calls_.size()));
    event->wait(stream);
    event->reset(stream);
  }
  task_group_begin(stream);
  call->launch(stream);
  const TaskGroupHandle handle = task_group_end(stream);
  handles_.reserve(handles_.size() + 1);
  events_.reserve(events_.size() + 1);
  calls_.push_back(std::move(call));  // these grow together: nothing throws after this
  handles_.push_back(handle);
  if (event) events_.push_back(std::move(*event));
  count_.store(calls_.size());
  return calls_.back().get();
}

RecordedUpdates::Update::InFlight::InFlight(RecordedUpdates& r) : r_(r) {
  std::lock_guard lock(r_.in_flight_mutex_);
  ++r_.updates_in_flight_;
}

RecordedUpdates::Update::InFlight::~InFlight() {
  {
    std::lock_guard lock(r_.in_flight_mutex_);
    --r_.updates_in_flight_;
  }
  r_.in_flight_cv_.notify_all();
}

RecordedUpdates::Update::Update(RecordedUpdates& records, const Graph& graph, std::string_view what)
    : records_(records), in_flight_(records), lock_(records.mutex_, std::try_to_lock) {
  RecordedUpdates& r = records_;
  if (!lock_.owns_lock()) {
    const char* busy = r.busy_.load(std::memory_order_relaxed);
    NG_THROW(StateError, what, ": graph ", r.graph_id_, ": another thread is ", busy ? busy : "using",
             " it; one update of a graph runs at a time, so this one changed nothing (serialize the "
             "updates of a graph, or retry)");
  }
  r.mark("updating");
  NG_CHECK_STATE(!r.dead_, what, ": graph ", r.graph_id_, " was reset by another thread; capture it again "
                 "to update it");
  NG_CHECK_STATE(graph.state() == Graph::State::ready, what, ": graph ", r.graph_id_,
                 " is still being captured; update it after its capture ends");
  NG_CHECK_ARG(!r.calls_.empty(), what, ": graph ", r.graph_id_,
               " recorded no call during its capture: nothing to update");
}

RecordedUpdates::Update::~Update() {
  if (issued_) return;
  for (auto& c : records_.calls_) c->rollback();
}

void RecordedUpdates::Update::wait_for_replays() {
  if (!order_.owns_lock()) order_ = std::unique_lock(records_.order_);
}

void RecordedUpdates::Update::issue() {
  NG_CHECK_STATE(!issued_, "RecordedUpdates::Update::issue: this update was issued already; make a new "
                 "Update for the next one");
  wait_for_replays();
  RecordedUpdates& r = records_;
  const Stream& u = r.update_stream_;
  const bool events = r.ordering_ == UpdateOrdering::events;
  try {
    std::unique_lock<std::mutex> shared;  // Note [One update stream]
    if (events) shared = std::unique_lock(shared_update_mutex());
    try {
      if (events && r.last_replay_) u.wait(*r.last_replay_);  // Note [Updates after replays]
      StreamGuard on(u);
      task_update_begin(u, r.handles_);
      for (auto& c : r.calls_) c->reissue(u);
      // One stream task installs every call's parameters, then sets every call's event.
      task_update_end(u, r.events_);
    } catch (...) {
      abandon_update_on_error(u);  // before another update may take the stream
      throw;
    }
  } catch (...) {
    for (auto& c : r.calls_) c->rollback();
    issued_ = true;  // rolled back: the destructor has nothing left to undo
    throw;
  }
  for (auto& c : r.calls_) c->commit();
  issued_ = true;
  r.updated_.store(true);
}

bool RecordedUpdates::take_replay_mark(const Graph& graph) {
  if (count_.load() == 0) return false;
  if (updated_.exchange(false)) return true;
  if (graph.state() != Graph::State::ready) return false;  // replay() says what is wrong
  NG_THROW(StateError, "NPUGraph.replay: graph ", graph_id_, " was captured with auto_dispatch_capture=True "
           "and its ", count_.load(), " recorded call(s) wait for an update before every replay, but none "
           "was made since the capture or the last replay (the replay would block until the "
           "ExternalEvent deadline). Update it first: in Python g.update(cpu_update_input=[{}]) re-issues "
           "them with their current arguments (or pass new ones); in C++ a RecordedUpdates::Update");
}

void RecordedUpdates::wait_for_updates_in_flight() {
  if (updated_.load()) return;
  std::unique_lock lock(in_flight_mutex_);
  in_flight_cv_.wait(lock, [&] { return updates_in_flight_ == 0 || updated_.load(); });
}

void RecordedUpdates::replay(const Graph& graph, const Stream& stream) {
  if (ordering_ == UpdateOrdering::stream) {  // Note [Stream-ordered records]
    NG_CHECK_ARG(stream == update_stream_, "RecordedUpdates::replay: graph ", graph_id_, " on ", stream.str(),
                 ": its records are stream-ordered on ", update_stream_.str(), ", so it replays there (on "
                 "another stream nothing orders the replay after their updates)");
    graph.replay(stream);
    return;
  }
  wait_for_updates_in_flight();
  std::lock_guard order(order_);
  const bool marked = take_replay_mark(graph);
  try {
    graph.replay(stream);
  } catch (...) {
    if (marked) updated_.store(true);  // nothing was issued: the update still stands
    throw;
  }
  if (!stream.is_capturing()) {
    if (!last_replay_) last_replay_.emplace();
    last_replay_->record(stream);
  }
}

void RecordedUpdates::reset(Graph& graph) {
  std::lock_guard lock(mutex_);  // waits for an update or a recorded call in flight
  mark("resetting");
  dead_ = true;
  graph.reset();
}

}  // namespace npugraph
