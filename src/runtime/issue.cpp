#include "runtime/issue.hpp"

#include <cstring>
#include <exception>

#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kernel: return "kernel";
    case TaskKind::fill: return "fill";
    case TaskKind::copy: return "copy";
    case TaskKind::host_fn: return "host_func";
    case TaskKind::event_record: return "event_record";
    case TaskKind::event_wait: return "event_wait";
    case TaskKind::ext_record: return "external_event_record";
    case TaskKind::ext_wait: return "external_event_wait";
    case TaskKind::ext_reset: return "external_event_reset";
    case TaskKind::work: return "work";
  }
  return "?";
}

const char* task_type_name(const Task& task) {
  return task.kind == TaskKind::work && task.object ? work_of(task.object.get()).name() : task_kind_name(task.kind);
}

const char* task_name(const Task& task) {
  return task.kind == TaskKind::kernel && task.kernel ? task.kernel->name : task_type_name(task);
}

namespace {

// A task that is not a kernel launch, issued on an updating stream (runtime lock held).
[[noreturn]] void refuse_in_update(StreamState& s, const char* what) {
  NG_CHECK_STATE(owns_update(s), what, ": ", s.str(), " is being updated by another thread; an update "
                 "is bound, ended and aborted by the thread that began it");
  s.update->abandon(s);
  NG_THROW(StateError, "task update on ", s.str(), ": only kernel launches may be issued while "
           "updating; '", what, "' is not a kernel launch (the update is abandoned: nothing was installed)");
}

}  // namespace

void issue_locked(StreamState& s, Task&& task) {
  switch (s.mode.load()) {
    case StreamMode::normal: s.queue->submit(std::move(task)); return;
    case StreamMode::capturing: s.capture->record(s, std::move(task)); return;
    case StreamMode::updating: {
      if (task.kind != TaskKind::kernel) refuse_in_update(s, task_name(task));
      std::shared_ptr<KeepAlive> keep = std::static_pointer_cast<KeepAlive>(std::move(task.object));
      s.update->bind(s, *task.kernel, task.params.span(), {}, std::move(keep));
      return;
    }
  }
}

void issue(StreamState& s, Task&& task) {
  if (s.mode.load(std::memory_order_acquire) == StreamMode::normal) [[likely]] {
    s.queue->submit(std::move(task));
    return;
  }
  RuntimeLock lock;
  if (s.mode.load() == StreamMode::normal) {
    lock.unlock();
    s.queue->submit(std::move(task));
    return;
  }
  issue_locked(s, std::move(task));
}

bool KeepAlive::same(TensorUses uses) const {
  std::size_t i = 0;
  for (const Tensor* t : uses) {
    if (!t || !t->defined()) continue;
    if (i == storages.size() || storages[i] != t->storage()) return false;
    ++i;
  }
  return i == storages.size();
}

std::shared_ptr<KeepAlive> keep_alive(TensorUses uses) {
  std::shared_ptr<KeepAlive> keep;
  for (const Tensor* t : uses) {
    if (!t || !t->defined()) continue;
    if (!keep) {
      keep = std::make_shared<KeepAlive>();
      keep->storages.reserve(uses.size());
    }
    keep->storages.push_back(t->storage());
  }
  return keep;
}

}  // namespace npugraph::detail

namespace npugraph {

using detail::state_of;
using detail::Task;
using detail::TaskKind;

UpdateErrorGuard::UpdateErrorGuard(const Stream& stream) noexcept
    : stream_(stream), exceptions_(std::uncaught_exceptions()) {}

UpdateErrorGuard::~UpdateErrorGuard() {
  if (std::uncaught_exceptions() > exceptions_) abandon_update_on_error(stream_);
}

void abandon_update_on_error(const Stream& stream) noexcept {
  if (!stream.impl()) return;
  auto& s = *stream.impl();
  if (s.mode.load(std::memory_order_acquire) != detail::StreamMode::updating || !detail::owns_update(s))
    return;  // not updating, or another thread's update: leave it alone
  try {
    detail::RuntimeLock lock;
    if (s.update && detail::owns_update(s)) s.update->abandon(s);
  } catch (...) {  // the lock's graveyard could not grow: nothing else can fail here
  }
}

void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params) {
  launch(stream, kernel, params, TensorUses());
}

void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params,
            TensorUses uses) {
  launch(stream, kernel, params, uses, nullptr);
}

const void* captured_state(const Stream& stream, const KernelDef& kernel) {
  auto& s = state_of(stream);
  if (s.mode.load(std::memory_order_acquire) != detail::StreamMode::updating || !detail::owns_update(s))
    return nullptr;
  return s.update->captured_state(kernel);
}

void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params,
            TensorUses uses, std::shared_ptr<const void> capture_state) {
  NG_CHECK_ARG(kernel.name != nullptr, "launch: kernel.name = null: every kernel needs a name");
  auto& s = state_of(stream);
  NG_CHECK_ARG(s.backend.has_kernel(kernel), "launch: kernel '", kernel.name,
               "' has no implementation for the ", s.backend.name(), " backend");
  // A kernel reads only memory of its stream's device (the cpu cannot read a CUDA pointer; a
  // CUDA kernel reading host memory would fault or crawl): refused here, naming the tensor.
  for (const Tensor* t : uses)
    NG_CHECK_ARG(!t || !t->defined() || t->device() == s.device, "launch: kernel '", kernel.name,
                 "': tensor ", t->str(), " is on ", t->device().str(), ", but the stream (", s.str(),
                 ") runs on ", s.device.str(), ": move it with copy_ first");
  if (s.mode.load(std::memory_order_acquire) == detail::StreamMode::updating) {
    // Bound straight into the update's recycled parameter set: no task, no allocation, and no lock
    // on the thread that began the update (Note [Update binding]).
    if (detail::owns_update(s)) return s.update->bind(s, kernel, params, uses, nullptr, capture_state.get());
    detail::RuntimeLock lock;
    if (s.mode.load() == detail::StreamMode::updating)
      return s.update->bind(s, kernel, params, uses, nullptr, capture_state.get());
  }
  Task task;
  task.kind = TaskKind::kernel;
  task.kernel = &kernel;
  task.params.assign(params);
  if (!uses.empty()) task.object = detail::keep_alive(uses);  // Note [Keep-alive]
  if (capture_state && s.mode.load(std::memory_order_acquire) == detail::StreamMode::capturing) {
    if (!task.object) task.object = std::make_shared<detail::KeepAlive>();
    std::static_pointer_cast<detail::KeepAlive>(task.object)->capture_state = std::move(capture_state);
  }
  detail::issue(s, std::move(task));
}

}  // namespace npugraph
