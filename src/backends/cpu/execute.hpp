// Running one task on the cpu backend (shared by stream queues and the graph executor).
#pragma once

#include "runtime/sync_objects.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

class ComputePool;
struct StreamState;

// Runs a task that is not a kernel (fill, copy, host function, events, work: a replay).
// Returns false when it gave up (a cancelled ExternalEvent wait): the rest of a replay is skipped.
bool execute_builtin(TaskKind kind, const std::byte* params, void* object, std::uint64_t value,
                     const WaitSite& site);
// Runs any task; an exception from it becomes the stream's pending error. Recorded in the timeline
// while a trace runs (npugraph/trace.hpp).
void execute_task(Task& task, StreamState& stream, ComputePool& pool);
void execute_untraced(Task& task, StreamState& stream, ComputePool& pool);
// Appends a task that began at start_ns and ends now to the timeline (graph/node/group: -1 or 0
// when not a replayed task).
void trace_task(const char* name, TaskKind kind, const void* object, std::int64_t start_ns,
                std::uint64_t stream, std::uint64_t graph, std::int32_t node, std::int32_t group);

struct ExecGraph;
class TablePin;
class LaunchTicket;
// Runs one replay of `graph` (CpuGraph::replay) on the calling stream worker, in its turn (Note
// [Replay order]), with the launch table pinned at launch (`pin` and `ticket` empty: a graph
// launched by a graph's node, which pins now and takes no turn).
void run_graph(ExecGraph& graph, TablePin pin, LaunchTicket ticket, StreamState& stream,
               ComputePool& pool);

}  // namespace npugraph::detail
