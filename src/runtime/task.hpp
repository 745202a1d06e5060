// Tasks: the units of stream work, shared by eager queues and graph nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::detail {

// A kernel's parameter block: plain bytes, stored inline when small (no allocation on the hot path).
// A larger block lives on the heap; assigning a block that fits keeps that storage (task updates
// refill recycled blocks without allocating).
class ParamBytes {
 public:
  static constexpr std::size_t kInline = 192;

  ParamBytes() = default;
  explicit ParamBytes(std::span<const std::byte> bytes) { assign(bytes); }
  ParamBytes(const ParamBytes& other) { assign(other.span()); }
  ParamBytes& operator=(const ParamBytes& other) {
    if (this != &other) assign(other.span());
    return *this;
  }
  ParamBytes(ParamBytes&& other) noexcept { take(other); }
  ParamBytes& operator=(ParamBytes&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }

  void assign(std::span<const std::byte> bytes) {
    size_ = bytes.size();
    if (heap_ && size_ <= capacity_ && size_ > kInline) {
      std::memcpy(heap_.get(), bytes.data(), size_);
    } else if (size_ <= kInline) {
      heap_.reset();
      capacity_ = 0;
      if (size_) std::memcpy(inline_, bytes.data(), size_);
    } else {
      heap_.reset(new std::byte[size_]);
      capacity_ = size_;
      std::memcpy(heap_.get(), bytes.data(), size_);
    }
  }
  const std::byte* data() const { return heap_ ? heap_.get() : inline_; }
  std::size_t size() const { return size_; }
  std::span<const std::byte> span() const { return {data(), size_}; }

 private:
  void take(ParamBytes& other) noexcept {
    size_ = other.size_;
    capacity_ = std::exchange(other.capacity_, 0);
    heap_ = std::move(other.heap_);
    if (!heap_ && size_) std::memcpy(inline_, other.inline_, size_);
  }
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;  // of heap_
  std::unique_ptr<std::byte[]> heap_;
  alignas(16) std::byte inline_[kInline];
};

enum class TaskKind : std::uint8_t {
  kernel,
  fill,
  copy,
  host_fn,
  event_record,
  event_wait,
  ext_record,
  ext_wait,
  ext_reset,
  graph_launch,
  patch,
};

const char* task_kind_name(TaskKind kind);

struct FillArgs {
  void* dst;
  std::size_t count;
  std::size_t elem_size;
  std::uint64_t pattern;  // the value's bytes, little end first
};
struct CopyArgs {
  void* dst;
  const void* src;
  std::size_t nbytes;
};

// A reference to a graph's launch table (Note [Update order]), taken when a replay is launched.
struct LaunchTable;
void release_table(LaunchTable* table) noexcept;
class TablePin {
 public:
  TablePin() = default;
  explicit TablePin(LaunchTable* adopted) noexcept : t_(adopted) {}  // takes over one reference
  TablePin(TablePin&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  TablePin& operator=(TablePin&& o) noexcept {
    if (this != &o) {
      reset();
      t_ = std::exchange(o.t_, nullptr);
    }
    return *this;
  }
  TablePin(const TablePin&) = delete;
  TablePin& operator=(const TablePin&) = delete;
  ~TablePin() { reset(); }
  void reset() noexcept {
    if (t_) release_table(std::exchange(t_, nullptr));
  }
  LaunchTable* get() const { return t_; }

 private:
  LaunchTable* t_ = nullptr;
};

// A graph launch's place in its graph's launch order (Note [Replay order]), taken when its stream's
// queue accepts it. Dropped without being run, it gives its turn up.
struct ExecGraph;
void skip_launch_turn(ExecGraph* graph, std::uint64_t turn) noexcept;
class LaunchTicket {
 public:
  LaunchTicket() = default;
  LaunchTicket(ExecGraph* graph, std::uint64_t turn) noexcept : graph_(graph), turn_(turn) {}
  LaunchTicket(LaunchTicket&& o) noexcept
      : graph_(std::exchange(o.graph_, nullptr)), turn_(o.turn_) {}
  LaunchTicket& operator=(LaunchTicket&& o) noexcept {
    if (this != &o) {
      reset();
      graph_ = std::exchange(o.graph_, nullptr);
      turn_ = o.turn_;
    }
    return *this;
  }
  LaunchTicket(const LaunchTicket&) = delete;
  LaunchTicket& operator=(const LaunchTicket&) = delete;
  ~LaunchTicket() { reset(); }
  void reset() noexcept {
    if (graph_) skip_launch_turn(std::exchange(graph_, nullptr), turn_);
  }
  bool held() const { return graph_ != nullptr; }
  std::uint64_t turn() const { return turn_; }
  // The run took its turn: nothing to give up.
  void consume() noexcept { graph_ = nullptr; }

 private:
  ExecGraph* graph_ = nullptr;
  std::uint64_t turn_ = 0;
};

struct Task {
  TaskKind kind = TaskKind::kernel;
  const KernelDef* kernel = nullptr;  // kernel
  ParamBytes params;                  // kernel, fill, copy
  std::shared_ptr<void> object;       // the event, host function, graph launch, patch or KeepAlive
  TablePin pin;                       // graph launch: the launch table pinned at launch
  LaunchTicket ticket;                // graph launch: its turn (destroyed before `object`)
  std::uint64_t value = 0;            // an event record's sequence number
};

// Note [Keep-alive]
// Queued work must keep alive the memory it reads (the record_stream class of problem: a tensor
// freed while a launch that reads it is still queued, or while a graph that reads it can still be
// replayed — at interpreter exit above all). A launch given its TensorUses holds their storages in a
// KeepAlive: an eager launch in its Task (released after it ran), a captured one in its graph node
// (released with the graph), an updated one in its group's parameter set (released when replaced;
// an update that uses the captured tensors shares the captured KeepAlive, so a steady-state update
// takes no reference beyond one). fill_ and copy_ hold their tensors the same way.
struct KeepAlive {
  std::vector<std::shared_ptr<Storage>> storages;
  std::shared_ptr<const void> capture_state;  // a captured launch's (Note [Capture state], kernel.hpp)
  bool same(TensorUses uses) const;  // the same storages, in order (undefined tensors skipped)
};
std::shared_ptr<KeepAlive> keep_alive(TensorUses uses);  // null when `uses` holds no tensor

// A human-readable name: the kernel's name, else the kind.
const char* task_name(const Task& task);

}  // namespace npugraph::detail
