#include "npugraph/graph.hpp"

#include <atomic>
#include <exception>
#include <fstream>

#include "runtime/mem_pool.hpp"
#include "graph/graph_core.hpp"
#include "npugraph/error.hpp"
#include "graph/capture.hpp"
#include "runtime/issue.hpp"
#include "runtime/trace.hpp"

namespace npugraph {

using detail::runtime_mutex;
using detail::state_of;

namespace {
std::atomic<std::uint64_t> g_next_graph_id{1};

// For the instantiation's log line (Note [Kernel fusion] in npugraph/kernel.hpp).
std::string fused_note(const detail::ExecGraph& g) {
  const std::uint32_t pairs = g.backend ? g.backend->fused_pairs() : 0;
  return pairs ? detail::cat(", ", pairs, " pair(s) of kernels fused") : std::string();
}
}  // namespace

CaptureMode parse_capture_mode(const std::string& name) {
  if (name == "global") return CaptureMode::global;
  if (name == "thread_local") return CaptureMode::thread_local_;
  if (name == "relaxed") return CaptureMode::relaxed;
  NG_THROW(ArgumentError, "capture_error_mode = '", name,
           "': must be 'global', 'thread_local' or 'relaxed'");
}

// ---- GraphDef ---------------------------------------------------------------------------------

GraphDef::GraphDef() : data_(std::make_unique<detail::GraphDefData>()) {}
GraphDef::~GraphDef() = default;
GraphDef::GraphDef(GraphDef&&) noexcept = default;
GraphDef& GraphDef::operator=(GraphDef&&) noexcept = default;

GraphDef::NodeId GraphDef::add_kernel(const KernelDef& kernel, std::span<const std::byte> params,
                                      std::span<const NodeId> deps) {
  NG_CHECK_ARG(kernel.name != nullptr, "GraphDef::add_kernel: kernel.name = null: every kernel needs a name");
  NG_CHECK_ARG(detail::backend_for(Device::cpu()).has_kernel(kernel), "GraphDef::add_kernel: kernel '",
               kernel.name, "' has no implementation for the cpu backend");
  detail::Node node;
  node.task.kind = detail::TaskKind::kernel;
  node.task.kernel = &kernel;
  node.task.params.assign(params);
  node.deps.assign(deps.begin(), deps.end());
  return data_->add(std::move(node));
}

GraphDef::NodeId GraphDef::add_host(std::function<void()> fn, std::span<const NodeId> deps) {
  NG_CHECK_ARG(static_cast<bool>(fn), "GraphDef::add_host: fn is empty");
  detail::Node node;
  node.task.kind = detail::TaskKind::host_fn;
  node.task.object = std::make_shared<std::function<void()>>(std::move(fn));
  node.deps.assign(deps.begin(), deps.end());
  return data_->add(std::move(node));
}

std::size_t GraphDef::size() const { return data_->nodes.size(); }

GraphExec GraphDef::instantiate() const {
  return GraphExec(detail::instantiate(*data_, g_next_graph_id.fetch_add(1), nullptr, Device::cpu()));
}

std::string GraphDef::dot() const { return data_->dot("graph"); }

// ---- GraphExec --------------------------------------------------------------------------------

void GraphExec::launch(const Stream& stream) const {
  NG_CHECK_STATE(exec_ != nullptr, "GraphExec::launch: empty executable graph");
  detail::Task task = detail::replay_task(exec_);
  detail::check_replay_device(*exec_, state_of(stream), "GraphExec::launch");
  detail::issue(state_of(stream), std::move(task));
}

std::size_t GraphExec::size() const { return exec_ ? exec_->nodes.size() : 0; }
std::string GraphExec::dot() const { return exec_ ? exec_->dot() : std::string("digraph {}\n"); }

// ---- Graph ------------------------------------------------------------------------------------

Graph::Graph() : core_(std::make_shared<detail::GraphCore>()) { core_->id = g_next_graph_id.fetch_add(1); }

Graph::~Graph() {
  if (!core_) return;
  detail::RuntimeLock lock;
  if (core_->capture) detail::abandon_capture(*core_->capture);
  detail::defer_release(std::move(core_->exec));
}

Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    if (core_) {
      detail::RuntimeLock lock;
      if (core_->capture) detail::abandon_capture(*core_->capture);
      detail::defer_release(std::move(core_->exec));
    }
    core_ = std::move(other.core_);
  }
  return *this;
}

void Graph::capture_begin(CaptureOptions options) { capture_begin(current_stream(), options); }

void Graph::capture_begin(const Stream& stream, CaptureOptions options) {
  NG_CHECK_STATE(core_ != nullptr, "capture_begin: moved-from graph");
  state_of(stream);
  detail::RuntimeLock lock;
  detail::begin_capture(stream.impl(), core_, options);
  if (detail::log_on(LogLevel::info))
    detail::log_line(LogLevel::info, detail::cat("graph ", core_->id, ": capture began on ", stream.str()));
}

void Graph::capture_end() { capture_end(current_stream()); }

void Graph::capture_end(const Stream& stream) {
  NG_CHECK_STATE(core_ != nullptr, "capture_end: moved-from graph");
  auto& s = state_of(stream);
  detail::GraphDefData def;  // declared before the lock: its tasks' objects die unlocked
  detail::RuntimeLock lock;
  NG_CHECK_STATE(core_->state == State::capturing && core_->capture, "capture_end: graph ", core_->id,
                 " is not capturing");
  auto pool = core_->capture->pool;
  def = detail::end_capture(s, *core_);
  try {
    core_->exec = detail::instantiate(def, core_->id, pool, pool->device());
  } catch (...) {
    ++core_->generation;  // the handles this capture issued name groups that do not exist
    throw;
  }
  core_->pool = PoolHandle(pool);
  core_->state = State::ready;
  if (detail::log_on(LogLevel::info))
    detail::log_line(LogLevel::info, detail::cat("graph ", core_->id, ": capture ended on ", s.str(), ": ",
                                                 core_->exec->nodes.size(), " task(s), ",
                                                 core_->exec->groups.size(), " task group(s), instantiated",
                                                 fused_note(*core_->exec)));
}

void Graph::replay() const { replay(current_stream()); }

void Graph::replay(const Stream& stream) const {
  std::shared_ptr<detail::ExecGraph> exec;
  {
    std::lock_guard lock(runtime_mutex());  // races with reset() / capture_end() on other threads
    NG_CHECK_STATE(core_ && core_->state == State::ready && core_->exec, "replay: graph ",
                   core_ ? core_->id : 0, " has not been captured (capture it, then replay)");
    exec = core_->exec;
  }
  const std::uint64_t graph_id = exec->graph_id;
  detail::check_replay_device(*exec, state_of(stream), "replay");
  detail::Task task = detail::replay_task(std::move(exec));
  const bool traced = detail::tracing_on();
  const std::int64_t start = traced ? detail::trace_now_ns() : 0;
  detail::issue(state_of(stream), std::move(task));
  if (traced)
    detail::trace_event({.name = "replay (host)", .category = "host", .start_ns = start,
                         .duration_ns = detail::trace_now_ns() - start, .stream = stream.id(),
                         .graph = graph_id, .node = -1, .group = -1, .detail = {}});
  if (detail::log_on(LogLevel::debug))
    detail::log_line(LogLevel::debug, detail::cat("graph ", graph_id, ": replay launched on ", stream.str()));
}

void Graph::reset() {
  if (!core_) return;
  detail::RuntimeLock lock;
  if (core_->capture) detail::abandon_capture(*core_->capture);
  detail::defer_release(std::move(core_->exec));
  core_->exec.reset();
  core_->pool = PoolHandle();
  core_->state = State::empty;
  ++core_->generation;
}

Graph::State Graph::state() const {
  std::lock_guard lock(runtime_mutex());
  return core_ ? core_->state : State::empty;
}

PoolHandle Graph::pool() const {
  std::lock_guard lock(runtime_mutex());
  return core_ ? core_->pool : PoolHandle();
}

std::size_t Graph::num_tasks() const {
  std::lock_guard lock(runtime_mutex());
  if (!core_) return 0;
  if (core_->exec) return core_->exec->nodes.size();
  return core_->capture ? core_->capture->def.nodes.size() : 0;
}

std::uint64_t Graph::id() const { return core_ ? core_->id : 0; }

GraphExec Graph::exec() const {
  std::lock_guard lock(runtime_mutex());
  NG_CHECK_STATE(core_ && core_->exec, "Graph::exec: graph ", core_ ? core_->id : 0,
                 " has not been captured");
  return GraphExec(core_->exec);
}

std::string Graph::dot() const {
  std::shared_ptr<detail::ExecGraph> exec;
  {
    std::lock_guard lock(runtime_mutex());
    if (core_ && core_->capture) return core_->capture->def.dot("graph " + std::to_string(core_->id));
    exec = core_ ? core_->exec : nullptr;
  }
  return exec ? exec->dot() : "digraph \"graph " + std::to_string(id()) + "\" {\n}\n";
}

std::string Graph::json() const {
  std::shared_ptr<detail::ExecGraph> exec;
  {
    std::lock_guard lock(runtime_mutex());
    if (core_ && core_->capture) return core_->capture->def.json(core_->id);
    exec = core_ ? core_->exec : nullptr;
  }
  return exec ? exec->json() : detail::GraphDefData{}.json(id());
}

void Graph::debug_dump(const std::string& path) const {
  const bool as_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  const std::string text = as_json ? json() : dot();
  std::ofstream out(path);
  NG_CHECK_ARG(out.good(), "debug_dump: path = '", path, "': cannot be opened for writing");
  out << text;
  NG_CHECK_ARG(out.good(), "debug_dump: path = '", path, "': writing failed");
}

// ---- CaptureScope -----------------------------------------------------------------------------

namespace {
// One side stream per thread for CaptureScope (torch.npu.graph uses a side stream too).
Stream capture_side_stream() {
  thread_local Stream side = Stream::create();
  return side;
}
}  // namespace

CaptureScope::CaptureScope(Graph& graph, CaptureOptions options)
    : CaptureScope(graph, capture_side_stream(), options) {}

CaptureScope::CaptureScope(Graph& graph, const Stream& stream, CaptureOptions options)
    : graph_(graph), stream_(stream), previous_(current_stream(stream.device())),
      exceptions_on_entry_(std::uncaught_exceptions()) {
  if (!(stream_ == previous_)) stream_.wait(previous_);  // see the work issued before the capture
  set_current_stream(stream_);
  try {
    graph_.capture_begin(stream_, options);
  } catch (...) {
    set_current_stream(previous_);
    throw;
  }
}

CaptureScope::~CaptureScope() noexcept(false) {
  if (ended_) return;
  if (std::uncaught_exceptions() > exceptions_on_entry_) {
    abandon();
    return;
  }
  end();
}

void CaptureScope::abandon() noexcept {
  if (ended_) return;
  ended_ = true;
  set_current_stream(previous_);
  detail::RuntimeLock lock;
  if (graph_.impl() && graph_.impl()->capture) detail::abandon_capture(*graph_.impl()->capture);
}

void CaptureScope::end() {
  NG_CHECK_STATE(!ended_, "CaptureScope::end: the capture already ended");
  ended_ = true;
  set_current_stream(previous_);
  graph_.capture_end(stream_);
  previous_.wait(stream_);  // work issued after the scope sees what the capture stream ran before
}

}  // namespace npugraph
