// The backend seam: the small interface a device implements for the runtime (docs/backends.md).
//
// A backend provides memory (allocate, free, copies between host and device, memset), the in-order
// queue that runs a stream's tasks, and kernel dispatch (which slot of a KernelDef it runs). Its
// graph half — running an instantiated graph, installing updates — is graph/graph_backend.hpp.
// Capabilities are data: the runtime reads them where a feature is used, and a feature a backend
// lacks throws UnsupportedError naming the backend (require()). Which backend serves a device is
// the registry's business (backend_for, backends/registry.cpp); nothing outside backends/<name>/
// knows a backend's internals.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "npugraph/device.hpp"
#include "npugraph/kernel.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

struct StreamState;

struct BackendCaps {
  bool graphs = false;           // capture, instantiate, replay
  bool task_update = false;      // task groups and task update
  bool external_events = false;  // ExternalEvent record / wait / reset
  bool event_timing = false;     // Event{.enable_timing = true}, elapsed_time
};

enum class CopyKind : std::uint8_t { host_to_device, device_to_host, device_to_device };

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

  // Memory: blocks of device memory (host memory on the cpu backend), aligned to 64 bytes at least.
  // allocate returns null when the device is out of memory.
  virtual void* allocate(std::size_t nbytes) noexcept = 0;
  virtual void deallocate(void* p, std::size_t nbytes) noexcept = 0;
  // Synchronous copies and fills; their stream-ordered forms are tasks (copy_, fill_).
  virtual void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) = 0;
  virtual void memset(void* dst, int value, std::size_t nbytes) = 0;

  // The queue may keep only a weak reference to its owner (the owner owns the queue).
  virtual std::unique_ptr<StreamQueue> create_queue(const std::shared_ptr<StreamState>& owner) = 0;

  // Kernel dispatch: whether the kernel has an implementation for this backend's device kind.
  virtual bool has_kernel(const KernelDef& kernel) const noexcept = 0;
};

// The backend for `device`; throws UnsupportedError when this build has none, or when the machine
// lacks the device (cuda:N without a GPU; backends/registry.cpp).
Backend& backend_for(Device device);
// The backends this build has, by name ("cpu", and "cuda" when built with the toolkit).
std::span<const std::string_view> compiled_backends() noexcept;
// CUDA devices this machine has for the cuda backend (0 without a GPU, or in a build without it).
int cuda_device_count() noexcept;

// Throws UnsupportedError naming the backend when it lacks a capability: `what` names the feature
// and the call ("ExternalEvent::record"), `cap` is the BackendCaps member.
void require(const Backend& backend, bool BackendCaps::*cap, const char* what);

}  // namespace npugraph::detail
