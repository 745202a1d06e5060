#include "npugraph/external_event.hpp"

#include <atomic>
#include <vector>

#include "npugraph/error.hpp"
#include "npugraph/stream.hpp"
#include "npugraph/tasks.hpp"
#include "runtime/issue.hpp"
#include "runtime/stall.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/sync_objects.hpp"

namespace npugraph::detail {
namespace {

std::atomic<std::int64_t> g_default_deadline_ms{10000};
std::atomic<std::uint64_t> g_next_event{1};

std::chrono::milliseconds deadline_of(const ExternalEventState& e) {
  return std::chrono::milliseconds(e.deadline_ms >= 0 ? e.deadline_ms : g_default_deadline_ms.load());
}

}  // namespace

ExternalEventState::ExternalEventState(std::string n)
    : name(n.empty() ? "external_event_" + std::to_string(g_next_event.fetch_add(1)) : std::move(n)) {}

void external_record(ExternalEventState& e) {
  std::uint64_t collapsed = 0;
  {
    std::lock_guard lock(e.mu);
    if (e.signal) collapsed = ++e.collapsed;
    e.signal = true;
  }
  e.cv.notify_all();
  if (collapsed) {
    count_collapsed_record();
    diagnose(DiagnosticKind::collapsed_record, "ExternalEvent '" + e.name + "': record found the signal already set (collapsed signal #" +
             std::to_string(collapsed) +
             "): two records before one wait deliver one signal, so a second wait will block");
  }
}

bool external_wait(ExternalEventState& e, const WaitSite& site) {
  using clock = std::chrono::steady_clock;
  std::unique_lock lock(e.mu);
  if (e.signal) {
    e.signal = false;
    return true;
  }
  ++e.blocked;  // lowered on every return below, under e.mu
  const auto start = clock::now();
  const auto deadline = deadline_of(e);
  const auto key = reinterpret_cast<std::uintptr_t>(&start);  // unique while this wait runs
  std::atomic<bool> cancelled{false};  // set by a synchronize that reported the stall (Note [Stalls])
  bool reported = false;
  // Unregisters the stall (under e.mu: a canceller either set `cancelled` before, or finds no stall
  // and does not report one); returns whether it was cancelled.
  auto unregister = [&] { return reported && site.stream->remove_stall(key); };
  for (;;) {
    // A cancelled wait must not consume a signal recorded after the cancel: check it first.
    if (cancelled.load(std::memory_order_seq_cst)) {
      unregister();
      --e.blocked;
      return false;
    }
    if (e.signal) {
      --e.blocked;
      if (unregister()) return false;
      e.signal = false;
      return true;
    }
    if (runtime_exiting() || site.stream->closing.load()) {  // the stream is going away
      unregister();
      --e.blocked;
      lock.unlock();
      diagnose(DiagnosticKind::stall, site.stream->str() + " was destroyed while blocked in ExternalEvent '" +
                                          e.name + "' wait; the wait is abandoned");
      return false;
    }
    e.cv.wait_for(lock, std::chrono::milliseconds(10));
    // Compared in milliseconds: a deadline of milliseconds::max() must not overflow into the past.
    if (!reported && !e.signal &&
        std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start) >= deadline) {
      reported = true;
      std::string what = "ExternalEvent '" + e.name + "' wait";
      if (site.graph_id)
        what += " (graph " + std::to_string(site.graph_id) + ", task #" + std::to_string(site.node) + ")";
      site.stream->add_stall(key, Stall{what, start, deadline, next_stall_id(), &cancelled, &e.cv});
      lock.unlock();
      diagnose(DiagnosticKind::stall, site.stream->str() + " is blocked in " + what + " for more than " +
                                          std::to_string(deadline.count()) + " ms: no record has arrived");
      lock.lock();
    }
  }
}

void external_reset(ExternalEventState& e) {
  std::lock_guard lock(e.mu);
  e.signal = false;
}

}  // namespace npugraph::detail

namespace npugraph {

namespace {
void issue_external(const Stream& stream, detail::TaskKind kind,
                    const std::shared_ptr<detail::ExternalEventState>& e) {
  auto& s = detail::state_of(stream);
  if (!s.backend.caps().external_events) [[unlikely]]
    detail::require(s.backend, &detail::BackendCaps::external_events, "ExternalEvent");
  detail::Task task;
  task.kind = kind;
  task.object = e;
  detail::issue(s, std::move(task));
}
}  // namespace

ExternalEvent::ExternalEvent(std::string name)
    : state_(std::make_shared<detail::ExternalEventState>(std::move(name))) {}

void ExternalEvent::record(const Stream& stream) {
  issue_external(stream, detail::TaskKind::ext_record, state_);
}
void ExternalEvent::wait(const Stream& stream) {
  issue_external(stream, detail::TaskKind::ext_wait, state_);
}
void ExternalEvent::reset(const Stream& stream) {
  issue_external(stream, detail::TaskKind::ext_reset, state_);
}

void record_events(std::span<const ExternalEvent> events, const Stream& stream) {
  if (events.empty()) return;
  if (events.size() == 1 || stream.is_capturing() || stream.is_updating()) {
    for (ExternalEvent e : events) e.record(stream);  // a capture keeps one task per record
    return;
  }
  std::vector<std::shared_ptr<detail::ExternalEventState>> states;
  states.reserve(events.size());
  for (const ExternalEvent& e : events) states.push_back(e.impl());
  launch_host_func(stream, [states = std::move(states)] {
    for (const auto& s : states) detail::external_record(*s);
  });
}

const std::string& ExternalEvent::name() const { return state_->name; }

bool ExternalEvent::is_set() const {
  std::lock_guard lock(state_->mu);
  return state_->signal;
}

std::uint64_t ExternalEvent::collapsed_records() const {
  std::lock_guard lock(state_->mu);
  return state_->collapsed;
}

void ExternalEvent::set_wait_deadline(std::chrono::milliseconds deadline) {
  NG_CHECK_ARG(deadline.count() >= 0, "ExternalEvent::set_wait_deadline: deadline = ",
               deadline.count(), " ms: must be >= 0");
  std::lock_guard lock(state_->mu);
  state_->deadline_ms = deadline.count();
}

std::chrono::milliseconds ExternalEvent::wait_deadline() const {
  std::lock_guard lock(state_->mu);
  return detail::deadline_of(*state_);
}

void set_default_external_wait_deadline(std::chrono::milliseconds deadline) {
  NG_CHECK_ARG(deadline.count() >= 0, "set_default_external_wait_deadline: deadline = ",
               deadline.count(), " ms: must be >= 0");
  detail::g_default_deadline_ms.store(deadline.count());
}

std::chrono::milliseconds default_external_wait_deadline() {
  return std::chrono::milliseconds(detail::g_default_deadline_ms.load());
}

}  // namespace npugraph
