// Task update: binding launches issued in update mode to the tasks of one or more groups.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/exec_graph.hpp"
#include "npugraph/task_group.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

struct GroupRef;
struct GraphCore;

// One group being updated: the blank set its launches fill, in order. Its graph is kept alive by
// UpdateState::holds.
struct UpdateTarget {
  ExecGraph* graph = nullptr;
  GraphCore* core = nullptr;       // checked at task_update_end: the graph may have been reset
  std::uint64_t generation = 0;    // the handle's
  std::uint32_t group = 0;
  SetRef set;
};

// A stream's update in progress (Note [Stream modes]; guarded by runtime_mutex(), bound by its
// owner thread). Reused from update to update so that a steady-state update allocates nothing.
struct UpdateState final : UpdateLink {
  UpdateOrder order = UpdateOrder::stream;
  std::vector<UpdateTarget> targets;  // in binding order
  // One strong reference per graph of the targets (consecutive targets of one graph share it).
  std::vector<std::pair<std::shared_ptr<GraphCore>, std::shared_ptr<ExecGraph>>> holds;
  std::size_t at = 0;                 // the target the next launch binds to
  std::size_t bound = 0;              // launches bound to targets[at]
  std::size_t total = 0;              // launches bound in all
  void clear();                       // drops every reference (call it unlocked)

  void bind(StreamState& stream, const KernelDef& kernel, std::span<const std::byte> params,
            TensorUses uses, std::shared_ptr<KeepAlive> built, const void* vouch = nullptr) override;
  void abandon(StreamState& stream) override;
  const void* captured_state(const KernelDef& kernel) const override;
};

inline UpdateState& update_of(const StreamState& stream) {
  return static_cast<UpdateState&>(*stream.update);
}

// Note [Update binding]
// An update belongs to the thread that began it (StreamState::update_owner). That thread binds its
// launches without the runtime lock: nobody else touches the stream's UpdateState, because every
// other thread's begin/end/abort/launch on the stream is refused while the update is open. Only the
// failure path (abandoning the update, which frees groups other streams may look at) takes the lock.
// Throws StateError unless this thread began the stream's update (nothing is abandoned).
void check_update_owner(const StreamState& s, const char* call);

// Leaves update mode installing nothing and frees the handles (runtime_mutex() held).
void abandon_update(StreamState& stream);
// Abandons the update (taking the runtime lock if this thread does not hold it) and throws
// StateError(message + "nothing was installed").
[[noreturn]] void fail_update(StreamState& stream, const std::string& message);

}  // namespace npugraph::detail
