// Streams: asynchronous in-order queues of work on a device (docs/semantics.md §1).
//
// `Stream` is a small copyable handle (copies name the same queue). Every thread has a current stream
// per device, initially the device's default stream; StreamGuard changes it for a scope.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "npugraph/device.hpp"

namespace npugraph {

class Event;
namespace detail { struct StreamState; }

// As CUDA: who may not make synchronizing calls while a capture runs (graph.hpp: capture_begin).
enum class CaptureMode {
  global,         // no thread may synchronize while any global capture runs
  thread_local_,  // the capturing thread may not synchronize
  relaxed,        // no check
};

struct StreamOptions {
  int num_threads = 0;  // compute threads a kernel on this stream may plan for; 0: the machine's cores
};

class Stream {
 public:
  // A new stream with its own in-order queue.
  static Stream create(Device device = Device::cpu(), StreamOptions options = {});
  // The device's default stream (id 0). Capture on it is an error.
  static Stream default_stream(Device device = Device::cpu());

  Device device() const;
  std::uint64_t id() const;
  bool is_default() const { return id() == 0; }
  int num_threads() const;

  // Blocks until all work issued so far has run. Throws the first error a task raised since the last
  // synchronize (TaskError naming the task); throws TimeoutError when the stream is stalled in an
  // ExternalEvent wait past its deadline, or when `timeout` elapses first.
  void synchronize() const;
  void synchronize(std::chrono::milliseconds timeout) const;
  // True when all work issued so far has run (a synchronizing call for capture modes).
  bool query() const;
  // Orders this stream after the event's most recent record (wait_event).
  void wait(const Event& event) const;
  // Orders this stream after all work issued so far on `other` (wait_stream).
  void wait(const Stream& other) const;

  bool is_capturing() const;
  bool is_updating() const;
  // While capturing: a value that changes whenever the capture records something the stream's next
  // task would follow (a task, an event record or wait on this stream); equal values mean nothing
  // was recorded on the stream in between, so a host task recorded last may be extended instead of
  // followed (the Python torch-op recorder batches consecutive ops so). 0 when not capturing.
  std::uint64_t capture_mark() const;
  std::string str() const;  // "cpu stream 3"

  friend bool operator==(const Stream& a, const Stream& b) { return a.state_ == b.state_; }
  const std::shared_ptr<detail::StreamState>& impl() const { return state_; }
  explicit Stream(std::shared_ptr<detail::StreamState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<detail::StreamState> state_;
};

Stream current_stream(Device device = Device::cpu());
// The same without a copy, for hot paths (an op's launch): a reference to this thread's current
// stream, valid until this thread calls set_current_stream, a StreamGuard of it ends, or (for a
// CUDA device other than the current CUDA stream's) current_stream_ref is called again. Copying a
// Stream changes a reference count shared with the stream's worker thread, and the atomic
// operation also waits for every store before it (an op has just written its parameter block).
const Stream& current_stream_ref(Device device = Device::cpu());
void set_current_stream(const Stream& stream);

// Makes `stream` current for its device for the guard's scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// Blocks until every stream of the device is idle; rethrows the first pending task error.
void device_synchronize(Device device = Device::cpu());

// How many devices of `type` this process can use: 1 for the cpu; for cuda the GPUs the CUDA runtime
// reports, 0 when the library was built without the CUDA backend or no GPU or driver is present.
int device_count(DeviceType type) noexcept;

}  // namespace npugraph
