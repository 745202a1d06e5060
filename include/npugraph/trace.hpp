// Seeing what ran: a Chrome-trace timeline and a logging switch.
//
// Timeline: between start_trace() and stop_trace(), every task a stream runs is recorded — eager
// kernels and built-in tasks, each task of a replayed graph (with its graph id, task number and
// task group), ExternalEvent waits (their names, and how long they blocked), stream-ordered update
// installs, on the host: replay launches and task updates, and the cpu compute pool's joins (a
// parallel kernel's owner waiting for helpers, category "join") and helpers' work (category
// "helper", one lane per helper). stop_trace() gives Chrome's trace
// event JSON (one lane per stream; open it in https://ui.perfetto.dev or chrome://tracing).
// Recording costs one clock read and one append per task while on, one relaxed load while off.
// At most kMaxTraceEvents are kept (later ones are counted in the "dropped" metadata).
//
// Logging: set_log_level(LogLevel::info), or NPUGRAPH_LOG=info in the environment (read once, at
// the first query), prints one line per capture begin/end, graph instantiation, task update and
// stall to stderr (or to the diagnostic handler, set_diagnostic_handler). LogLevel::debug adds
// replay launches. Default: off.
#pragma once

#include <cstddef>
#include <string>

namespace npugraph {

inline constexpr std::size_t kMaxTraceEvents = 1 << 20;

// Begins recording (discarding an earlier recording). StateError if a recording is running.
void start_trace();
// Ends the recording and returns it as Chrome trace JSON. StateError if none is running.
std::string stop_trace();
// The same, written to `path` (ArgumentError naming it if it cannot be written).
void stop_trace(const std::string& path);
bool tracing();

// Records into `path` for the scope's life (start_trace / stop_trace(path); an exception leaving
// the scope still writes the file, and a write error is then swallowed).
class TraceScope {
 public:
  explicit TraceScope(std::string path);
  ~TraceScope() noexcept(false);
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  std::string path_;
  int exceptions_;
};

enum class LogLevel { off = 0, info = 1, debug = 2 };
void set_log_level(LogLevel level);
// The level: set_log_level's, else NPUGRAPH_LOG's (off, info, debug; anything else: off, with a
// one-time warning naming the value).
LogLevel log_level();

}  // namespace npugraph
