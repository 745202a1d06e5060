// Graphs: stream work captured once, instantiated, replayed many times (docs/semantics.md §3).
//
// Two lifecycles, two kinds of type:
//   GraphDef  — a graph being built (explicitly with add_*, or by capture); instantiate() makes
//   GraphExec — an executable graph; the only way to get one is GraphDef::instantiate().
// `Graph` is the torch_npu-style NPUGraph: capture_begin/capture_end (or CaptureScope) fill it,
// then replay() launches its GraphExec. reset() frees it, its pool and its task groups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "npugraph/kernel.hpp"
#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "npugraph/task_group.hpp"

namespace npugraph {

namespace detail { struct GraphDefData; struct ExecGraph; struct GraphCore; }

CaptureMode parse_capture_mode(const std::string& name);  // "global", "thread_local", "relaxed"

class GraphExec;

class GraphDef {
 public:
  using NodeId = std::uint32_t;
  GraphDef();
  ~GraphDef();
  GraphDef(GraphDef&&) noexcept;
  GraphDef& operator=(GraphDef&&) noexcept;

  NodeId add_kernel(const KernelDef& kernel, std::span<const std::byte> params,
                    std::span<const NodeId> deps = {});
  template <class P>
    requires std::is_trivially_copyable_v<P>
  NodeId add_kernel(const KernelDef& kernel, const P& params, std::span<const NodeId> deps = {}) {
    return add_kernel(kernel, std::span<const std::byte>(std::as_bytes(std::span<const P, 1>(&params, 1))),
                      deps);
  }
  NodeId add_host(std::function<void()> fn, std::span<const NodeId> deps = {});
  std::size_t size() const;
  GraphExec instantiate() const;
  std::string dot() const;

  detail::GraphDefData& data() { return *data_; }
  const detail::GraphDefData& data() const { return *data_; }

 private:
  std::unique_ptr<detail::GraphDefData> data_;
};

class GraphExec {
 public:
  // Enqueues one replay of the whole graph on `stream`: O(1) host work, whatever the graph's size.
  void launch(const Stream& stream) const;
  std::size_t size() const;
  std::string dot() const;
  const std::shared_ptr<detail::ExecGraph>& impl() const { return exec_; }

 private:
  friend class GraphDef;
  friend class Graph;
  explicit GraphExec(std::shared_ptr<detail::ExecGraph> exec) : exec_(std::move(exec)) {}
  std::shared_ptr<detail::ExecGraph> exec_;
};

struct CaptureOptions {
  PoolHandle pool{};             // share a pool (graph_pool_handle()); default: a private one
  CaptureMode mode = CaptureMode::global;
};

class Graph {
 public:
  enum class State { empty, capturing, ready };

  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // Begins capturing `stream` (default: the current stream, which must not be the default stream).
  void capture_begin(CaptureOptions options = {});
  void capture_begin(const Stream& stream, CaptureOptions options = {});
  // Ends the capture and instantiates the graph. The stream (default: the current stream) must be
  // the one the capture began on.
  void capture_end();
  void capture_end(const Stream& stream);
  void replay() const;
  void replay(const Stream& stream) const;
  // Frees the executable graph, its pool reference and its task groups (their handles go stale).
  void reset();

  State state() const;
  PoolHandle pool() const;
  std::size_t num_tasks() const;
  std::uint64_t id() const;
  GraphExec exec() const;  // throws StateError unless ready
  // The task groups of the instantiated graph, in capture order (index 0, 1, ...): handles equal to
  // the ones task_group_end returned. Empty before the capture ends and after reset().
  std::vector<TaskGroupHandle> groups() const;
  // Graphviz text: every task with its kernel's parameters as the next replay would use them
  // (tensors' dtypes and shapes, the current values of updatable arguments), task groups outlined
  // and labelled with their handle index, ExternalEvent names.
  std::string dot() const;
  // The same content as a Chrome-trace JSON document (torch_npu's debug_dump format: one event per
  // task on its stream's track; docs/semantics.md section 3).
  std::string json() const;
  // Writes json() to `path` when it ends in ".json", dot() otherwise.
  void debug_dump(const std::string& path) const;

  const std::shared_ptr<detail::GraphCore>& impl() const { return core_; }

 private:
  std::shared_ptr<detail::GraphCore> core_;
};

// torch.npu.graph(g): makes a side stream current, waits it on the previous current stream, and
// captures into `graph` until the scope ends (the destructor ends the capture and may throw, unless
// the scope is left by an exception, in which case the capture is abandoned).
class CaptureScope {
 public:
  explicit CaptureScope(Graph& graph, CaptureOptions options = {});
  CaptureScope(Graph& graph, const Stream& stream, CaptureOptions options = {});
  ~CaptureScope() noexcept(false);
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
  // Ends the capture (what the destructor does when no exception is leaving the scope).
  void end();
  // Discards the capture and restores the previous stream (what an exception leaving the scope does).
  void abandon() noexcept;
  const Stream& stream() const { return stream_; }

 private:
  Graph& graph_;
  Stream stream_;
  Stream previous_;
  int exceptions_on_entry_;
  bool ended_ = false;
};

}  // namespace npugraph
