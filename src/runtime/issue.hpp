// Issuing a task on a stream: enqueued, recorded (capture) or bound (update) by the stream's mode.
#pragma once

#include "runtime/stream_state.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

void issue(StreamState& stream, Task&& task);

}  // namespace npugraph::detail
