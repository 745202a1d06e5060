// Events: markers in a stream's work, for ordering streams and timing (docs/semantics.md §1).
//
// Inside a capture, record/wait do not run: they become dependency edges between captured tasks
// (and a stream that waits on an event recorded by a capturing stream joins the capture).
#pragma once

#include <memory>

namespace npugraph {

class Stream;
namespace detail { struct EventState; }

struct EventOptions {
  bool enable_timing = false;
};

class Event {
 public:
  explicit Event(EventOptions options = {});

  // Marks the current end of `stream`'s work (default: the current stream).
  void record();
  void record(const Stream& stream);
  // Makes `stream` wait for the most recent record (stream.wait(event)).
  void wait(const Stream& stream) const;
  // True when the most recent record has run (or there was none).
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event's record to `end`'s. Both need enable_timing and must have run.
  float elapsed_time(const Event& end) const;

  const std::shared_ptr<detail::EventState>& impl() const { return state_; }

 private:
  std::shared_ptr<detail::EventState> state_;
};

}  // namespace npugraph
