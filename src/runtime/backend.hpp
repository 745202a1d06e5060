// The backend interface: what a device must provide for the runtime (DESIGN §5).
//
// A backend owns the in-order execution of a stream's tasks and its memory; everything about
// capture, task groups and updates is device-independent and lives in the runtime. Capabilities
// are data: a feature a backend lacks throws UnsupportedError naming the backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "npugraph/device.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

struct StreamState;

struct BackendCaps {
  bool graphs = false;
  bool task_update = false;
  bool external_events = false;
  bool event_timing = false;
};

// A stream's in-order queue on a device.
class StreamQueue {
 public:
  virtual ~StreamQueue() = default;
  virtual void submit(Task&& task) = 0;
  // Number of tasks submitted so far.
  virtual std::uint64_t submitted() const = 0;
  virtual std::uint64_t completed() const = 0;
  // Blocks until `target` tasks have completed or `deadline` passes; returns whether they did.
  virtual bool wait_completed(std::uint64_t target,
                              std::chrono::steady_clock::time_point deadline) = 0;
  // Runs what is queued, then stops accepting work (called when the stream is destroyed; may be
  // called on the queue's own worker thread, when a task held the stream's last reference).
  virtual void shutdown() noexcept = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual const BackendCaps& caps() const noexcept = 0;
  virtual int default_num_threads() const noexcept = 0;
  // The queue may keep only a weak reference to its owner (the owner owns the queue).
  virtual std::unique_ptr<StreamQueue> create_queue(const std::shared_ptr<StreamState>& owner) = 0;
};

// The backend for `device`; throws UnsupportedError when this build has none.
Backend& backend_for(Device device);

}  // namespace npugraph::detail
