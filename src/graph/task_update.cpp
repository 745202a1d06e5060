// Task update: binding launches issued in update mode to a group's tasks, and installing them in
// stream order or launch order (docs/semantics.md, Task update).
#include <exception>
#include <optional>
#include <thread>

#include "graph/graph_core.hpp"
#include "graph/task_update.hpp"
#include "npugraph/error.hpp"
#include "npugraph/external_event.hpp"
#include "npugraph/task_group.hpp"
#include "runtime/sync_objects.hpp"
#include "runtime/trace.hpp"

namespace npugraph::detail {

void UpdateState::clear() {
  targets.clear();
  holds.clear();
  at = bound = total = 0;
}

// Leaves update mode, installing nothing (the rule for every update error).
void abandon_update(StreamState& s) {
  if (s.update) {
    UpdateState& u = update_of(s);
    for (UpdateTarget& t : u.targets) {
      GroupSlot& slot = *t.graph->groups[t.group];
      if (slot.updater == &s) slot.updater = nullptr;
      t.set.reset();
    }
    for (auto& [core, graph] : u.holds) {
      defer_release(std::move(graph));  // a graph reset meanwhile dies after the unlock
      defer_release(std::move(core));
    }
    u.clear();
    delete s.spare_update.exchange(s.update.release(), std::memory_order_acq_rel);
  }
  s.update_owner.store(std::thread::id(), std::memory_order_relaxed);
  s.mode.store(StreamMode::normal, std::memory_order_release);
}

void fail_update(StreamState& s, const std::string& message) {
  std::optional<RuntimeLock> lock;
  if (!runtime_lock_held()) lock.emplace();
  abandon_update(s);
  NG_THROW(StateError, message, " (the update is abandoned: nothing was installed)");
}

void check_update_owner(const StreamState& s, const char* call) {
  NG_CHECK_STATE(owns_update(s), call, ": ", s.str(), " is being updated by another thread; an update "
                 "is bound, ended and aborted by the thread that began it");
}

namespace {

std::string group_name(const UpdateTarget& t) {
  return "group " + std::to_string(t.group) + " of graph " + std::to_string(t.graph->graph_id);
}

// "group 0 of graph 3", or "the 80 groups being updated" for a batch.
std::string groups_name(const UpdateState& u) {
  return u.targets.size() == 1 ? group_name(u.targets[0])
                               : "the " + std::to_string(u.targets.size()) + " groups being updated";
}

std::size_t total_tasks(const UpdateState& u) {
  std::size_t n = 0;
  for (const UpdateTarget& t : u.targets) n += t.graph->groups[t.group]->nodes.size();
  return n;
}

}  // namespace

void UpdateState::abandon(StreamState& s) { abandon_update(s); }

const void* UpdateState::captured_state(const KernelDef& kernel) const {
  if (at >= targets.size()) return nullptr;
  const UpdateTarget& t = targets[at];
  const GroupSlot& slot = *t.graph->groups[t.group];
  if (bound >= slot.kernels.size() || slot.kernels[bound] != &kernel) return nullptr;
  const std::shared_ptr<KeepAlive>& keep = slot.captured->keep[bound];
  return keep ? keep->capture_state.get() : nullptr;
}

void UpdateState::bind(StreamState& s, const KernelDef& kernel, std::span<const std::byte> params,
                       TensorUses uses, std::shared_ptr<KeepAlive> built, const void* vouch) {
  check_update_owner(s, kernel.name);
  UpdateState& u = *this;
  if (u.at >= u.targets.size())
    fail_update(s, detail::cat("task update on ", s.str(), ": launch ", u.total + 1, " ('", kernel.name,
                               "') is one more than the ", total_tasks(u), " task(s) of ", groups_name(u)));
  UpdateTarget& t = u.targets[u.at];
  GroupSlot& slot = *t.graph->groups[t.group];
  const std::size_t i = u.bound;
  if (&kernel != slot.kernels[i])
    fail_update(s, detail::cat("task update on ", s.str(), ": launch ", u.total + 1, " is kernel '",
                               kernel.name, "' but task ", i + 1, " of ", group_name(t), " is kernel '",
                               slot.kernels[i]->name, "'"));
  const std::shared_ptr<KeepAlive>& captured = slot.captured->keep[i];
  // Note [Capture state]: a launch that passes back its task's own capture state built its block
  // from it, so what check_update compares is the captured block's by construction.
  const bool vouched = vouch && captured && captured->capture_state.get() == vouch;
  if (kernel.check_update && !vouched) {
    // Against the captured block (not the current one, which patches change asynchronously). It runs
    // under the runtime lock: a check_update must not call back into npugraph.
    std::string why;
    try {
      why = kernel.check_update(slot.captured->params[i].span(), params);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "check_update threw a non-standard exception";
    }
    if (!why.empty())
      fail_update(s, detail::cat("task update on ", s.str(), ": launch ", u.total + 1, " ('", kernel.name,
                                 "') cannot replace task ", i + 1, " of ", group_name(t), ": ", why));
  }
  t.set->params[i].assign(params);
  // Note [Keep-alive]: the captured tensors (the common case) are kept alive by the captured set,
  // which lives as long as the graph: the new set holds no reference to them (sharing the captured
  // KeepAlive would cost an atomic increment here and a decrement on the worker that recycles the
  // set, a cache line bouncing between the two). So does a vouched launch without uses, which reads
  // only the captured tensors (Note [Capture state]).
  if (built || uses.empty()) t.set->keep[i] = std::move(built);
  else if (captured && captured->same(uses)) t.set->keep[i] = nullptr;
  else t.set->keep[i] = keep_alive(uses);
  ++u.total;
  if (++u.bound == slot.nodes.size()) {
    ++u.at;
    u.bound = 0;
  }
}

void apply_patch(Patch& patch) {
  for (Patch::Entry& e : patch.entries) e.slot->install(std::move(e.set));
  patch.entries.clear();
  for (const auto& e : patch.records) external_record(*e);
  patch.records.clear();
  patch.graphs.clear();  // may destroy a graph reset meanwhile: this is the worker, unlocked
  patch.home->give(&patch);
}

void Patch::run(WorkHold&, StreamState&) { apply_patch(*this); }

void Patch::trace(TraceEvent& event) const { event.detail = cat("update install: ", entries.size(), " group(s)"); }

}  // namespace npugraph::detail

namespace npugraph {

using detail::state_of;
using detail::StreamMode;

void task_update_begin(const Stream& stream, const TaskGroupHandle& handle, UpdateOrder order) {
  task_update_begin(stream, std::span<const TaskGroupHandle>(&handle, 1), order);
}

void task_update_begin(const Stream& stream, std::span<const TaskGroupHandle> handles,
                       UpdateOrder order) {
  auto& s = state_of(stream);
  detail::require(s.backend, &detail::BackendCaps::task_update, "task_update_begin");
  NG_CHECK_ARG(!handles.empty(), "task_update_begin: handles is empty: pass at least one task group handle");
  NG_CHECK_ARG(order == UpdateOrder::stream || order == UpdateOrder::launch, "task_update_begin: order = ",
               static_cast<int>(order), ": must be UpdateOrder::stream or UpdateOrder::launch");
  for (std::size_t i = 0; i < handles.size(); ++i)
    NG_CHECK_ARG(handles[i].defined(), "task_update_begin: handle", handles.size() > 1 ? "s[" : "",
                 handles.size() > 1 ? std::to_string(i) + "]" : std::string(),
                 " is undefined (task_group_end returns one)");
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() != StreamMode::capturing, "task_update_begin: ", s.str(),
                 " is capturing; update on a stream that is not capturing (a second stream, as in "
                 "the seed example)");
  if (s.mode.load() == StreamMode::updating) {
    detail::check_update_owner(s, "task_update_begin");
    const std::string open = detail::groups_name(detail::update_of(s));
    detail::abandon_update(s);
    NG_THROW(StateError, "task_update_begin: ", s.str(), " is already updating ", open,
             " (updates do not nest); that update is abandoned: nothing was installed");
  }
  std::unique_ptr<detail::UpdateState> u(
      static_cast<detail::UpdateState*>(s.spare_update.exchange(nullptr, std::memory_order_acq_rel)));
  if (!u) u = std::make_unique<detail::UpdateState>();
  u->order = order;
  u->targets.reserve(handles.size());
  try {
    for (std::size_t i = 0; i < handles.size(); ++i) {
      const detail::GroupRef& ref = *handles[i].impl();
      // Consecutive handles of one graph resolve once (a decode step's groups share their graph).
      const bool same = !u->holds.empty() && !u->holds.back().first.owner_before(ref.core) &&
                        !ref.core.owner_before(u->holds.back().first) &&
                        u->holds.back().first->generation == ref.generation &&
                        ref.group < u->holds.back().second->groups.size();
      if (!same) {
        std::shared_ptr<detail::GraphCore> core;
        auto exec = detail::resolve_group(ref, "task_update_begin", &core);
        u->holds.emplace_back(std::move(core), std::move(exec));
      }
      detail::GraphCore* core = u->holds.back().first.get();
      detail::ExecGraph* graph = u->holds.back().second.get();
      detail::GroupSlot& slot = *graph->groups[ref.group];
      if (slot.updater == &s) {
        std::size_t j = 0;
        while (u->targets[j].graph != graph || u->targets[j].group != ref.group) ++j;
        NG_THROW(ArgumentError, "task_update_begin: handles[", i, "] names group ", ref.group, " of graph ",
                 graph->graph_id, ", as handles[", j, "] does: each group may be updated once per update");
      }
      NG_CHECK_STATE(slot.updater == nullptr, "task_update_begin: group ", ref.group, " of graph ",
                     graph->graph_id, " is already being updated on ", slot.updater->str(),
                     "; finish that update (task_update_end) first");
      slot.updater = &s;
      u->targets.push_back({graph, core, ref.generation, ref.group, slot.blank()});
    }
  } catch (...) {
    s.update = std::move(u);
    detail::abandon_update(s);  // frees the groups marked so far
    throw;
  }
  s.update = std::move(u);
  s.update_owner.store(std::this_thread::get_id(), std::memory_order_relaxed);
  s.mode.store(StreamMode::updating, std::memory_order_release);
}

namespace {

// Stream order: one patch task installs every set when the stream reaches it.
void install_in_stream_order(detail::StreamState& s, detail::UpdateState& u,
                             std::span<const ExternalEvent> record_after) {
  const std::uint64_t stamp = detail::next_install_stamp();
  // Note [Idle-stream patch]: with nothing queued on the stream (every task submitted so far has
  // completed), "when the stream reaches the patch" is now: install on this thread and spare the
  // worker a wake-up. Work other threads submit concurrently is unordered with it either way.
  const std::uint64_t submitted = s.queue->submitted();
  if (s.queue->completed() == submitted) {
    for (detail::UpdateTarget& t : u.targets) {
      t.set->stamp = stamp;
      t.graph->groups[t.group]->install(std::move(t.set));
    }
    for (const ExternalEvent& e : record_after) detail::external_record(*e.impl());
    return;
  }
  if (!s.patches) s.patches = std::make_shared<detail::PatchPool>();
  auto& pool = *static_cast<detail::PatchPool*>(s.patches.get());
  detail::Patch* patch = pool.take([&](detail::Patch& fresh) { fresh.home = &pool; });
  for (const ExternalEvent& e : record_after) patch->records.push_back(e.impl());
  for (detail::UpdateTarget& t : u.targets) {
    t.set->stamp = stamp;
    patch->entries.push_back({t.graph->groups[t.group].get(), std::move(t.set)});
  }
  for (const auto& hold : u.holds) patch->graphs.push_back(hold.second);
  // Aliasing the stream's pool: no allocation.
  s.queue->submit(detail::work_task(std::shared_ptr<detail::TaskWork>(s.patches, patch)));
}

// Launch order: each graph publishes a new launch table now (Note [Update order]).
void install_in_launch_order(detail::UpdateState& u) {
  const std::uint64_t stamp = detail::next_install_stamp();
  thread_local std::vector<std::uint32_t> groups;
  thread_local std::vector<detail::SetRef> sets;
  for (std::size_t i = 0; i < u.targets.size();) {
    detail::ExecGraph* graph = u.targets[i].graph;
    groups.clear();
    sets.clear();
    for (; i < u.targets.size() && u.targets[i].graph == graph; ++i) {
      u.targets[i].set->stamp = stamp;
      groups.push_back(u.targets[i].group);
      sets.push_back(std::move(u.targets[i].set));
    }
    graph->publish(groups, sets);
  }
  sets.clear();
}

}  // namespace

void task_update_end(const Stream& stream) { task_update_end(stream, {}); }

void task_update_end(const Stream& stream, std::span<const ExternalEvent> record_after) {
  auto& s = state_of(stream);
  std::unique_ptr<detail::UpdateState> u;
  {
    detail::RuntimeLock lock;
    NG_CHECK_STATE(s.mode.load() == StreamMode::updating && s.update, "task_update_end: ", s.str(),
                   " is not updating: call task_update_begin first");
    detail::check_update_owner(s, "task_update_end");
    detail::UpdateState& cur = detail::update_of(s);
    if (cur.at < cur.targets.size()) {
      const detail::UpdateTarget& t = cur.targets[cur.at];
      const std::size_t n = t.graph->groups[t.group]->nodes.size();
      const std::string what = detail::cat(cur.bound, " of ", n, " tasks updated on ", s.str(), " (",
                                           detail::group_name(t), ")");
      detail::abandon_update(s);
      NG_THROW(StateError, "task_update_end: ", what, "; re-issue every task of the group between "
               "task_update_begin and task_update_end (nothing was installed)");
    }
    for (const detail::UpdateTarget& t : cur.targets) {
      if (t.core->generation == t.generation && t.core->exec.get() == t.graph) [[likely]]
        continue;
      const std::string what = detail::cat("task_update_end: the task group handle (graph ", t.graph->graph_id,
                                           ", group ", t.group, ") is stale: its graph was reset or "
                                           "destroyed during the update");
      detail::abandon_update(s);
      NG_THROW(StateError, what, " (the update is abandoned: nothing was installed)");
    }
    for (const detail::UpdateTarget& t : cur.targets) t.graph->groups[t.group]->updater = nullptr;
    u.reset(static_cast<detail::UpdateState*>(s.update.release()));
    s.update_owner.store(std::thread::id(), std::memory_order_relaxed);
    s.mode.store(StreamMode::normal, std::memory_order_release);
  }
  const bool traced = detail::tracing_on();
  const std::int64_t start = traced ? detail::trace_now_ns() : 0;
  const std::size_t ngroups = u->targets.size();
  const std::uint64_t graph_id = u->targets.empty() ? 0 : u->targets.front().graph->graph_id;
  if (u->order == UpdateOrder::launch) {
    install_in_launch_order(*u);
    if (!record_after.empty()) record_events(record_after, stream);
  } else {
    install_in_stream_order(s, *u, record_after);
  }
  if (traced || detail::log_on(LogLevel::info)) {
    const std::string what = detail::cat(ngroups, " task group(s) of graph ", graph_id, u->order == UpdateOrder::launch ? ", launch order (installed)"
                                                                         : ", stream order (queued)");
    if (traced)
      detail::trace_event({.name = "task_update_end (host)", .category = "update", .start_ns = start,
                           .duration_ns = detail::trace_now_ns() - start, .stream = s.id,
                           .graph = graph_id, .node = -1, .group = -1, .detail = what});
    detail::log_line(LogLevel::info, "task update on " + s.str() + ": " + what);
  }
  u->clear();  // unlocked: may drop the last reference to a graph reset meanwhile
  delete s.spare_update.exchange(u.release(), std::memory_order_acq_rel);
}

void task_update_abort(const Stream& stream) {
  auto& s = state_of(stream);
  detail::RuntimeLock lock;
  NG_CHECK_STATE(s.mode.load() == StreamMode::updating, "task_update_abort: ", s.str(),
                 " is not updating");
  detail::check_update_owner(s, "task_update_abort");
  detail::abandon_update(s);
}

UpdateScope::UpdateScope(const Stream& stream, const TaskGroupHandle& handle, UpdateOrder order)
    : stream_(stream), exceptions_on_entry_(std::uncaught_exceptions()) {
  task_update_begin(stream_, handle, order);
}

UpdateScope::UpdateScope(const Stream& stream, std::span<const TaskGroupHandle> handles,
                         UpdateOrder order)
    : stream_(stream), exceptions_on_entry_(std::uncaught_exceptions()) {
  task_update_begin(stream_, handles, order);
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
