// Task groups and task update (DESIGN §3.4, §3.5).
//
// At capture, task_group_begin/end mark kernel launches on one stream and return a handle. To update,
// task_update_begin(stream, handle), re-issue the same ops with new arguments on that stream (they are
// planned on the host and bound in order to the group's tasks, not run), then task_update_end(stream)
// enqueues one patch task that installs all new parameter blocks at once when the stream reaches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "npugraph/stream.hpp"

namespace npugraph {

namespace detail { struct GroupRef; }

class TaskGroupHandle {
 public:
  TaskGroupHandle() = default;
  bool defined() const { return ref_ != nullptr; }
  // False once its graph was reset or destroyed.
  bool valid() const;
  std::size_t num_tasks() const;
  std::uint64_t graph_id() const;
  const std::shared_ptr<detail::GroupRef>& impl() const { return ref_; }
  explicit TaskGroupHandle(std::shared_ptr<detail::GroupRef> ref) : ref_(std::move(ref)) {}

 private:
  std::shared_ptr<detail::GroupRef> ref_;
};

void task_group_begin(const Stream& stream);
TaskGroupHandle task_group_end(const Stream& stream);

void task_update_begin(const Stream& stream, const TaskGroupHandle& handle);
void task_update_end(const Stream& stream);
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
  UpdateScope(const Stream& stream, const TaskGroupHandle& handle);
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
