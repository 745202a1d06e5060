// Capture: recording stream work into a graph instead of running it (docs/semantics.md, Capture).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "graph/graph_def.hpp"
#include "npugraph/graph.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

class MemPool;
struct GraphCore;
struct EventState;

// One capture (Note [Stream modes]): what its streams record, and who takes part.
struct CaptureState final : CaptureLink {
  std::weak_ptr<GraphCore> graph;
  std::shared_ptr<MemPool> pool;
  std::shared_ptr<StreamState> origin;
  std::vector<std::shared_ptr<StreamState>> streams;  // the origin and every stream that joined
  GraphDefData def;

  void record(StreamState& stream, Task&& task) override;
  void event_record(StreamState& stream, EventState& event) override;
  void event_wait(const std::shared_ptr<StreamState>& stream,
                  const std::vector<std::uint32_t>& nodes) override;
};

// The capture `stream` takes part in (it must be capturing).
inline CaptureState& capture_of(const StreamState& stream) {
  return static_cast<CaptureState&>(*stream.capture);
}

// All of these expect runtime_mutex() held.
void begin_capture(const std::shared_ptr<StreamState>& stream, const std::shared_ptr<GraphCore>& core,
                   const CaptureOptions& options);
// Ends the capture begun on `stream` and returns what it recorded; throws (and discards the capture)
// when it was invalidated, a group is open or work is unjoined.
GraphDefData end_capture(StreamState& stream, GraphCore& core);
// Discards the capture (every joined stream leaves capture mode).
void abandon_capture(CaptureState& capture);

}  // namespace npugraph::detail
