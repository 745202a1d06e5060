// Running one task on the cpu backend (shared by stream queues and the graph executor).
#include <cstring>
#include <functional>

#include "backends/cpu/compute_pool.hpp"
#include "backends/cpu/execute.hpp"
#include "npugraph/error.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/trace.hpp"

namespace npugraph::detail {
namespace {

void run_fill(const FillArgs& a) {
  auto* dst = static_cast<unsigned char*>(a.dst);
  if (a.pattern == 0) {
    std::memset(dst, 0, a.count * a.elem_size);
    return;
  }
  for (std::size_t i = 0; i < a.count; ++i) std::memcpy(dst + i * a.elem_size, &a.pattern, a.elem_size);
}

}  // namespace

bool execute_builtin(TaskKind kind, const std::byte* params, void* object, std::uint64_t value,
                     const WaitSite& site) {
  switch (kind) {
    case TaskKind::fill: {
      FillArgs a;
      std::memcpy(&a, params, sizeof a);
      run_fill(a);
      return true;
    }
    case TaskKind::copy: {
      CopyArgs a;
      std::memcpy(&a, params, sizeof a);
      if (a.nbytes) std::memmove(a.dst, a.src, a.nbytes);
      return true;
    }
    case TaskKind::host_fn: (*static_cast<std::function<void()>*>(object))(); return true;
    case TaskKind::event_record:
      event_complete(*static_cast<EventState*>(object), value, *site.stream);
      return true;
    case TaskKind::event_wait:
      event_block(*static_cast<EventState*>(object), value, *site.stream);
      return true;
    case TaskKind::ext_record: external_record(*static_cast<ExternalEventState*>(object)); return true;
    case TaskKind::ext_wait: return external_wait(*static_cast<ExternalEventState*>(object), site);
    case TaskKind::ext_reset: external_reset(*static_cast<ExternalEventState*>(object)); return true;
    case TaskKind::work: {  // a replay run by a graph's node: it holds nothing (Note [Replay order])
      WorkHold none;
      work_of(object).run(none, *site.stream);
      return true;
    }
    case TaskKind::kernel: break;
  }
  NG_THROW(InternalError, "execute_builtin called for a kernel task");
}

namespace {

// What a trace event adds to the task's name: the ExternalEvent's (work says its own: TaskWork::trace).
std::string trace_detail(TaskKind kind, const void* object) {
  switch (kind) {
    case TaskKind::ext_record:
    case TaskKind::ext_wait:
    case TaskKind::ext_reset:
      return object ? "ExternalEvent '" + static_cast<const ExternalEventState*>(object)->name + "'" : "";
    default:
      return {};
  }
}

}  // namespace

void trace_task(const char* name, TaskKind kind, const void* object, std::int64_t start_ns,
                std::uint64_t stream, std::uint64_t graph, std::int32_t node, std::int32_t group) {
  TraceEvent e;
  e.name = name;
  e.category = kind == TaskKind::kernel ? "kernel" : "task";
  e.start_ns = start_ns;
  e.duration_ns = trace_now_ns() - start_ns;
  e.stream = stream;
  e.graph = graph;
  e.node = node;
  e.group = group;
  e.detail = trace_detail(kind, object);
  if (kind == TaskKind::work && object) work_of(object).trace(e);
  trace_event(std::move(e));
}

void execute_task(Task& task, StreamState& stream, ComputePool& pool) {
  if (!tracing_on()) return execute_untraced(task, stream, pool);
  const TraceLaneScope lane(stream.id);  // a parallel kernel's join event goes to its lane
  const std::int64_t start = trace_now_ns();
  execute_untraced(task, stream, pool);
  trace_task(task_name(task), task.kind, task.object.get(), start, stream.id, 0, -1, -1);
}

void execute_untraced(Task& task, StreamState& stream, ComputePool& pool) {
  try {
    if (task.kind == TaskKind::kernel) {
      const ExecContext ctx(&pool, stream.num_threads);
      task.kernel->cpu(task.params.data(), task.params.size(), ctx);
    } else if (task.kind == TaskKind::work) {
      work_of(task.object.get()).run(task.hold, stream);  // a replay: CpuGraph::replay, run_graph
    } else {
      execute_builtin(task.kind, task.params.data(), task.object.get(), task.value,
                      WaitSite{&stream});
    }
  } catch (const std::exception& e) {
    stream.report_error(std::string("task '") + task_name(task) + "' failed: " + e.what());
  } catch (...) {
    stream.report_error(std::string("task '") + task_name(task) + "' failed: unknown exception");
  }
}

}  // namespace npugraph::detail
