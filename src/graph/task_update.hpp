// Stream-ordered task update: binding launches issued in update mode to a group's tasks.
#pragma once

#include "runtime/stream_state.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

struct ExecGraph;

struct GroupRef;

struct UpdateState {
  std::shared_ptr<const GroupRef> ref;  // re-resolved at task_update_end: the graph may be reset
  std::shared_ptr<ExecGraph> graph;
  std::uint32_t group = 0;
  std::vector<ParamBytes> params;  // bound so far, in order
};

// A task issued on an updating stream (runtime_mutex() held). Throws, abandoning the update,
// unless it is the next kernel launch of the group.
void update_bind(StreamState& stream, Task&& task);
// Leaves update mode installing nothing and frees the handle (runtime_mutex() held).
void abandon_update(StreamState& stream);
// Abandons the update and throws StateError(message + "nothing was installed").
[[noreturn]] void fail_update(StreamState& stream, const std::string& message);

}  // namespace npugraph::detail
