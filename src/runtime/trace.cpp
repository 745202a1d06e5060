// The timeline recorder and the log switch (npugraph/trace.hpp).
#include "runtime/trace.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "npugraph/error.hpp"
#include "runtime/diagnostics.hpp"

namespace npugraph::detail {

std::atomic<bool> g_tracing{false};

namespace {

struct Recorder {
  std::mutex mu;
  bool on = false;  // guarded by mu (g_tracing mirrors it for the fast check)
  std::vector<TraceEvent> events;
  std::uint64_t dropped = 0;
  std::int64_t origin_ns = 0;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

void json_string(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

std::string lane_name(std::uint64_t lane) {
  if (lane >= kHelperLane) return "cpu compute helper " + std::to_string(lane - kHelperLane);
  return lane == 0 ? std::string("cpu default stream") : "cpu stream " + std::to_string(lane);
}

std::string to_json(const std::vector<TraceEvent>& events, std::uint64_t dropped, std::int64_t origin) {
  std::ostringstream os;
  os.precision(3);
  os << std::fixed << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"npugraph\",\"dropped\":"
     << dropped << "},\"traceEvents\":[\n";
  os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"npugraph\"}}";
  std::set<std::uint64_t> lanes;
  for (const TraceEvent& e : events) lanes.insert(e.stream);
  for (std::uint64_t lane : lanes)
    os << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << lane
       << ",\"args\":{\"name\":\"" << lane_name(lane) << "\"}}";
  for (const TraceEvent& e : events) {
    os << ",\n{\"name\":";
    json_string(os, e.name);
    os << ",\"cat\":\"" << e.category << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << e.stream
       << ",\"ts\":" << static_cast<double>(e.start_ns - origin) / 1000.0
       << ",\"dur\":" << static_cast<double>(e.duration_ns) / 1000.0 << ",\"args\":{";
    bool first = true;
    auto arg = [&](const char* k) -> std::ostringstream& {
      os << (first ? "" : ",") << '"' << k << "\":";
      first = false;
      return os;
    };
    if (e.graph) arg("graph") << e.graph;
    if (e.node >= 0) arg("task") << e.node;
    if (e.group >= 0) arg("task_group") << e.group;
    if (!e.detail.empty()) json_string(arg("detail"), e.detail);
    os << "}}";
  }
  os << "\n]}\n";
  return os.str();
}

std::atomic<int> g_log_level{-1};  // -1: not read from the environment yet

}  // namespace

void trace_event(TraceEvent event) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mu);
  if (!r.on) return;
  if (r.events.size() >= kMaxTraceEvents) {
    ++r.dropped;
    return;
  }
  r.events.push_back(std::move(event));
}

void log_line(LogLevel level, const std::string& message) {
  if (!log_on(level)) return;
  deliver_log("npugraph[" + std::string(level == LogLevel::debug ? "debug" : "info") + "]: " + message);
}

}  // namespace npugraph::detail

namespace npugraph {

void start_trace() {
  auto& r = detail::recorder();
  std::lock_guard lock(r.mu);
  NG_CHECK_STATE(!r.on, "start_trace: a trace is already being recorded (stop_trace ends it)");
  r.events.clear();
  r.dropped = 0;
  r.origin_ns = detail::trace_now_ns();
  r.on = true;
  detail::g_tracing.store(true, std::memory_order_relaxed);
}

std::string stop_trace() {
  auto& r = detail::recorder();
  std::vector<detail::TraceEvent> events;
  std::uint64_t dropped = 0;
  std::int64_t origin = 0;
  {
    std::lock_guard lock(r.mu);
    NG_CHECK_STATE(r.on, "stop_trace: no trace is being recorded (call start_trace first)");
    r.on = false;
    detail::g_tracing.store(false, std::memory_order_relaxed);
    events.swap(r.events);
    dropped = r.dropped;
    origin = r.origin_ns;
  }
  return detail::to_json(events, dropped, origin);
}

void stop_trace(const std::string& path) {
  const std::string json = stop_trace();
  std::ofstream out(path, std::ios::binary);
  NG_CHECK_ARG(out.good(), "stop_trace: path = '", path, "': cannot be opened for writing");
  out << json;
  NG_CHECK_ARG(out.good(), "stop_trace: path = '", path, "': writing failed");
}

bool tracing() { return detail::g_tracing.load(std::memory_order_relaxed); }

TraceScope::TraceScope(std::string path) : path_(std::move(path)), exceptions_(std::uncaught_exceptions()) {
  start_trace();
}

TraceScope::~TraceScope() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_) {
    try {
      stop_trace(path_);
    } catch (...) {
    }
    return;
  }
  stop_trace(path_);
}

void set_log_level(LogLevel level) { detail::g_log_level.store(static_cast<int>(level)); }

LogLevel log_level() {
  int level = detail::g_log_level.load(std::memory_order_relaxed);
  if (level >= 0) [[likely]]
    return static_cast<LogLevel>(level);
  const char* env = std::getenv("NPUGRAPH_LOG");
  const std::string v = env ? env : "";
  int parsed = 0;
  if (v == "info" || v == "1") parsed = 1;
  else if (v == "debug" || v == "2") parsed = 2;
  else if (!v.empty() && v != "off" && v != "0")
    std::fprintf(stderr, "npugraph: NPUGRAPH_LOG = '%s': must be off, info or debug (logging stays off)\n",
                 v.c_str());
  int expected = -1;
  detail::g_log_level.compare_exchange_strong(expected, parsed);
  return static_cast<LogLevel>(detail::g_log_level.load());
}

}  // namespace npugraph
