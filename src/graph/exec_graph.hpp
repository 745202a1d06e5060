// An instantiated graph: a compact, topologically ordered node table the executor walks, the task
// groups' current parameter blocks, and the pool that keeps its memory alive.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph_backend.hpp"
#include "graph/graph_def.hpp"
#include "npugraph/device.hpp"
#include "runtime/recycler.hpp"
#include "runtime/spin_lock.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail {

class MemPool;
struct ExternalEventState;
struct StreamState;

struct GroupSlot;
struct ExecGraph;

// A group's parameter blocks, one per task. Immutable once published: an update fills a blank set and
// publishes it. Counted by hand (SetRef) so that steady-state updates allocate nothing: a set whose
// last reference drops goes back to its group's free list, keeping its blocks' storage.
struct ParamSet {
  std::atomic<std::uint32_t> refs{0};
  std::uint64_t stamp = 0;  // install order (Note [Update order]); 0 = captured
  GroupSlot* owner = nullptr;
  std::vector<ParamBytes> params;
  std::vector<std::shared_ptr<KeepAlive>> keep;  // per task: its tensors (Note [Keep-alive])
};
void release_set(ParamSet* set) noexcept;

class SetRef {
 public:
  SetRef() = default;
  explicit SetRef(ParamSet* p) noexcept : p_(p) { if (p_) p_->refs.fetch_add(1, std::memory_order_relaxed); }
  SetRef(const SetRef& o) noexcept : SetRef(o.p_) {}
  SetRef(SetRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  SetRef& operator=(SetRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~SetRef() { reset(); }
  void reset() noexcept {
    if (p_) release_set(std::exchange(p_, nullptr));
  }
  ParamSet* get() const { return p_; }
  ParamSet* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  ParamSet* p_ = nullptr;
};

// Note [Update order]
// A group has two published sets: `current`, installed in stream order (a patch task, when the
// updating stream reaches it; torch_npu's semantics), and an entry in the graph's launch table,
// installed at once by a launch-ordered update (docs/semantics.md §7). Every install takes a stamp from one
// global counter when the host ends the update. A replay pins the launch table when it is launched
// (O(1): one reference) and, at the group's first task, runs the newer (by stamp) of the group's
// `current` and its pinned table entry. So a launch-ordered update reaches exactly the replays
// launched after it, and when both orders update one group the one the host ended last wins.
std::uint64_t next_install_stamp();

struct GroupSlot {
  // The set pool comes first: it must outlive every SetRef member below.
  Recycler<ParamSet> sets;

  std::vector<std::uint32_t> nodes;  // exec node indices, in group order
  std::vector<const KernelDef*> kernels;
  SetRef captured;  // what capture recorded: updates are checked against it

  // A blank set sized for this group (recycled when one is free).
  SetRef blank();
  void recycle(ParamSet* set) noexcept;
  // The newer of `current` and `launched` (a pinned launch-table entry, may be null).
  SetRef pick(ParamSet* launched);
  // Installs `set` as `current` (stream order); the old one is released after the lock.
  void install(SetRef set);

  // The stream updating it; guarded by runtime_mutex(). A stream abandons its update before it dies.
  StreamState* updater = nullptr;

 private:
  SpinLock current_mu_;
  SetRef current_;
};

// The launch-ordered sets of a graph (Note [Update order]): one entry per group, null where the group
// was never updated in launch order. Immutable once published; pinned by launches.
struct LaunchTable {
  std::atomic<std::uint32_t> refs{0};
  ExecGraph* owner = nullptr;
  std::vector<SetRef> sets;
};
void release_table(LaunchTable* table) noexcept;

// A reference to a graph's launch table (Note [Update order]), taken when a replay is launched.
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
  // Hands the reference over (to a task's WorkHold).
  LaunchTable* release() noexcept { return std::exchange(t_, nullptr); }

 private:
  LaunchTable* t_ = nullptr;
};

// A graph launch's place in its graph's launch order (Note [Replay order]), taken when its stream's
// queue accepts it. Dropped without being run, it gives its turn up.
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

struct ExecNode {
  KernelFn fn = nullptr;               // kernel nodes
  const std::byte* params = nullptr;   // into the graph's parameter arena (non-group nodes)
  std::uint32_t param_size = 0;
  TaskKind kind = TaskKind::kernel;
  bool single_pred = false;            // exactly one predecessor: no counter needed
  std::int32_t group = -1;
  std::uint32_t group_pos = 0;
  std::uint32_t succ_begin = 0, succ_end = 0;
  std::int32_t counter = -1;           // index of its pending counter (nodes with >1 predecessor)
  void* object = nullptr;              // events, host functions (owned by ExecGraph::objects)
  std::uint64_t value = 0;
};

// Note [Replay order]
// Launches of one executable graph run one after another in launch order, whatever streams they are
// launched on (as CUDA does): a graph's FIA workspace, its outputs and its per-replay state belong
// to one replay at a time. A host launch (replay, GraphExec::launch) takes a turn when its stream's
// queue accepts it, under the queue's lock, so each queue holds its turns in increasing order and
// the oldest outstanding turn is always at the head of some queue (turns alone never deadlock). A
// replay waits until its turn is served and no other replay of the graph runs, and serves the next
// turn when it ends; a launch dropped unrun gives its turn up. A graph launched by another graph's
// node (a replay captured into a graph) runs when that node runs: it takes no turn — a turn taken at
// run time could sit behind a host launch queued after the outer replay on its own stream, which
// waits for the outer one: a deadlock — but still runs alone, after the replay running now. While a
// replay waits, its stream is blocked on the stream running the graph (or launching it next), so a
// synchronize finds a stall behind it (Note [Stalls]).
struct LaunchTurns {
  std::mutex mu;  // guards everything below
  std::condition_variable cv;
  std::uint64_t next = 0;               // the next turn to hand out
  std::uint64_t serving = 0;            // the host launch that may run next
  std::vector<std::uint64_t> skipped;   // turns given up before they came up
  // The stream each outstanding turn was launched on, in turn order (whom a waiter is blocked on).
  std::vector<std::pair<std::uint64_t, std::weak_ptr<StreamState>>> holders;
  bool running = false;                 // a replay of the graph runs now ...
  std::weak_ptr<StreamState> runner;    // ... on this stream
  int waiters = 0;
};

struct DumpTables;  // exec_graph.cpp

// An executable graph is also the work of its replays' tasks (Note [Task work]): a replay is one
// task of kind `work` (replay_task), which takes its turn when a queue accepts it, runs on the
// device's executable form (BackendGraph::replay) and, dropped unrun, gives up its turn and unpins
// its launch table.
struct ExecGraph final : TaskWork {
  ExecGraph() : TaskWork(Shape::launch) {}
  ~ExecGraph() override;
  const char* name() const noexcept override { return "graph_launch"; }
  void accept(WorkHold& hold, StreamState& stream) override;  // takes a turn (Note [Replay order])
  void run(WorkHold& hold, StreamState& stream) override;
  void drop(WorkHold& hold) noexcept override;
  void trace(TraceEvent& event) const override;  // category "graph"; its id for its own task

  std::string describe(std::uint32_t node) const;  // "task #3 'add'"
  // Graphviz text with each kernel task's parameters as the next replay would use them (the
  // kernel's describe; for a group, the newest installed set) and each ExternalEvent's name.
  std::string dot();
  std::string json();  // the same as a Chrome-trace document (Note [Graph dump as JSON])
  DumpTables dump_tables();
  std::uint64_t graph_id = 0;
  Device device;                      // whose backend built `backend`; replays run on its streams
  std::vector<ExecNode> nodes;        // in topological order
  std::vector<std::uint32_t> succ;    // successor lists, indexed by ExecNode::succ_begin/end
  std::vector<std::uint32_t> sources;
  std::vector<std::int32_t> counter_init;  // predecessor counts of multi-predecessor nodes
  std::uint32_t sinks = 0;
  std::unique_ptr<std::byte[]> arena;
  std::vector<std::shared_ptr<void>> objects;
  std::vector<const char*> names;     // per node: kernel or task-kind name
  std::vector<const KernelDef*> defs;  // per node: its kernel (null for other tasks)
  std::vector<std::uint64_t> stream_ids;  // per node: the stream it was captured on
  std::vector<std::unique_ptr<GroupSlot>> groups;
  std::shared_ptr<MemPool> pool;      // keeps captured memory valid while replays may run

  LaunchTurns turns;  // Note [Replay order]
  std::unique_ptr<BackendGraph> backend;  // the device's executable form (graph_backend.hpp)

  // Launch-ordered updates (Note [Update order]). The table pool comes before the published table.
  Recycler<LaunchTable> table_pool;
  SpinLock tables_mu;
  std::atomic<bool> has_table{false};
  LaunchTable* table = nullptr;  // published (holds one reference); guarded by tables_mu

  // The published launch table, referenced (null when none was ever published).
  TablePin pin_table();
  // Publishes a table where group g[i] gets set[i] (the others keep their entries).
  void publish(std::span<const std::uint32_t> groups, std::span<SetRef> sets);
  void recycle(LaunchTable* t) noexcept;
};

// Throws ArgumentError when `stream` is not on the graph's device (a device's executable form
// runs only on its own streams).
void check_replay_device(const ExecGraph& graph, const StreamState& stream, const char* call);

// A replay of `graph`: a work task holding the launch table pinned now (Note [Update order]).
Task replay_task(std::shared_ptr<ExecGraph> graph);

// Builds the executable graph, and its device's executable form, for `device`.
std::shared_ptr<ExecGraph> instantiate(const GraphDefData& def, std::uint64_t graph_id,
                                       std::shared_ptr<MemPool> pool, Device device);

// The payload of a stream-ordered update's patch task: the sets to install, and the graphs they
// belong to (kept alive until it ran). Recycled through the updating stream's PatchPool.
// It is the work of its task (Note [Task work]): run, it installs (apply_patch).
struct Patch;
using PatchPool = Recycler<Patch>;
struct Patch final : TaskWork {
  Patch() : TaskWork(Shape::step) {}
  const char* name() const noexcept override { return "task_update_patch"; }
  void accept(WorkHold&, StreamState&) override {}
  void run(WorkHold& hold, StreamState& stream) override;
  void drop(WorkHold&) noexcept override {}
  void trace(TraceEvent& event) const override;  // "update install: N group(s)"

  struct Entry {
    GroupSlot* slot;
    SetRef set;
  };
  std::vector<std::shared_ptr<ExecGraph>> graphs;
  std::vector<Entry> entries;
  std::vector<std::shared_ptr<ExternalEventState>> records;  // recorded once installed
  PatchPool* home = nullptr;
};
// Installs the patch's sets, drops its references and returns it to its pool.
void apply_patch(Patch& patch);
// Blocks the stream's worker until the replay may run: in `turn` for a host launch (null: a launch by
// a graph's node), alone (false: the stream is going away; a turn is given up). end_replay lets the
// next one run (and serves the next turn when this replay had one).
bool begin_replay(ExecGraph& graph, const std::uint64_t* turn, StreamState& stream);
void end_replay(ExecGraph& graph, bool had_turn);


}  // namespace npugraph::detail
