// ExternalEvent: a binary signal that crosses the graph boundary (docs/semantics.md §2).
//
// record sets the signal, wait blocks the stream until it is set and then clears it (a wait consumes
// it), reset clears it. All three are stream-ordered tasks, and when captured they stay tasks that act
// on the live event at every replay. A record that finds the signal already set is a collapsed signal
// (the hang of the field): it is counted and reported. A wait blocked past the deadline is reported
// with the event and the graph task, and synchronize() on that stream throws instead of hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace npugraph {

class Stream;
namespace detail { struct ExternalEventState; }

class ExternalEvent {
 public:
  explicit ExternalEvent(std::string name = {});

  void record(const Stream& stream);
  void wait(const Stream& stream);
  void reset(const Stream& stream);

  const std::string& name() const;
  // Host-side view of the signal (for diagnostics and tests).
  bool is_set() const;
  // Records that found the signal already set.
  std::uint64_t collapsed_records() const;
  // How long a wait may block before it is reported (default: default_external_wait_deadline()).
  void set_wait_deadline(std::chrono::milliseconds deadline);
  std::chrono::milliseconds wait_deadline() const;

  const std::shared_ptr<detail::ExternalEventState>& impl() const { return state_; }

 private:
  std::shared_ptr<detail::ExternalEventState> state_;
};

// Records every event of `events`, in order, as one stream task (a capture records one task each):
// the same as calling record on each, at the cost of one enqueue (a decode step's graph-owned update
// records one event per attention call).
void record_events(std::span<const ExternalEvent> events, const Stream& stream);

void set_default_external_wait_deadline(std::chrono::milliseconds deadline);  // initially 10 s
std::chrono::milliseconds default_external_wait_deadline();

// Receives every runtime diagnostic (collapsed records, stalled waits); a null handler restores the
// default: lines to stderr, the first few of each kind, then at most one summary line every few
// seconds (a racing update loop may collapse records by the hundred thousand). Called on the stream
// worker that found the problem: keep it short, and never call back into npugraph from it.
using DiagnosticHandler = std::function<void(const std::string& message)>;
void set_diagnostic_handler(DiagnosticHandler handler);

// Collapsed records of every ExternalEvent so far (each event counts its own: collapsed_records()).
std::uint64_t total_collapsed_records();

}  // namespace npugraph
