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

// Logging (LogLevel in npugraph/trace.hpp).
inline bool log_on(LogLevel level) { return static_cast<int>(log_level()) >= static_cast<int>(level); }
void log_line(LogLevel level, const std::string& message);

}  // namespace npugraph::detail
