// The graph half of the backend seam (docs/backends.md): how a device runs instantiated graphs.
//
// Instantiation builds the device-independent ExecGraph (node table, task groups, parameter sets,
// launch order) and asks the device's GraphBackend for its executable form: the cpu backend keeps
// reusable replay states and walks the node table on the stream's worker; a CUDA backend would build
// a cudaGraphExec_t. A replay is a graph_launch task on a stream, which the device's queue runs in
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
  // A launch-ordered update published new parameter sets for `groups` (a CUDA backend sets the
  // kernel nodes' parameters here); the cpu backend reads the launch table at each replay.
  virtual void published(ExecGraph& graph, std::span<const std::uint32_t> groups) = 0;
};

// The graph backend for `device` (backends/registry.cpp); throws UnsupportedError when none.
GraphBackend& graph_backend_for(Device device);

}  // namespace npugraph::detail
