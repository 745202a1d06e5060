// The capture modes' rule for synchronizing calls (docs/semantics.md, Capture): while a capture
// runs, a synchronize from a thread the mode forbids invalidates it and throws.
#include <algorithm>
#include <atomic>
#include <sstream>
#include <vector>

#include "npugraph/error.hpp"
#include "runtime/stream_links.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail {
namespace {

// Captures in progress (guarded by runtime_mutex()); g_active mirrors the count for a lock-free
// fast path when none runs.
std::vector<CaptureLink*>& active_captures() {
  static std::vector<CaptureLink*> v;
  return v;
}
std::atomic<int> g_active{0};

const char* mode_name(CaptureMode m) {
  switch (m) {
    case CaptureMode::global: return "global";
    case CaptureMode::thread_local_: return "thread_local";
    case CaptureMode::relaxed: return "relaxed";
  }
  return "?";
}

}  // namespace

void register_capture(CaptureLink* capture) {
  active_captures().push_back(capture);
  g_active.store(static_cast<int>(active_captures().size()));
}

void unregister_capture(CaptureLink* capture) {
  std::erase(active_captures(), capture);
  g_active.store(static_cast<int>(active_captures().size()));
}

bool capture_active(const CaptureLink* capture) {
  const auto& v = active_captures();
  return capture && std::find(v.begin(), v.end(), capture) != v.end();
}

void check_sync_call(const char* call, const StreamState* target) {
  if (g_active.load(std::memory_order_acquire) == 0) return;
  RuntimeLock lock;
  const auto me = std::this_thread::get_id();
  std::vector<CaptureLink*> offended;
  std::string why;
  for (CaptureLink* c : active_captures()) {
    const bool on_capture = target && target->capture.get() == c;
    const bool bad = on_capture || c->mode == CaptureMode::global ||
                     (c->mode == CaptureMode::thread_local_ && c->thread == me);
    if (!bad) continue;
    offended.push_back(c);
    std::ostringstream os;
    if (on_capture)
      os << call << " on " << target->str() << ", which is capturing graph " << c->graph_id;
    else
      os << call << " while graph " << c->graph_id << " is being captured in " << mode_name(c->mode)
         << " mode";
    if (why.empty()) why = os.str();
    if (c->invalid.empty()) c->invalid = os.str();
  }
  if (!offended.empty())
    NG_THROW(StateError, why,
             " is not allowed: the capture is invalidated (capture_end will discard it). Synchronize "
             "before capture_begin, or capture with mode 'relaxed' / 'thread_local' if this call is "
             "safe");
}

}  // namespace npugraph::detail
