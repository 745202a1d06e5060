#include "npugraph/task_group.hpp"

#include <exception>
#include <optional>
#include <thread>

#include "npugraph/external_event.hpp"

#include "graph/graph_core.hpp"
#include "graph/task_update.hpp"
#include "npugraph/error.hpp"
#include "graph/capture.hpp"
#include "runtime/sync_objects.hpp"

namespace npugraph::detail {

std::shared_ptr<ExecGraph> resolve_group(const GroupRef& ref, const char* call,
                                         std::shared_ptr<GraphCore>* core_out) {
  auto core = ref.core.lock();
  NG_CHECK_STATE(core && core->generation == ref.generation, call, ": the task group handle (graph ",
                 ref.graph_id, ", group ", ref.group,
                 ") is stale: its graph was reset or destroyed, or its capture failed");
  NG_CHECK_STATE(core->state == Graph::State::ready && core->exec, call, ": graph ", ref.graph_id,
                 " is still capturing: update its task groups after capture_end");
  NG_CHECK_STATE(ref.group < core->exec->groups.size(), call, ": the task group handle names group ",
                 ref.group, " but graph ", ref.graph_id, " has ", core->exec->groups.size());
  if (core_out) *core_out = core;
  return core->exec;
}

}  // namespace npugraph::detail

namespace npugraph {

using detail::runtime_mutex;
using detail::state_of;
using detail::StreamMode;

bool TaskGroupHandle::valid() const {
  if (!ref_) return false;
  detail::RuntimeLock lock;
  auto core = ref_->core.lock();
  return core && core->generation == ref_->generation;
}

std::size_t TaskGroupHandle::num_tasks() const {
  NG_CHECK_ARG(ref_ != nullptr, "TaskGroupHandle: undefined handle");
  return ref_->num_tasks;
}

std::uint64_t TaskGroupHandle::graph_id() const {
  NG_CHECK_ARG(ref_ != nullptr, "TaskGroupHandle: undefined handle");
  return ref_->graph_id;
}

std::uint32_t TaskGroupHandle::index() const {
  NG_CHECK_ARG(ref_ != nullptr, "TaskGroupHandle: undefined handle");
  return ref_->group;
}

bool operator==(const TaskGroupHandle& a, const TaskGroupHandle& b) {
  if (!a.ref_ || !b.ref_) return a.ref_ == b.ref_;
  return a.ref_->graph_id == b.ref_->graph_id && a.ref_->generation == b.ref_->generation &&
         a.ref_->group == b.ref_->group;
}

std::vector<TaskGroupHandle> Graph::groups() const {
  std::vector<TaskGroupHandle> out;
  detail::RuntimeLock lock;
  if (!core_ || !core_->exec) return out;
  const auto& slots = core_->exec->groups;
  for (std::size_t g = 0; g < slots.size(); ++g) {
    if (slots[g]->nodes.empty()) continue;  // a group abandoned at capture
    auto ref = std::make_shared<detail::GroupRef>();
    ref->core = core_;
    ref->generation = core_->generation;
    ref->group = static_cast<std::uint32_t>(g);
    ref->num_tasks = static_cast<std::uint32_t>(slots[g]->nodes.size());
    ref->graph_id = core_->id;
    out.emplace_back(std::move(ref));
  }
  return out;
}

void task_group_begin(const Stream& stream) {
  auto& s = state_of(stream);
  detail::require(s.backend, &detail::BackendCaps::task_update, "task_group_begin");
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::capturing && s.capture, "task_group_begin: ", s.str(),
                 " is not capturing: task groups are marked during a graph capture (inside a "
                 "CaptureScope, or between capture_begin and capture_end)");
  NG_CHECK_STATE(s.open_group < 0, "task_group_begin: a task group is already open on ", s.str(),
                 " (groups do not nest): call task_group_end first");
  NG_CHECK_STATE(s.capture->invalid.empty(), "task_group_begin on ", s.str(), ": the capture of graph ",
                 s.capture->graph_id, " was invalidated (", s.capture->invalid, ")");
  s.open_group = static_cast<int>(detail::capture_of(s).def.groups.size());
  detail::capture_of(s).def.groups.emplace_back();
}

TaskGroupHandle task_group_end(const Stream& stream) {
  auto& s = state_of(stream);
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::capturing && s.capture, "task_group_end: ", s.str(),
                 " is not capturing: task groups are marked during a graph capture");
  if (s.open_group < 0) {
    for (auto& other : detail::capture_of(s).streams)
      NG_CHECK_STATE(other->open_group < 0, "task_group_end: no task group is open on ", s.str(),
                     "; the open group was begun on ", other->str(),
                     ": end it on the stream that began it");
    NG_THROW(StateError, "task_group_end: no task group is open on ", s.str(),
             ": call task_group_begin first");
  }
  detail::CaptureState& c = detail::capture_of(s);
  const int g = s.open_group;
  const auto& nodes = c.def.groups[static_cast<std::size_t>(g)];
  NG_CHECK_STATE(!nodes.empty(), "task_group_end on ", s.str(),
                 ": the group holds no kernel launch; issue the op(s) to update between "
                 "task_group_begin and task_group_end (the group stays open)");
  s.open_group = -1;
  auto core = c.graph.lock();
  auto ref = std::make_shared<detail::GroupRef>();
  ref->core = core;
  ref->generation = core ? core->generation : 0;
  ref->group = static_cast<std::uint32_t>(g);
  ref->num_tasks = static_cast<std::uint32_t>(nodes.size());
  ref->graph_id = c.graph_id;
  return TaskGroupHandle(std::move(ref));
}

TaskGroupScope::TaskGroupScope(const Stream& stream) : stream_(stream) { task_group_begin(stream_); }

TaskGroupScope::~TaskGroupScope() {
  if (ended_) return;
  detail::RuntimeLock lock;
  auto& s = state_of(stream_);
  if (s.capture && s.open_group >= 0) {  // abandon the open group: it stays recorded, ungrouped
    for (auto n : detail::capture_of(s).def.groups[static_cast<std::size_t>(s.open_group)])
      detail::capture_of(s).def.nodes[n].group = -1;
    detail::capture_of(s).def.groups[static_cast<std::size_t>(s.open_group)].clear();
    s.open_group = -1;
  }
}

TaskGroupHandle TaskGroupScope::end() {
  NG_CHECK_STATE(!ended_, "TaskGroupScope::end: already ended");
  ended_ = true;
  return task_group_end(stream_);
}

}  // namespace npugraph
