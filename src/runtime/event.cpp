#include "npugraph/event.hpp"

#include <algorithm>

#include "npugraph/error.hpp"
#include "npugraph/stream.hpp"
#include "runtime/issue.hpp"
#include "runtime/stall.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/sync_objects.hpp"

namespace npugraph::detail {

void event_complete(EventState& event, std::uint64_t seq, StreamState& stream) {
  auto poison = stream.poison_for_current();
  {
    std::lock_guard lock(event.mu);
    if (seq > event.completed) {
      event.completed = seq;
      event.completed_at = std::chrono::steady_clock::now();
    }
    std::erase_if(event.pending, [&](const auto& p) { return p.first <= event.completed; });
    if (poison) {
      if (event.poisoned.size() >= 8) event.poisoned.erase(event.poisoned.begin());
      event.poisoned.push_back({seq, poison->stall_id, std::move(poison->message)});
    }
  }
  event.cv.notify_all();
}

void event_block(EventState& event, std::uint64_t seq, StreamState& stream) {
  std::unique_lock lock(event.mu);
  if (event.completed < seq) {
    std::weak_ptr<StreamState> recorder = event.recorder;
    for (const auto& [pending_seq, stream_of] : event.pending)
      if (pending_seq == seq) recorder = stream_of;  // the stream whose record this wait needs
    lock.unlock();
    stream.set_blocked_on(recorder);  // a synchronize of this stream looks for a stall there
    lock.lock();
    while (event.completed < seq) {
      if (runtime_exiting() || stream.closing.load()) break;  // the stream is going away: give up
      event.cv.wait_for(lock, std::chrono::milliseconds(20));
    }
    lock.unlock();
    stream.clear_blocked_on();
    lock.lock();
  }
  for (const auto& p : event.poisoned)
    if (p.seq == seq) stream.report_timeout(p.stall_id, stream.str() + ": " + p.message);
}

}  // namespace npugraph::detail

namespace npugraph {

using detail::EventState;
using detail::StreamMode;

Event::Event(EventOptions options) : state_(std::make_shared<EventState>(options.enable_timing)) {}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  auto& s = detail::state_of(stream);
  if (state_->timing) detail::require(s.backend, &detail::BackendCaps::event_timing, "Event::record (timing)");
  detail::Task task;
  task.kind = detail::TaskKind::event_record;
  task.object = state_;
  if (s.mode.load(std::memory_order_acquire) != StreamMode::normal) {
    detail::RuntimeLock lock;
    switch (s.mode.load()) {
      case StreamMode::capturing: s.capture->event_record(s, *state_); return;
      case StreamMode::updating: detail::issue_locked(s, std::move(task)); return;  // throws
      case StreamMode::normal: break;
    }
  }
  std::uint64_t seq;
  {
    std::lock_guard lock(state_->mu);
    seq = ++state_->recorded;
    state_->captured = false;
    state_->capture.reset();
    state_->captured_nodes.clear();
    state_->recorder = stream.impl();
    state_->pending.emplace_back(seq, stream.impl());
  }
  task.value = seq;
  try {
    detail::issue(s, std::move(task));
  } catch (...) {  // not issued: the event must not wait for it
    std::lock_guard lock(state_->mu);
    if (state_->recorded == seq) --state_->recorded;
    std::erase_if(state_->pending, [&](const auto& p) { return p.first == seq; });
    throw;
  }
}

void Event::wait(const Stream& stream) const {
  auto& s = detail::state_of(stream);
  std::shared_ptr<detail::CaptureLink> capture;
  std::vector<std::uint32_t> nodes;
  std::uint64_t seq;
  bool captured;
  {
    std::lock_guard lock(state_->mu);
    captured = state_->captured;
    if (captured) {
      capture = state_->capture.lock();
      nodes = state_->captured_nodes;
    }
    seq = state_->recorded;
    // Already reached, with no stall to pass on: nothing to wait for, and no task to wake the
    // stream's worker for (an update after a finished replay waits on it: Python's NPUGraph.update).
    if (!captured && seq <= state_->completed && s.mode.load() == StreamMode::normal &&
        std::none_of(state_->poisoned.begin(), state_->poisoned.end(),
                     [&](const auto& p) { return p.seq == seq; }))
      return;
  }
  detail::Task task;
  task.kind = detail::TaskKind::event_wait;
  task.object = state_;
  task.value = seq;
  if (s.mode.load() == StreamMode::updating) {  // not a kernel launch: fails the update
    detail::RuntimeLock lock;
    detail::issue_locked(s, std::move(task));
  }
  if (captured) {
    detail::RuntimeLock lock;
    NG_CHECK_STATE(detail::capture_active(capture.get()), "Stream::wait(event) on ", s.str(),
                   ": the event was last recorded inside a capture that has ended; record it again");
    capture->event_wait(stream.impl(), nodes);
    return;
  }
  if (s.mode.load() == StreamMode::capturing)
    NG_THROW(StateError, "Stream::wait(event) on ", s.str(),
             ": the stream is capturing and the event was recorded outside the capture; record it "
             "before capture_begin and wait on it there, or use an ExternalEvent for signals that "
             "cross the graph boundary");
  if (seq == 0) return;  // never recorded: nothing to wait for
  detail::issue(s, std::move(task));
}

bool Event::query() const {
  detail::check_sync_call("Event::query", nullptr);
  std::lock_guard lock(state_->mu);
  return state_->completed >= state_->recorded;
}

void Event::synchronize() const {
  detail::check_sync_call("Event::synchronize", nullptr);
  std::unique_lock lock(state_->mu);
  const std::uint64_t target = state_->recorded;
  while (state_->completed < target) {
    if (detail::runtime_exiting()) return;
    state_->cv.wait_for(lock, std::chrono::milliseconds(20));
    if (state_->completed >= target) break;
    // A recorder stuck in an ExternalEvent wait past its deadline would make this wait forever.
    if (auto recorder = state_->recorder.lock()) {
      lock.unlock();
      detail::raise_if_stalled(*recorder, nullptr, "Event::synchronize");
      lock.lock();
    }
  }
}

float Event::elapsed_time(const Event& end) const {
  NG_CHECK_ARG(state_->timing && end.state_->timing,
               "Event::elapsed_time: both events need EventOptions{.enable_timing = true}");
  std::chrono::steady_clock::time_point a, b;
  {
    std::lock_guard lock(state_->mu);
    NG_CHECK_STATE(state_->recorded > 0 && state_->completed >= state_->recorded,
                   "Event::elapsed_time: the start event has not been recorded or has not run yet "
                   "(synchronize it first)");
    a = state_->completed_at;
  }
  {
    std::lock_guard lock(end.state_->mu);
    NG_CHECK_STATE(end.state_->recorded > 0 && end.state_->completed >= end.state_->recorded,
                   "Event::elapsed_time: the end event has not been recorded or has not run yet "
                   "(synchronize it first)");
    b = end.state_->completed_at;
  }
  return std::chrono::duration<float, std::milli>(b - a).count();
}

void Stream::wait(const Event& event) const { event.wait(*this); }

}  // namespace npugraph
