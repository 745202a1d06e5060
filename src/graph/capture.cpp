#include "graph/capture.hpp"

#include <algorithm>

#include "runtime/mem_pool.hpp"
#include "graph/graph_core.hpp"
#include "graph/task_update.hpp"
#include "npugraph/error.hpp"
#include "runtime/sync_objects.hpp"

namespace npugraph::detail {
namespace {

std::atomic<std::uint64_t> g_capture_marks{0};

void new_capture_mark(StreamState& s) {
  s.capture_mark.store(g_capture_marks.fetch_add(1, std::memory_order_relaxed) + 1,
                       std::memory_order_release);
}

void leave_capture(StreamState& s) {
  s.mode.store(StreamMode::normal, std::memory_order_release);
  new_capture_mark(s);
  defer_release(std::move(s.capture));  // the capture holds streams: never destroy it locked
  defer_release(std::move(s.alloc_pool));
  s.frontier.clear();
  s.open_group = -1;
}

// Every joined stream leaves capture mode. A failed capture makes the handles it issued stale.
void finish(CaptureState& c, bool success = false) {
  for (auto& s : c.streams) leave_capture(*s);
  unregister_capture(&c);
  if (auto core = c.graph.lock()) {
    defer_release(std::move(core->capture));
    core->state = Graph::State::empty;
    core->pool = PoolHandle();
    if (!success) ++core->generation;
  }
}

void check_capture_valid(const CaptureState& c, const StreamState& s, const char* what) {
  NG_CHECK_STATE(c.invalid.empty(), what, " on ", s.str(), ": the capture of graph ", c.graph_id,
                 " was invalidated (", c.invalid, "); end it with capture_end, which discards it");
}

}  // namespace

void begin_capture(const std::shared_ptr<StreamState>& stream, const std::shared_ptr<GraphCore>& core,
                   const CaptureOptions& options) {
  StreamState& s = *stream;
  require(s.backend, &BackendCaps::graphs, "capture_begin");
  // "NPU graphs must be captured on a non-default stream." is torch_npu's text, which its tests match.
  NG_CHECK_STATE(s.id != 0, "capture_begin: cannot capture ", s.str(),
                 ": NPU graphs must be captured on a non-default stream. Capture on a side stream "
                 "(CaptureScope makes one current for you, or use Stream::create() with a StreamGuard)");
  NG_CHECK_STATE(s.mode.load() != StreamMode::capturing, "capture_begin: ", s.str(),
                 " is already capturing (graph ", s.capture ? s.capture->graph_id : 0,
                 "); end that capture first");
  NG_CHECK_STATE(s.mode.load() != StreamMode::updating, "capture_begin: ", s.str(),
                 " is in task-update mode; call task_update_end first");
  NG_CHECK_STATE(core->state == Graph::State::empty, "capture_begin: graph ", core->id, " is ",
                 core->state == Graph::State::ready ? "already captured; reset() it first"
                                                    : "already capturing");
  if (options.pool.defined())
    NG_CHECK_ARG(options.pool.impl()->device() == s.device, "capture_begin: pool = ",
                 options.pool.id(), ": belongs to ", options.pool.impl()->device().str(),
                 ", the stream to ", s.device.str());
  auto c = std::make_shared<CaptureState>();
  c->graph_id = core->id;
  c->mode = options.mode;
  c->thread = std::this_thread::get_id();
  c->graph = core;
  c->pool = options.pool.defined() ? options.pool.impl() : std::make_shared<MemPool>(s.device, true);
  c->origin = stream;
  c->streams.push_back(stream);
  s.capture = c;
  s.alloc_pool = c->pool;
  s.frontier.clear();
  s.open_group = -1;
  new_capture_mark(s);
  s.mode.store(StreamMode::capturing, std::memory_order_release);
  register_capture(c.get());
  core->state = Graph::State::capturing;
  core->capture = c;
  core->pool = PoolHandle(c->pool);
}

GraphDefData end_capture(StreamState& s, GraphCore& core) {
  NG_CHECK_STATE(core.capture != nullptr, "capture_end: graph ", core.id, " is not capturing");
  std::shared_ptr<CaptureState> c = core.capture;
  NG_CHECK_STATE(c->origin.get() == &s, "capture_end: the capture of graph ", c->graph_id,
                 " began on ", c->origin->str(), "; end it there, not on ", s.str());
  if (!c->invalid.empty()) {
    const std::string why = c->invalid;
    finish(*c);
    NG_THROW(StateError, "capture_end: the capture of graph ", c->graph_id,
             " was invalidated and is discarded: ", why);
  }
  for (auto& js : c->streams) {
    if (js->open_group >= 0) {
      const std::string where = js->str();
      finish(*c);
      NG_THROW(StateError, "capture_end: a task group is still open on ", where,
               ": call task_group_end(stream) before capture_end; the capture is discarded");
    }
  }
  // Unjoined work: every recorded task must be an ancestor of (or be) the origin's last tasks.
  const auto& nodes = c->def.nodes;
  std::vector<char> reached(nodes.size(), 0);
  std::vector<std::uint32_t> stack(s.frontier.begin(), s.frontier.end());
  while (!stack.empty()) {
    const std::uint32_t n = stack.back();
    stack.pop_back();
    if (reached[n]) continue;
    reached[n] = 1;
    for (std::uint32_t d : nodes[n].deps) stack.push_back(d);
  }
  for (std::uint32_t n = 0; n < nodes.size(); ++n) {
    if (reached[n]) continue;
    std::string stream_name = "stream " + std::to_string(nodes[n].stream_id);
    for (auto& js : c->streams)
      if (js->id == nodes[n].stream_id) stream_name = js->str();
    const std::string what = c->def.describe(n);
    finish(*c);
    NG_THROW(StateError, "capture_end: unjoined work: ", what, " on ", stream_name,
             " is not joined back into ", s.str(), " (record an event on ", stream_name,
             " and make ", s.str(), " wait on it before capture_end); the capture is discarded");
  }
  GraphDefData def = std::move(c->def);
  finish(*c, /*success=*/true);
  return def;
}

void abandon_capture(CaptureState& capture) { finish(capture); }

void CaptureState::record(StreamState& s, Task&& task) {
  CaptureState& c = *this;
  check_capture_valid(c, s, task_name(task));
  NG_CHECK_STATE(s.open_group < 0 || task.kind == TaskKind::kernel, "task group on ", s.str(),
                 ": only kernel launches may be issued inside a task group; '", task_name(task),
                 "' was not recorded (the capture is still valid)");
  Node node;
  node.task = std::move(task);
  node.task.hold.reset();  // a captured replay pins the launch table when it runs
  node.deps = s.frontier;
  node.stream_id = s.id;
  node.group = s.open_group;
  const std::uint32_t id = c.def.add(std::move(node));
  s.frontier.assign(1, id);
  new_capture_mark(s);
  if (s.open_group >= 0) c.def.groups[static_cast<std::size_t>(s.open_group)].push_back(id);
}

void CaptureState::event_record(StreamState& s, EventState& event) {
  CaptureState& c = *this;
  check_capture_valid(c, s, "Event::record");
  NG_CHECK_STATE(s.open_group < 0, "task group on ", s.str(),
                 ": only kernel launches may be issued inside a task group; 'event_record' was not "
                 "recorded (the capture is still valid)");
  new_capture_mark(s);
  std::lock_guard lock(event.mu);
  event.captured = true;
  event.capture = s.capture;
  event.captured_nodes = s.frontier;
}

void CaptureState::event_wait(const std::shared_ptr<StreamState>& stream,
                              const std::vector<std::uint32_t>& nodes) {
  StreamState& s = *stream;
  const auto capture = std::static_pointer_cast<CaptureState>(shared_from_this());
  check_capture_valid(*capture, s, "Stream::wait(event)");
  switch (s.mode.load()) {
    case StreamMode::updating:
      check_update_owner(s, "Stream::wait(event)");
      fail_update(s, cat("task update on ", s.str(), ": only kernel launches may be issued while "
                         "updating; 'event_wait' is not a kernel launch"));
    case StreamMode::normal:  // fork: the stream joins the capture
      NG_CHECK_STATE(s.id != 0, "Stream::wait(event): ", s.str(),
                     " cannot join a capture (its work would be recorded into the graph for every "
                     "thread); fork onto a stream made with Stream::create()");
      s.capture = capture;
      s.alloc_pool = capture->pool;
      s.frontier = nodes;
      s.open_group = -1;
      new_capture_mark(s);
      s.mode.store(StreamMode::capturing, std::memory_order_release);
      capture->streams.push_back(stream);
      return;
    case StreamMode::capturing:
      NG_CHECK_STATE(s.capture == capture, "Stream::wait(event) on ", s.str(),
                     ": the stream captures graph ", s.capture->graph_id,
                     " but the event was recorded in the capture of graph ", capture->graph_id);
      NG_CHECK_STATE(s.open_group < 0, "task group on ", s.str(),
                     ": only kernel launches may be issued inside a task group; 'event_wait' was "
                     "not recorded (the capture is still valid)");
      for (std::uint32_t n : nodes)
        if (std::find(s.frontier.begin(), s.frontier.end(), n) == s.frontier.end())
          s.frontier.push_back(n);
      new_capture_mark(s);
      return;
  }
}

}  // namespace npugraph::detail
