// An instantiated graph: a compact, topologically ordered node table the executor walks, the task
// groups' current parameter blocks, and the pool that keeps its memory alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graph/graph_def.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

class ComputePool;
class MemPool;
struct StreamState;

// A group's parameter blocks, one per task. Immutable once published: an update builds a new set.
struct ParamSet {
  std::vector<ParamBytes> params;
};

struct GroupSlot {
  std::vector<std::uint32_t> nodes;  // exec node indices, in group order
  std::vector<const KernelDef*> kernels;
  std::shared_ptr<const ParamSet> captured;  // what capture recorded: updates are checked against it
  std::atomic<std::shared_ptr<const ParamSet>> current;
  // The stream updating it; guarded by runtime_mutex(). A stream abandons its update before it dies.
  StreamState* updater = nullptr;
};

struct ExecNode {
  KernelFn fn = nullptr;               // kernel nodes
  const std::byte* params = nullptr;   // into the graph's parameter arena (non-group nodes)
  std::uint32_t param_size = 0;
  TaskKind kind = TaskKind::kernel;
  bool single_pred = false;            // exactly one predecessor: no counter needed
  std::int32_t group = -1;
  std::uint32_t group_pos = 0;
  std::uint32_t succ_begin = 0, succ_end = 0;
  std::int32_t counter = -1;           // index of its pending counter (nodes with >1 predecessor)
  void* object = nullptr;              // events, host functions (owned by ExecGraph::objects)
  std::uint64_t value = 0;
};

struct RunState;

struct ExecGraph {
  ~ExecGraph();
  std::string describe(std::uint32_t node) const;  // "task #3 'add'"
  std::string dot() const;
  std::uint64_t graph_id = 0;
  std::vector<ExecNode> nodes;        // in topological order
  std::vector<std::uint32_t> succ;    // successor lists, indexed by ExecNode::succ_begin/end
  std::vector<std::uint32_t> sources;
  std::vector<std::int32_t> counter_init;  // predecessor counts of multi-predecessor nodes
  std::uint32_t sinks = 0;
  std::unique_ptr<std::byte[]> arena;
  std::vector<std::shared_ptr<void>> objects;
  std::vector<const char*> names;     // per node: kernel or task-kind name
  std::vector<std::uint64_t> stream_ids;  // per node: the stream it was captured on
  std::vector<std::unique_ptr<GroupSlot>> groups;
  std::shared_ptr<MemPool> pool;      // keeps captured memory valid while replays may run

  // Reusable per-replay state (concurrent replays each take one).
  std::mutex runs_mu;
  std::vector<std::unique_ptr<RunState>> free_runs;
};

std::shared_ptr<ExecGraph> instantiate(const GraphDefData& def, std::uint64_t graph_id,
                                       std::shared_ptr<MemPool> pool);

// Task payloads executed by the backend.
struct Patch {
  std::shared_ptr<ExecGraph> graph;
  std::uint32_t group;
  std::shared_ptr<const ParamSet> params;
};
void apply_patch(Patch& patch);
// Runs one replay of `graph` (the object of a graph_launch task) on the calling stream worker.
void run_graph(ExecGraph& graph, StreamState& stream, ComputePool& pool);

}  // namespace npugraph::detail
