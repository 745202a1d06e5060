// The graph half of the backend seam (docs/backends.md): how a device runs instantiated graphs.
//
// Instantiation builds the device-independent ExecGraph (node table, task groups, parameter sets,
// launch order) and asks the device's GraphBackend for its executable form: the cpu backend keeps
// reusable replay states and walks the node table on the stream's worker; the cuda backend builds
// a cudaGraphExec_t where it can (Note [CUDA graphs from the node table]). A replay is a task on a
// stream whose work is the ExecGraph (Note [Task work]): the device's queue accepts it (it takes its
// turn in the graph's launch order, Note [Replay order]) and runs it, and the ExecGraph hands the run
// to its executable form (replay()); a stream-ordered update is a patch task; a launch-ordered
// update publishes a launch table and tells the backend (published()).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "npugraph/device.hpp"

namespace npugraph::detail {

struct ExecGraph;
struct StreamState;
class TablePin;
class LaunchTicket;

// A device's executable form of one ExecGraph.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  // Runs one replay of `graph` on the worker of `stream` (a stream of the graph's device): in its
  // turn when `ticket` holds one, with the launch table pinned at launch when `pin` holds one (both
  // empty: a replay run by a graph's node, which pins now and takes no turn).
  virtual void replay(ExecGraph& graph, TablePin pin, LaunchTicket ticket, StreamState& stream) = 0;
  // Pairs of tasks that run as one (Note [Kernel fusion] in npugraph/kernel.hpp): for the log.
  virtual std::uint32_t fused_pairs() const { return 0; }
};

class GraphBackend {
 public:
  virtual ~GraphBackend() = default;
  virtual std::unique_ptr<BackendGraph> instantiate(ExecGraph& graph) = 0;
  // A launch-ordered update published new parameter sets for `groups`. The cpu and cuda backends
  // both read the launch table pinned by each replay (Note [CUDA replay binds sets]); a backend
  // that bakes parameters into its executable form would install them here.
  virtual void published(ExecGraph& graph, std::span<const std::uint32_t> groups) = 0;
};

// The graph backend for `device` (backends/registry.cpp); throws UnsupportedError when none.
GraphBackend& graph_backend_for(Device device);

}  // namespace npugraph::detail
