// Task update: binding launches issued in update mode to the tasks of one or more groups.
#pragma once

#include <memory>
#include <vector>

#include "graph/exec_graph.hpp"
#include "npugraph/task_group.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

struct GroupRef;
struct GraphCore;

// One group being updated: the blank set its launches fill, in order.
struct UpdateTarget {
  std::shared_ptr<const GroupRef> ref;
  std::shared_ptr<GraphCore> core;  // checked at task_update_end: the graph may have been reset
  std::shared_ptr<ExecGraph> graph;
  std::uint32_t group = 0;
  SetRef set;
};

// A stream's update in progress (guarded by runtime_mutex()). Reused from update to update so that a
// steady-state update allocates nothing.
struct UpdateState {
  UpdateOrder order = UpdateOrder::stream;
  std::vector<UpdateTarget> targets;  // in binding order
  std::size_t at = 0;                 // the target the next launch binds to
  std::size_t bound = 0;              // launches bound to targets[at]
  std::size_t total = 0;              // launches bound in all
  void clear();                       // drops every reference (call it unlocked)
};

// A kernel launch issued on an updating stream (runtime_mutex() held). Throws, abandoning the
// update, unless it is the next kernel launch of the group(s).
void update_bind(StreamState& stream, const KernelDef& kernel, std::span<const std::byte> params);
// Any other task issued on an updating stream: abandons the update and throws.
void update_bind(StreamState& stream, Task&& task);
// Leaves update mode installing nothing and frees the handles (runtime_mutex() held).
void abandon_update(StreamState& stream);
// Abandons the update and throws StateError(message + "nothing was installed").
[[noreturn]] void fail_update(StreamState& stream, const std::string& message);

}  // namespace npugraph::detail
