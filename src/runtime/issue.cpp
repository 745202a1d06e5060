#include "runtime/issue.hpp"

#include <cmath>
#include <cstring>
#include <exception>

#include "graph/task_update.hpp"
#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"
#include "npugraph/task_group.hpp"
#include "npugraph/tasks.hpp"
#include "runtime/capture.hpp"

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
    case TaskKind::graph_launch: return "graph_launch";
    case TaskKind::patch: return "task_update_patch";
  }
  return "?";
}

const char* task_name(const Task& task) {
  return task.kind == TaskKind::kernel && task.kernel ? task.kernel->name : task_kind_name(task.kind);
}

void issue(StreamState& s, Task&& task) {
  if (s.mode.load(std::memory_order_acquire) == StreamMode::normal) [[likely]] {
    s.queue->submit(std::move(task));
    return;
  }
  RuntimeLock lock;
  switch (s.mode.load()) {
    case StreamMode::normal:
      lock.unlock();
      s.queue->submit(std::move(task));
      return;
    case StreamMode::capturing: record_task(s, std::move(task)); return;
    case StreamMode::updating: update_bind(s, std::move(task)); return;
  }
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
  try {
    if (stream.is_updating()) task_update_abort(stream);
  } catch (...) {  // already left update mode, or another thread's update
  }
}

void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params) {
  launch(stream, kernel, params, TensorUses());
}

void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params,
            TensorUses uses) {
  NG_CHECK_ARG(kernel.name != nullptr, "launch: kernel.name = null: every kernel needs a name");
  NG_CHECK_ARG(kernel.cpu != nullptr, "launch: kernel '", kernel.name,
               "' has no implementation for the cpu backend");
  auto& s = state_of(stream);
  if (s.mode.load(std::memory_order_acquire) == detail::StreamMode::updating) {
    // Bound straight into the update's recycled parameter set: no task, no allocation, and no lock
    // on the thread that began the update (Note [Update binding]).
    if (detail::owns_update(s)) return detail::update_bind(s, kernel, params, uses);
    detail::RuntimeLock lock;
    if (s.mode.load() == detail::StreamMode::updating) return detail::update_bind(s, kernel, params, uses);
  }
  Task task;
  task.kind = TaskKind::kernel;
  task.kernel = &kernel;
  task.params.assign(params);
  if (!uses.empty()) task.object = detail::keep_alive(uses);  // Note [Keep-alive]
  detail::issue(s, std::move(task));
}

namespace {

void check_plain(const Tensor& t, const char* call, const char* arg) {
  NG_CHECK_ARG(t.defined(), call, ": ", arg, " is undefined");
  NG_CHECK_ARG(t.is_contiguous(), call, ": ", arg, " = ", t.str(), ": must be contiguous");
}

std::uint64_t value_bits(DType dtype, double value) {
  std::uint64_t bits = 0;
  auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dtype) {
    case DType::f32: put(static_cast<float>(value)); break;
    case DType::f16: put(half(static_cast<float>(value)).bits); break;
    case DType::bf16: put(bfloat16(static_cast<float>(value)).bits); break;
    case DType::i8: put(static_cast<std::int8_t>(value)); break;
    case DType::u8: put(static_cast<std::uint8_t>(value)); break;
    case DType::i32: put(static_cast<std::int32_t>(value)); break;
    case DType::i64: put(static_cast<std::int64_t>(value)); break;
    case DType::boolean: put(static_cast<std::uint8_t>(value != 0.0)); break;
  }
  return bits;
}

}  // namespace

void fill_(const Tensor& dst, double value) { fill_(current_stream(dst.device()), dst, value); }

void fill_(const Stream& stream, const Tensor& dst, double value) {
  check_plain(dst, "fill_", "dst");
  if (!is_floating(dst.dtype()) && dst.dtype() != DType::boolean) {
    double lo = -9223372036854775808.0, hi = 9223372036854775807.0;
    switch (dst.dtype()) {
      case DType::i8: lo = -128, hi = 127; break;
      case DType::u8: lo = 0, hi = 255; break;
      case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
      default: break;
    }
    NG_CHECK_ARG(std::isfinite(value) && value == std::floor(value) && value >= lo && value < hi + 1,
                 "fill_: value = ", value, ": must be an integer in [", lo, ", ", hi, "] for a ",
                 dtype_name(dst.dtype()), " tensor");
  }
  const detail::FillArgs args{dst.data(), static_cast<std::size_t>(dst.numel()), dst.element_size(),
                              value_bits(dst.dtype(), value)};
  Task task;
  task.kind = TaskKind::fill;
  task.params.assign(std::as_bytes(std::span(&args, 1)));
  const Tensor* uses[] = {&dst};
  task.object = detail::keep_alive(uses);  // Note [Keep-alive]
  detail::issue(state_of(stream), std::move(task));
}

void copy_(const Tensor& dst, const Tensor& src) { copy_(current_stream(dst.device()), dst, src); }

void copy_(const Stream& stream, const Tensor& dst, const Tensor& src) {
  check_plain(dst, "copy_", "dst");
  check_plain(src, "copy_", "src");
  NG_CHECK_ARG(dst.dtype() == src.dtype(), "copy_: src dtype = ", dtype_name(src.dtype()),
               ": must equal dst dtype ", dtype_name(dst.dtype()));
  NG_CHECK_ARG(dst.numel() == src.numel(), "copy_: src = ", src.str(), ": must have as many elements (",
               dst.numel(), ") as dst = ", dst.str());
  const detail::CopyArgs args{dst.data(), src.data(), dst.nbytes()};
  Task task;
  task.kind = TaskKind::copy;
  task.params.assign(std::as_bytes(std::span(&args, 1)));
  const Tensor* uses[] = {&dst, &src};
  task.object = detail::keep_alive(uses);  // Note [Keep-alive]
  detail::issue(state_of(stream), std::move(task));
}

void launch_host_func(const Stream& stream, std::function<void()> fn) {
  NG_CHECK_ARG(static_cast<bool>(fn), "launch_host_func: fn is empty");
  Task task;
  task.kind = TaskKind::host_fn;
  task.object = std::make_shared<std::function<void()>>(std::move(fn));
  detail::issue(state_of(stream), std::move(task));
}

Tensor zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  fill_(t, 0.0);
  return t;
}

}  // namespace npugraph
