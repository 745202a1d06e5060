// The state behind a Graph (NPUGraph) and behind task-group handles.
#pragma once

#include <cstdint>
#include <memory>

#include "graph/exec_graph.hpp"
#include "npugraph/graph.hpp"
#include "npugraph/memory.hpp"

namespace npugraph::detail {

struct CaptureState;

// Guarded by runtime_mutex().
struct GraphCore {
  std::uint64_t id = 0;
  Graph::State state = Graph::State::empty;
  // Bumped by reset() and by a failed capture: handles from an older generation are stale.
  std::uint64_t generation = 0;
  std::shared_ptr<CaptureState> capture;
  std::shared_ptr<ExecGraph> exec;
  PoolHandle pool;
};

struct GroupRef {
  std::weak_ptr<GraphCore> core;
  std::uint64_t generation = 0;
  std::uint32_t group = 0;
  std::uint32_t num_tasks = 0;
  std::uint64_t graph_id = 0;
};

// Resolves a handle to its executable graph; throws naming why it cannot be used. Lock held.
std::shared_ptr<ExecGraph> resolve_group(const GroupRef& ref, const char* call,
                                         std::shared_ptr<GraphCore>* core_out = nullptr);

}  // namespace npugraph::detail
