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
  work,  // defined by a layer above: `object` is a TaskWork (Note [Task work])
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

struct StreamState;
struct TraceEvent;
class WorkHold;

// Note [Task work]
// Work that a layer above the runtime defines — the graph layer's replay (ExecGraph) and a
// stream-ordered update's install (Patch), both in graph/exec_graph.hpp — is a task of kind `work`
// whose `object` is a TaskWork. Queues accept, run and drop it through this interface, so the
// runtime names no graph type and calls nothing the graph layer defines (layers link one way, as
// they include: core <- runtime <- graph; tools/check_layers.py --link). What a task's work holds
// for it from issue to run (a replay: the launch table pinned at launch, its turn in its graph's
// launch order) is the task's WorkHold, opaque here; a task destroyed unrun (a stream shut down, a
// replay recorded into a capture) gives it back through drop(). Nothing here allocates: a replay
// is still one task, O(1) to launch.
class TaskWork {
 public:
  // How a queue treats the work.
  enum class Shape : std::uint8_t {
    step,    // a short host step after the stream's earlier work (an update's install): a device
             // queue lets that work finish first
    launch,  // issues work of its own on the stream (a replay): a device queue issues it without
             // waiting; the cpu queue counts it as long work (Note [Batch gathering])
  };
  explicit TaskWork(Shape shape) : shape_(shape) {}
  TaskWork(const TaskWork&) = delete;
  TaskWork& operator=(const TaskWork&) = delete;
  virtual ~TaskWork() = default;
  Shape shape() const { return shape_; }

  // Its name in task names, errors, traces and graph dumps.
  virtual const char* name() const noexcept = 0;
  // A stream's queue accepted a task of this work (called under the queue's lock).
  virtual void accept(WorkHold& hold, StreamState& stream) = 0;
  // Runs it on `stream`'s worker, taking over what `hold` holds (empty: run by a graph's node).
  virtual void run(WorkHold& hold, StreamState& stream) = 0;
  // Gives back what the task of a run that never came holds.
  virtual void drop(WorkHold& hold) noexcept = 0;
  // Completes the trace event of a run (its name, times and place are set; the category is "task").
  virtual void trace(TraceEvent& event) const = 0;

 private:
  Shape shape_;
};

// What a task's work holds for it from issue to run (Note [Task work]): a reference and a turn,
// both opaque to the runtime. Move-only; destroyed while it holds them, it gives them back to its
// work (TaskWork::drop).
class WorkHold {
 public:
  static constexpr std::uint64_t kNoTurn = ~std::uint64_t{0};

  WorkHold() = default;
  WorkHold(WorkHold&& o) noexcept
      : work_(std::exchange(o.work_, nullptr)), ref_(std::exchange(o.ref_, nullptr)),
        turn_(std::exchange(o.turn_, kNoTurn)) {}
  WorkHold& operator=(WorkHold&& o) noexcept {
    if (this != &o) {
      reset();
      work_ = std::exchange(o.work_, nullptr);
      ref_ = std::exchange(o.ref_, nullptr);
      turn_ = std::exchange(o.turn_, kNoTurn);
    }
    return *this;
  }
  WorkHold(const WorkHold&) = delete;
  WorkHold& operator=(const WorkHold&) = delete;
  ~WorkHold() { reset(); }

  // Holds a reference `work` took (it keeps a turn it holds already), or a turn.
  void hold_ref(TaskWork& work, void* ref) noexcept {
    work_ = &work;
    ref_ = ref;
  }
  void hold_turn(TaskWork& work, std::uint64_t turn) noexcept {
    work_ = &work;
    turn_ = turn;
  }
  void* ref() const { return ref_; }
  std::uint64_t turn() const { return turn_; }
  // The work took what it held over: empty now, nothing given back.
  void release() noexcept {
    work_ = nullptr;
    ref_ = nullptr;
    turn_ = kNoTurn;
  }
  // Gives what it holds back to its work: empty now.
  void reset() noexcept {
    if (TaskWork* work = std::exchange(work_, nullptr)) {
      work->drop(*this);
      ref_ = nullptr;
      turn_ = kNoTurn;
    }
  }

 private:
  TaskWork* work_ = nullptr;  // set while it holds something
  void* ref_ = nullptr;
  std::uint64_t turn_ = kNoTurn;
};

struct Task {
  TaskKind kind = TaskKind::kernel;
  const KernelDef* kernel = nullptr;  // kernel
  ParamBytes params;                  // kernel, fill, copy
  std::shared_ptr<void> object;       // the event, host function or KeepAlive; work: its TaskWork
  WorkHold hold;                      // work: what it holds until it runs (destroyed before `object`)
  std::uint64_t value = 0;            // an event record's sequence number
};

// A task of `work`; `object` points at its TaskWork (what work_of reads back).
inline Task work_task(std::shared_ptr<TaskWork> work) {
  Task task;
  task.kind = TaskKind::work;
  task.object = std::move(work);
  return task;
}
// The TaskWork of a work task's `object` (or of a graph node's copy of it).
inline TaskWork& work_of(void* object) { return *static_cast<TaskWork*>(object); }
inline const TaskWork& work_of(const void* object) { return *static_cast<const TaskWork*>(object); }
// Whether `task` is work that launches work of its own (a replay).
inline bool is_launch(const Task& task) {
  return task.kind == TaskKind::work && work_of(task.object.get()).shape() == TaskWork::Shape::launch;
}

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

// A human-readable name: the kernel's name, the work's, else the kind.
const char* task_name(const Task& task);
// The kind's name; for work, the work's (TaskWork::name).
const char* task_type_name(const Task& task);

}  // namespace npugraph::detail
