// Issuing a task on a stream: enqueued, recorded (capture) or bound (update) by the stream's mode.
#pragma once

#include "runtime/stream_state.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

void issue(StreamState& stream, Task&& task);
// The same with runtime_mutex() held by the caller (a RuntimeLock): recorded, bound or enqueued.
void issue_locked(StreamState& stream, Task&& task);

}  // namespace npugraph::detail
