// Capture: recording stream work into a graph instead of running it (DESIGN §3.3).
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

struct CaptureState {
  std::uint64_t graph_id = 0;
  CaptureMode mode = CaptureMode::global;
  std::thread::id thread;
  std::weak_ptr<GraphCore> graph;
  std::shared_ptr<MemPool> pool;
  std::shared_ptr<StreamState> origin;
  std::vector<std::shared_ptr<StreamState>> streams;  // the origin and every stream that joined
  GraphDefData def;
  std::string invalid;  // why the capture was invalidated (empty: valid)
};

// All of these expect runtime_mutex() held.
const std::shared_ptr<MemPool>& capture_pool(const CaptureState& capture);
void begin_capture(const std::shared_ptr<StreamState>& stream, const std::shared_ptr<GraphCore>& core,
                   const CaptureOptions& options);
// Ends the capture begun on `stream` and returns what it recorded; throws (and discards the capture)
// when it was invalidated, a group is open or work is unjoined.
GraphDefData end_capture(StreamState& stream, GraphCore& core);
// Discards the capture `stream` takes part in (every joined stream leaves capture mode).
void abandon_capture(CaptureState& capture);
// Records a task issued on a capturing stream.
void record_task(StreamState& stream, Task&& task);
// Event record / wait seen by a capturing stream (edges, not tasks).
void capture_event_record(StreamState& stream, EventState& event);
void capture_event_wait(const std::shared_ptr<StreamState>& stream,
                        const std::shared_ptr<CaptureState>& capture,
                        const std::vector<std::uint32_t>& nodes);

// Synchronizing calls (synchronize, query, empty_cache) check the capture modes first; `target` is the
// stream the call acts on (null: the whole device). Throws and invalidates the offending captures.
// Takes runtime_mutex() itself.
void check_sync_call(const char* call, const StreamState* target);

}  // namespace npugraph::detail
