// Stalled waits and how a synchronize finds and cancels them.
//
// Note [Stalls]
// A blocking wait on a stream worker (an ExternalEvent wait) that passes its deadline registers a
// Stall on its stream and reports it once (a diagnostic); the wait goes on, and a late record still
// releases it. A synchronize that depends on the stalled stream — its own stream, or a stream blocked
// on it through an Event wait or a graph's launch order (blocked_on edges, followed transitively) —
// throws TimeoutError naming the ExternalEvent and the stalled stream, and cancels the stall: the
// wait gives up without consuming a signal, the rest of the replay it belongs to is skipped (the
// graph and its parameters are untouched) and the stream goes on with the work queued after it. So
// after the error, the next correct step (update, record, replay) gives the right result.
// The error reaches every stream whose work depended on the cancelled wait, once per stream: the
// stalled stream's own next synchronize (when another stream's synchronize cancelled it), and streams
// that wait on Events recorded on it before the cancel — those records carry the error (a Poison)
// to their waiters. Work issued on the stalled stream after the cancel is not affected.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace npugraph::detail {

// start + d without overflow: a duration past the clock's range gives time_point::max() (a deadline
// of milliseconds::max() means "never", not a wrapped-around instant in the past).
inline std::chrono::steady_clock::time_point saturating_deadline(
    std::chrono::steady_clock::time_point start, std::chrono::milliseconds d) {
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::time_point::max() - start);
  return d >= room ? std::chrono::steady_clock::time_point::max()
                   : start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
}

struct StreamState;

std::uint64_t next_stall_id();

// Throws TimeoutError when `start`, or a stream it is blocked on, is stalled past a deadline, and
// cancels that stall. `reporter` is the stream whose synchronize asks (null for an event's
// synchronize); `who` names the call ("cpu stream 2: synchronize").
void raise_if_stalled(StreamState& start, StreamState* reporter, const std::string& who);

}  // namespace npugraph::detail
