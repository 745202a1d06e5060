#include "runtime/diagnostics.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "npugraph/external_event.hpp"

namespace npugraph::detail {
namespace {

using clock = std::chrono::steady_clock;

const char* kind_name(DiagnosticKind kind) {
  return kind == DiagnosticKind::collapsed_record ? "collapsed-record" : "stalled-wait";
}

// Per kind: how many were printed, how many were held back since the last summary, and when the
// last line went out (Note [Diagnostic rate]).
struct Throttle {
  std::uint64_t printed = 0;
  std::uint64_t held = 0;
  clock::time_point last{};
};

struct Diagnostics {
  std::mutex mu;
  DiagnosticHandler handler;
  std::array<Throttle, 2> throttles;
  std::atomic<std::uint64_t> collapsed{0};

  ~Diagnostics() {  // at exit: say what was never printed
    for (std::size_t k = 0; k < throttles.size(); ++k)
      if (throttles[k].held)
        std::fprintf(stderr, "npugraph: %llu more %s diagnostics were not printed\n",
                     static_cast<unsigned long long>(throttles[k].held),
                     kind_name(static_cast<DiagnosticKind>(k)));
  }
};

Diagnostics& diagnostics() {
  static Diagnostics d;
  return d;
}

}  // namespace

void deliver_log(const std::string& message) {
  DiagnosticHandler handler;
  {
    std::lock_guard lock(diagnostics().mu);
    handler = diagnostics().handler;
  }
  if (handler) {
    try {
      handler(message);
    } catch (...) {
    }
    return;
  }
  std::fprintf(stderr, "%s\n", message.c_str());
}

void count_collapsed_record() { diagnostics().collapsed.fetch_add(1, std::memory_order_relaxed); }

void diagnose(DiagnosticKind kind, const std::string& message) {
  Diagnostics& d = diagnostics();
  DiagnosticHandler handler;
  std::uint64_t summary = 0;
  {
    std::lock_guard lock(d.mu);
    handler = d.handler;  // called unlocked: it may set another handler
    if (!handler) {
      Throttle& t = d.throttles[static_cast<std::size_t>(kind)];
      const auto now = clock::now();
      if (t.printed < static_cast<std::uint64_t>(kFirstPrinted)) {
        ++t.printed;
        t.last = now;
      } else if (now - t.last < kSummaryEvery) {
        ++t.held;
        return;
      } else {
        summary = t.held;
        t.held = 0;
        t.last = now;
      }
    }
  }
  if (handler) {
    try {
      handler(message);
    } catch (...) {
    }
    return;
  }
  if (summary)
    std::fprintf(stderr, "npugraph: (%llu more %s diagnostics in the last %lld s were not printed)\n",
                 static_cast<unsigned long long>(summary), kind_name(kind),
                 static_cast<long long>(kSummaryEvery.count()));
  std::fprintf(stderr, "npugraph: %s\n", message.c_str());
}

}  // namespace npugraph::detail

namespace npugraph {

void set_diagnostic_handler(DiagnosticHandler handler) {
  auto& d = detail::diagnostics();
  std::lock_guard lock(d.mu);
  d.handler = std::move(handler);
}

std::uint64_t total_collapsed_records() {
  return detail::diagnostics().collapsed.load(std::memory_order_relaxed);
}

}  // namespace npugraph
