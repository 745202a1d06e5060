#include "npugraph/task_group.hpp"

#include <exception>

#include "graph/graph_core.hpp"
#include "graph/task_update.hpp"
#include "npugraph/error.hpp"
#include "runtime/capture.hpp"

namespace npugraph::detail {

std::shared_ptr<ExecGraph> resolve_group(const GroupRef& ref, const char* call) {
  auto core = ref.core.lock();
  NG_CHECK_STATE(core && core->generation == ref.generation, call, ": the task group handle (graph ",
                 ref.graph_id, ", group ", ref.group,
                 ") is stale: its graph was reset or destroyed, or its capture failed");
  NG_CHECK_STATE(core->state == Graph::State::ready && core->exec, call, ": graph ", ref.graph_id,
                 " is still capturing: update its task groups after capture_end");
  NG_CHECK_STATE(ref.group < core->exec->groups.size(), call, ": the task group handle names group ",
                 ref.group, " but graph ", ref.graph_id, " has ", core->exec->groups.size());
  return core->exec;
}

// Leaves update mode, installing nothing (the rule for every update error).
void abandon_update(StreamState& s) {
  if (s.update) {
    GroupSlot& slot = *s.update->graph->groups[s.update->group];
    if (slot.updater == &s) slot.updater = nullptr;
    defer_release(std::shared_ptr<UpdateState>(std::move(s.update)));
  }
  s.mode.store(StreamMode::normal, std::memory_order_release);
}

void fail_update(StreamState& s, const std::string& message) {
  abandon_update(s);
  NG_THROW(StateError, message, " (the update is abandoned: nothing was installed)");
}

namespace {

std::string group_name(const UpdateState& u) {
  return "group " + std::to_string(u.group) + " of graph " + std::to_string(u.graph->graph_id);
}

}  // namespace

void update_bind(StreamState& s, Task&& task) {
  UpdateState& u = *s.update;
  GroupSlot& slot = *u.graph->groups[u.group];
  const std::size_t i = u.params.size(), n = slot.nodes.size();
  if (task.kind != TaskKind::kernel)
    fail_update(s, detail::cat("task update on ", s.str(), ": only kernel launches may be issued while "
                               "updating; '", task_name(task), "' is not a kernel launch"));
  if (i >= n)
    fail_update(s, detail::cat("task update on ", s.str(), ": launch ", i + 1, " ('", task.kernel->name,
                               "') is one more than the ", n, " task(s) of ", group_name(u)));
  if (task.kernel != slot.kernels[i])
    fail_update(s, detail::cat("task update on ", s.str(), ": launch ", i + 1, " is kernel '",
                               task.kernel->name, "' but task ", i + 1, " of ", group_name(u),
                               " is kernel '", slot.kernels[i]->name, "'"));
  if (task.kernel->check_update) {
    // Against the captured block (not the current one, which patches change asynchronously). It runs
    // under the runtime lock: a check_update must not call back into npugraph.
    std::string why;
    try {
      why = task.kernel->check_update(slot.captured->params[i].span(), task.params.span());
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "check_update threw a non-standard exception";
    }
    if (!why.empty())
      fail_update(s, detail::cat("task update on ", s.str(), ": launch ", i + 1, " ('",
                                 task.kernel->name, "') cannot replace task ", i + 1, " of ",
                                 group_name(u), ": ", why));
  }
  u.params.push_back(std::move(task.params));
}

void apply_patch(Patch& patch) {
  patch.graph->groups[patch.group]->current.store(std::move(patch.params));
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

void task_group_begin(const Stream& stream) {
  auto& s = state_of(stream);
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::capturing && s.capture, "task_group_begin: ", s.str(),
                 " is not capturing: task groups are marked during a graph capture (inside a "
                 "CaptureScope, or between capture_begin and capture_end)");
  NG_CHECK_STATE(s.open_group < 0, "task_group_begin: a task group is already open on ", s.str(),
                 " (groups do not nest): call task_group_end first");
  NG_CHECK_STATE(s.capture->invalid.empty(), "task_group_begin on ", s.str(), ": the capture of graph ",
                 s.capture->graph_id, " was invalidated (", s.capture->invalid, ")");
  s.open_group = static_cast<int>(s.capture->def.groups.size());
  s.capture->def.groups.emplace_back();
}

TaskGroupHandle task_group_end(const Stream& stream) {
  auto& s = state_of(stream);
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::capturing && s.capture, "task_group_end: ", s.str(),
                 " is not capturing: task groups are marked during a graph capture");
  if (s.open_group < 0) {
    for (auto& other : s.capture->streams)
      NG_CHECK_STATE(other->open_group < 0, "task_group_end: no task group is open on ", s.str(),
                     "; the open group was begun on ", other->str(),
                     ": end it on the stream that began it");
    NG_THROW(StateError, "task_group_end: no task group is open on ", s.str(),
             ": call task_group_begin first");
  }
  detail::CaptureState& c = *s.capture;
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

void task_update_begin(const Stream& stream, const TaskGroupHandle& handle) {
  auto& s = state_of(stream);
  NG_CHECK_ARG(handle.defined(), "task_update_begin: handle is undefined (task_group_end returns one)");
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() != StreamMode::capturing, "task_update_begin: ", s.str(),
                 " is capturing; update on a stream that is not capturing (a second stream, as in "
                 "the seed example)");
  if (s.mode.load() == StreamMode::updating) {
    const std::string open = detail::cat("group ", s.update->group, " of graph ", s.update->graph->graph_id);
    detail::abandon_update(s);
    NG_THROW(StateError, "task_update_begin: ", s.str(), " is already updating ", open,
             " (updates do not nest); that update is abandoned: nothing was installed");
  }
  auto graph = detail::resolve_group(*handle.impl(), "task_update_begin");
  detail::GroupSlot& slot = *graph->groups[handle.impl()->group];
  NG_CHECK_STATE(slot.updater == nullptr, "task_update_begin: group ", handle.impl()->group,
                 " of graph ", graph->graph_id, " is already being updated on ", slot.updater->str(),
                 "; finish that update (task_update_end) first");
  slot.updater = &s;
  s.update = std::make_unique<detail::UpdateState>();
  s.update->ref = handle.impl();
  s.update->graph = std::move(graph);
  s.update->group = handle.impl()->group;
  s.update->params.reserve(slot.nodes.size());
  s.mode.store(StreamMode::updating, std::memory_order_release);
}

void task_update_end(const Stream& stream) {
  auto& s = state_of(stream);
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::updating && s.update, "task_update_end: ", s.str(),
                 " is not updating: call task_update_begin first");
  std::shared_ptr<detail::UpdateState> u(std::move(s.update));
  detail::defer_release(u);
  detail::GroupSlot& slot = *u->graph->groups[u->group];
  slot.updater = nullptr;
  s.mode.store(StreamMode::normal, std::memory_order_release);
  NG_CHECK_STATE(u->params.size() == slot.nodes.size(), "task_update_end: ", u->params.size(), " of ",
                 slot.nodes.size(), " tasks updated on ", s.str(), " (group ", u->group, " of graph ",
                 u->graph->graph_id, "); re-issue every task of the group between task_update_begin "
                 "and task_update_end (nothing was installed)");
  detail::resolve_group(*u->ref, "task_update_end");  // the graph was not reset meanwhile
  lock.unlock();
  auto set = std::make_shared<detail::ParamSet>();
  set->params = std::move(u->params);
  auto patch = std::make_shared<detail::Patch>();
  patch->graph = std::move(u->graph);
  patch->group = u->group;
  patch->params = std::move(set);
  detail::Task task;
  task.kind = detail::TaskKind::patch;
  task.object = std::move(patch);
  s.queue->submit(std::move(task));
}

void task_update_abort(const Stream& stream) {
  auto& s = state_of(stream);
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::updating, "task_update_abort: ", s.str(),
                 " is not updating");
  detail::abandon_update(s);
}

TaskGroupScope::TaskGroupScope(const Stream& stream) : stream_(stream) { task_group_begin(stream_); }

TaskGroupScope::~TaskGroupScope() {
  if (ended_) return;
  detail::RuntimeLock lock;
  auto& s = state_of(stream_);
  if (s.capture && s.open_group >= 0) {  // abandon the open group: it stays recorded, ungrouped
    for (auto n : s.capture->def.groups[static_cast<std::size_t>(s.open_group)])
      s.capture->def.nodes[n].group = -1;
    s.capture->def.groups[static_cast<std::size_t>(s.open_group)].clear();
    s.open_group = -1;
  }
}

TaskGroupHandle TaskGroupScope::end() {
  NG_CHECK_STATE(!ended_, "TaskGroupScope::end: already ended");
  ended_ = true;
  return task_group_end(stream_);
}

UpdateScope::UpdateScope(const Stream& stream, const TaskGroupHandle& handle)
    : stream_(stream), exceptions_on_entry_(std::uncaught_exceptions()) {
  task_update_begin(stream_, handle);
}

UpdateScope::~UpdateScope() noexcept(false) {
  if (ended_) return;
  ended_ = true;
  if (std::uncaught_exceptions() > exceptions_on_entry_) {
    if (stream_.is_updating()) task_update_abort(stream_);
    return;
  }
  task_update_end(stream_);
}

void UpdateScope::end() {
  NG_CHECK_STATE(!ended_, "UpdateScope::end: already ended");
  ended_ = true;
  task_update_end(stream_);
}

}  // namespace npugraph
