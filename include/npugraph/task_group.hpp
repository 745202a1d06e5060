// Task groups and task update (docs/semantics.md §4, §5, §7).
//
// At capture, task_group_begin/end mark kernel launches on one stream and return a handle. To update,
// task_update_begin(stream, handle), re-issue the same ops with new arguments on that stream (they are
// planned on the host and bound in order to the group's tasks, not run), then task_update_end(stream)
// installs all new parameter blocks at once:
//   - UpdateOrder::stream (the default, torch_npu's semantics): a patch task installs them when the
//     stream reaches it; order replays after it with events (ExternalEvent, as in the seed example).
//   - UpdateOrder::launch: installed when task_update_end returns; every replay launched after that
//     uses them and no replay launched before ever does, even one still queued or running. No event,
//     no synchronize.
// Batched update: pass several handles (a whole decode step); the launches issued bind to the first
// group's tasks, then the second's, and so on. Every launch is checked as it is issued, and
// task_update_end installs all groups or — on any error — none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "npugraph/stream.hpp"

namespace npugraph {

namespace detail { struct GroupRef; }
class ExternalEvent;

class TaskGroupHandle {
 public:
  TaskGroupHandle() = default;
  bool defined() const { return ref_ != nullptr; }
  // False once its graph was reset or destroyed.
  bool valid() const;
  std::size_t num_tasks() const;
  std::uint64_t graph_id() const;
  // The group's number in its graph, from 0 in capture order (the DOT dump's "group k").
  std::uint32_t index() const;
  const std::shared_ptr<detail::GroupRef>& impl() const { return ref_; }
  explicit TaskGroupHandle(std::shared_ptr<detail::GroupRef> ref) : ref_(std::move(ref)) {}
  // The same group of the same capture of the same graph (undefined handles are equal).
  friend bool operator==(const TaskGroupHandle& a, const TaskGroupHandle& b);

 private:
  std::shared_ptr<detail::GroupRef> ref_;
};

void task_group_begin(const Stream& stream);
TaskGroupHandle task_group_end(const Stream& stream);

enum class UpdateOrder : std::uint8_t { stream, launch };

void task_update_begin(const Stream& stream, const TaskGroupHandle& handle,
                       UpdateOrder order = UpdateOrder::stream);
// Batched: updates every group of `handles` (each at most once) in one update.
void task_update_begin(const Stream& stream, std::span<const TaskGroupHandle> handles,
                       UpdateOrder order = UpdateOrder::stream);
void task_update_end(const Stream& stream);
// Ends the update and records `record_after` (in order) right after the new parameters are installed,
// in the same stream task (a graph-owned update's step: install, then signal the replay's waits).
void task_update_end(const Stream& stream, std::span<const ExternalEvent> record_after);
// Leaves update mode installing nothing (what every update error does implicitly).
void task_update_abort(const Stream& stream);

// Ends the group with end(); leaving the scope by an exception abandons the open group.
class TaskGroupScope {
 public:
  explicit TaskGroupScope(const Stream& stream);
  ~TaskGroupScope();
  TaskGroupScope(const TaskGroupScope&) = delete;
  TaskGroupScope& operator=(const TaskGroupScope&) = delete;
  TaskGroupHandle end();

 private:
  Stream stream_;
  bool ended_ = false;
};

// Ends the update when the scope ends (may throw); an exception leaving the scope aborts it instead.
class UpdateScope {
 public:
  UpdateScope(const Stream& stream, const TaskGroupHandle& handle,
              UpdateOrder order = UpdateOrder::stream);
  UpdateScope(const Stream& stream, std::span<const TaskGroupHandle> handles,
              UpdateOrder order = UpdateOrder::stream);
  ~UpdateScope() noexcept(false);
  UpdateScope(const UpdateScope&) = delete;
  UpdateScope& operator=(const UpdateScope&) = delete;
  void end();

 private:
  Stream stream_;
  int exceptions_on_entry_;
  bool ended_ = false;
};

}  // namespace npugraph
