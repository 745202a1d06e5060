// What a capturing or updating stream hands its work to.
//
// Note [Stream modes]
// A stream is normal (its tasks go to its backend queue), capturing, or updating. A capturing or
// updating stream hands what is issued on it to the graph layer through the two interfaces below,
// so the runtime never sees a graph type (layers import one way: core <- runtime <- graph). The
// graph layer implements them (graph/capture.hpp, graph/task_update.hpp) and owns the per-stream
// fields it keeps in StreamState (frontier, open_group, update_owner, alloc_pool). Mode changes and
// everything these interfaces do run under runtime_mutex(), except an update's binds on the thread
// that began it (Note [Update binding]).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "npugraph/kernel.hpp"
#include "npugraph/stream.hpp"

namespace npugraph::detail {

struct StreamState;
struct EventState;
struct Task;
struct KeepAlive;

// One capture in progress; every stream taking part in it holds it.
class CaptureLink : public std::enable_shared_from_this<CaptureLink> {
 public:
  virtual ~CaptureLink() = default;
  // A task issued on a capturing stream: recorded as a graph node, or refused (throws).
  virtual void record(StreamState& stream, Task&& task) = 0;
  // Event::record on a capturing stream: the event marks the stream's current nodes.
  virtual void event_record(StreamState& stream, EventState& event) = 0;
  // Stream::wait on an event recorded in this capture, with the nodes it marked: a stream of the
  // capture depends on them; a normal stream joins the capture (fork).
  virtual void event_wait(const std::shared_ptr<StreamState>& stream,
                          const std::vector<std::uint32_t>& nodes) = 0;

  // Read by the capture-mode checks of synchronizing calls (check_sync_call).
  std::uint64_t graph_id = 0;
  CaptureMode mode = CaptureMode::global;
  std::thread::id thread;
  std::string invalid;  // why the capture was invalidated (empty: valid)
};

// One stream's task update in progress.
class UpdateLink {
 public:
  virtual ~UpdateLink() = default;
  // A kernel launch issued on the updating stream: bound to the next task of the group(s), or the
  // update fails (throws, abandoning it). `built`: the launch's KeepAlive when it was made already.
  // `vouch`: the capture state the launch passed back (Note [Capture state]), or null.
  virtual void bind(StreamState& stream, const KernelDef& kernel, std::span<const std::byte> params,
                    TensorUses uses, std::shared_ptr<KeepAlive> built, const void* vouch = nullptr) = 0;
  // Leaves update mode installing nothing (runtime_mutex() held).
  virtual void abandon(StreamState& stream) = 0;
  // The capture state of the task the next launch binds to, when it is a task of `kernel` (Note
  // [Capture state]); called by the thread that owns the update only.
  virtual const void* captured_state(const KernelDef& kernel) const = 0;
};

// Captures in progress (guarded by runtime_mutex()), for check_sync_call.
void register_capture(CaptureLink* capture);
void unregister_capture(CaptureLink* capture);
bool capture_active(const CaptureLink* capture);

// Synchronizing calls (synchronize, query, empty_cache) check the capture modes first; `target` is the
// stream the call acts on (null: the whole device). Throws StateError and invalidates the offending
// captures. Takes runtime_mutex() itself.
void check_sync_call(const char* call, const StreamState* target);

}  // namespace npugraph::detail
