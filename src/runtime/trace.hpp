// The recorder behind npugraph/trace.hpp: what the executors and the host paths call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "npugraph/trace.hpp"

namespace npugraph::detail {

extern std::atomic<bool> g_tracing;
inline bool tracing_on() { return g_tracing.load(std::memory_order_relaxed); }

inline std::int64_t trace_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TraceEvent {
  const char* name = "";        // static storage: a kernel or task-kind name
  const char* category = "";    // "kernel", "task", "graph", "update", "host"
  std::int64_t start_ns = 0, duration_ns = 0;
  std::uint64_t stream = 0;     // the lane (0: the default stream; host events: the caller's stream)
  std::uint64_t graph = 0;      // replayed tasks and updates: the graph id
  std::int32_t node = -1;       // replayed tasks: the task number
  std::int32_t group = -1;      // replayed tasks: the task group
  std::string detail;           // ExternalEvent name, group count, ...
};

// Appends one event (while tracing; a no-op after stop).
void trace_event(TraceEvent event);

// Note [Pool events in the trace]
// A parallel kernel's time includes its join: the owner, out of chunks to claim, waiting in
// ComputePool::retire() for helpers still in their last chunk. While tracing, that wait is an
// event of its own (category "join", nested in the kernel's event on the kernel's stream lane:
// t_trace_lane, which the executors set around each traced task), and every stretch a helper
// spends inside a job is one (category "helper", name "help", on the helper's own lane,
// kHelperLane + its index), so a timeline shows the joins and the helpers' idle time; bench_profile
// sums them per decode step (bench/profile).
inline constexpr std::uint64_t kHelperLane = std::uint64_t{1} << 62;
inline thread_local std::uint64_t t_trace_lane = 0;

// Sets this thread's lane for pool events while a traced task runs; restores the previous one.
class TraceLaneScope {
 public:
  explicit TraceLaneScope(std::uint64_t lane) : saved_(t_trace_lane) { t_trace_lane = lane; }
  ~TraceLaneScope() { t_trace_lane = saved_; }
  TraceLaneScope(const TraceLaneScope&) = delete;
  TraceLaneScope& operator=(const TraceLaneScope&) = delete;

 private:
  std::uint64_t saved_;
};

// Logging (LogLevel in npugraph/trace.hpp).
inline bool log_on(LogLevel level) { return static_cast<int>(log_level()) >= static_cast<int>(level); }
void log_line(LogLevel level, const std::string& message);

}  // namespace npugraph::detail
