// What a stream's worker is blocked on right now, read from the runtime's own state (Note [Tests
// without time], support/wait.hpp): a test waits until a stream is provably held in a wait, then
// asserts that the work behind it has not run, instead of sleeping and hoping it got there.
#pragma once

#include <mutex>

#include "npugraph/external_event.hpp"
#include "npugraph/stream.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/sync_objects.hpp"

namespace ngtest {

// How many waits are blocked on `event`'s signal now (ExternalEventState::blocked).
inline int blocked_waits(const npugraph::ExternalEvent& event) {
  auto& e = *event.impl();
  std::lock_guard lock(e.mu);
  return e.blocked;
}

// Whether `waiter`'s worker is blocked waiting for `other`: for an Event recorded on it, or for its
// turn to replay a graph whose earlier launch is on it (StreamState::blocked_on).
inline bool blocked_on(const npugraph::Stream& waiter, const npugraph::Stream& other) {
  return npugraph::detail::state_of(waiter).blocked_on() == other.impl();
}

// Whether a host thread is inside a synchronize of `stream` now (Stream::synchronize,
// device_synchronize: StreamState::synchronizing).
inline bool synchronizing(const npugraph::Stream& stream) {
  return npugraph::detail::state_of(stream).synchronizing.load() > 0;
}

}  // namespace ngtest
