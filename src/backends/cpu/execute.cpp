// Running one task on the cpu backend (shared by stream queues and the graph executor).
#include <cstring>
#include <functional>

#include "backends/cpu/compute_pool.hpp"
#include "backends/cpu/execute.hpp"
#include "graph/exec_graph.hpp"
#include "graph/task_update.hpp"
#include "npugraph/error.hpp"
#include "runtime/stream_state.hpp"

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
    case TaskKind::graph_launch:
      run_graph(*static_cast<ExecGraph*>(object), TablePin(), LaunchTicket(), *site.stream, compute_pool());
      return true;
    case TaskKind::patch: apply_patch(*static_cast<Patch*>(object)); return true;
    case TaskKind::kernel: break;
  }
  NG_THROW(InternalError, "execute_builtin called for a kernel task");
}

void execute_task(Task& task, StreamState& stream, ComputePool& pool) {
  try {
    if (task.kind == TaskKind::kernel) {
      const ExecContext ctx(&pool, stream.num_threads);
      task.kernel->cpu(task.params.data(), task.params.size(), ctx);
    } else if (task.kind == TaskKind::graph_launch) {
      run_graph(*static_cast<ExecGraph*>(task.object.get()), std::move(task.pin), std::move(task.ticket),
                stream, pool);
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
