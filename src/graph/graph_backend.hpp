// The graph half of the backend seam (docs/backends.md): how a device runs instantiated graphs.
//
// Instantiation builds the device-independent ExecGraph (node table, task groups, parameter sets,
// launch order) and asks the device's GraphBackend for its executable form: the cpu backend keeps
// reusable replay states and walks the node table on the stream's worker; the cuda backend builds
// a cudaGraphExec_t where it can (Note [CUDA graphs from the node table]). A replay is a graph_launch task on a stream, which the device's queue runs in
// the graph's launch order (Note [Replay order]); a stream-ordered update is a patch task; a
// launch-ordered update publishes a launch table and tells the backend (published()).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "npugraph/device.hpp"

namespace npugraph::detail {

struct ExecGraph;

// A device's executable form of one ExecGraph.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
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
