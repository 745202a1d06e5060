#include "graph/exec_graph.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/mem_pool.hpp"
#include "npugraph/error.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/sync_objects.hpp"
#include "runtime/trace.hpp"

namespace npugraph::detail {

// ---- parameter sets and launch tables (Note [Update order]) -----------------------------------

namespace {
std::atomic<std::uint64_t> g_install_stamp{0};
}  // namespace

std::uint64_t next_install_stamp() { return g_install_stamp.fetch_add(1, std::memory_order_relaxed) + 1; }

void release_set(ParamSet* set) noexcept {
  if (set->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) set->owner->recycle(set);
}

void GroupSlot::recycle(ParamSet* set) noexcept {
  for (auto& k : set->keep) k.reset();  // a set waiting for reuse holds no tensor
  sets.give(set);
}

SetRef GroupSlot::blank() {
  ParamSet* set = sets.take([this](ParamSet& fresh) {
    fresh.owner = this;
    fresh.params.resize(nodes.size());
    fresh.keep.resize(nodes.size());
  });
  set->stamp = 0;
  return SetRef(set);
}

SetRef GroupSlot::pick(ParamSet* launched) {
  std::lock_guard lock(current_mu_);
  if (launched && launched->stamp > current_->stamp) return SetRef(launched);
  return current_;
}

void GroupSlot::install(SetRef set) {
  {
    std::lock_guard lock(current_mu_);
    std::swap(current_, set);
  }
  // `set` (the old current) is released here, unlocked.
}

void release_table(LaunchTable* table) noexcept {
  if (table->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) table->owner->recycle(table);
}

void ExecGraph::recycle(LaunchTable* t) noexcept {
  for (SetRef& set : t->sets) set.reset();  // a table waiting for reuse pins no set (nor its tensors)
  table_pool.give(t);
}

TablePin ExecGraph::pin_table() {
  if (!has_table.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(tables_mu);
  table->refs.fetch_add(1, std::memory_order_relaxed);
  return TablePin(table);
}

void ExecGraph::publish(std::span<const std::uint32_t> group_ids, std::span<SetRef> sets) {
  LaunchTable* t = table_pool.take([this](LaunchTable& fresh) {
    fresh.owner = this;
    fresh.sets.resize(groups.size());
  });
  std::unique_lock lock(tables_mu);
  LaunchTable* old = table;
  // Copying the sets takes references only (no allocation).
  for (std::size_t g = 0; g < groups.size(); ++g) t->sets[g] = old ? old->sets[g] : SetRef();
  for (std::size_t i = 0; i < group_ids.size(); ++i) t->sets[group_ids[i]] = std::move(sets[i]);
  t->refs.store(1, std::memory_order_relaxed);
  table = t;
  has_table.store(true, std::memory_order_release);
  lock.unlock();
  if (old) release_table(old);
}

ExecGraph::~ExecGraph() {
  if (table) release_table(std::exchange(table, nullptr));
  table_pool.for_each([](LaunchTable& t) { t.sets.clear(); });  // release their sets while the slots live
}

// Note [Instantiation]
// Nodes are renumbered in a topological order (capture order already is one: a task only depends on
// earlier tasks). Each node keeps a successor range; nodes with exactly one predecessor need no
// counter (their predecessor runs them next), the others get a pending counter reset per replay.
// Parameter blocks of ungrouped kernels move into one 16-byte-aligned arena; a group's blocks live in
// its ParamSet, which updates replace (Note [Update order]).
std::shared_ptr<ExecGraph> instantiate(const GraphDefData& def, std::uint64_t graph_id,
                                       std::shared_ptr<MemPool> pool, Device device) {
  auto g = std::make_shared<ExecGraph>();
  g->graph_id = graph_id;
  g->device = device;
  g->pool = std::move(pool);
  const std::size_t n = def.nodes.size();
  NG_CHECK_ARG(n < (1u << 31), "instantiate: graph has ", n, " tasks: must be < 2^31");
  g->nodes.resize(n);
  g->names.reserve(n);

  std::vector<std::uint32_t> preds(n, 0), succ_count(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    preds[i] = static_cast<std::uint32_t>(def.nodes[i].deps.size());
    for (std::uint32_t d : def.nodes[i].deps) ++succ_count[d];
  }
  std::uint32_t offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    g->nodes[i].succ_begin = g->nodes[i].succ_end = offset;
    offset += succ_count[i];
  }
  g->succ.resize(offset);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t d : def.nodes[i].deps) g->succ[g->nodes[d].succ_end++] = i;

  std::size_t arena_bytes = 0;
  for (const Node& node : def.nodes)
    if (node.task.kind != TaskKind::kernel || node.group < 0)
      arena_bytes += (node.task.params.size() + 15) / 16 * 16;
  g->arena.reset(new std::byte[arena_bytes ? arena_bytes : 16]);  // new[] aligns to 16 here
  static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= 16);
  std::size_t cursor = 0;

  for (std::uint32_t i = 0; i < n; ++i) {
    const Node& src = def.nodes[i];
    ExecNode& dst = g->nodes[i];
    dst.kind = src.task.kind;
    dst.value = src.task.value;
    dst.group = src.group;
    if (src.task.kind == TaskKind::kernel) dst.fn = src.task.kernel->cpu;
    if (src.task.object) {
      g->objects.push_back(src.task.object);
      dst.object = src.task.object.get();
    }
    if (src.task.kind != TaskKind::kernel || src.group < 0) {
      std::memcpy(g->arena.get() + cursor, src.task.params.data(), src.task.params.size());
      dst.params = g->arena.get() + cursor;
      dst.param_size = static_cast<std::uint32_t>(src.task.params.size());
      cursor += (src.task.params.size() + 15) / 16 * 16;
    }
    if (preds[i] == 0) g->sources.push_back(i);
    if (succ_count[i] == 0) ++g->sinks;
    dst.single_pred = preds[i] == 1;
    if (preds[i] > 1) {
      dst.counter = static_cast<std::int32_t>(g->counter_init.size());
      g->counter_init.push_back(static_cast<std::int32_t>(preds[i]));
    }
    g->names.push_back(task_name(src.task));
    g->defs.push_back(src.task.kind == TaskKind::kernel ? src.task.kernel : nullptr);
    g->stream_ids.push_back(src.stream_id);
  }

  g->groups.reserve(def.groups.size());
  for (const auto& members : def.groups) {
    auto slot = std::make_unique<GroupSlot>();
    for (std::size_t pos = 0; pos < members.size(); ++pos) {
      const std::uint32_t node = members[pos];
      slot->nodes.push_back(node);
      slot->kernels.push_back(def.nodes[node].task.kernel);
      g->nodes[node].group_pos = static_cast<std::uint32_t>(pos);
    }
    SetRef set = slot->blank();
    for (std::size_t pos = 0; pos < members.size(); ++pos) {
      set->params[pos] = def.nodes[members[pos]].task.params;
      set->keep[pos] = std::static_pointer_cast<KeepAlive>(def.nodes[members[pos]].task.object);
    }
    slot->captured = set;
    slot->install(std::move(set));
    g->groups.push_back(std::move(slot));
  }
  g->backend = graph_backend_for(device).instantiate(*g);
  return g;
}

std::string ExecGraph::describe(std::uint32_t node) const {
  return cat("task #", node, " '", names[node], "'");
}

// ExecGraph's nodes as a GraphDefData (names, streams, edges, groups) and each task's detail line.
struct DumpTables {
  GraphDefData def;
  std::vector<std::string> details;
};

std::string ExecGraph::dot() {
  DumpTables t = dump_tables();
  return t.def.dot("graph " + std::to_string(graph_id), names, t.details);
}

std::string ExecGraph::json() {
  DumpTables t = dump_tables();
  return t.def.json(graph_id, names, t.details);
}

DumpTables ExecGraph::dump_tables() {
  GraphDefData def;  // rebuilt from the compact tables: only names, streams, edges and groups matter
  def.nodes.resize(nodes.size());
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    def.nodes[i].task.kind = nodes[i].kind;
    if (nodes[i].kind == TaskKind::work)  // its name in the dump: a pointer that owns nothing
      def.nodes[i].task.object = std::shared_ptr<void>(std::shared_ptr<void>(), nodes[i].object);
    def.nodes[i].stream_id = stream_ids[i];
    for (std::uint32_t k = nodes[i].succ_begin; k < nodes[i].succ_end; ++k)
      def.nodes[succ[k]].deps.push_back(i);
  }
  for (const auto& slot : groups) def.groups.push_back(slot->nodes);
  // What the next replay would read: a group's newest set (stream- or launch-ordered install).
  const TablePin published = pin_table();
  const LaunchTable* t = published.get();
  std::vector<SetRef> current(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g)
    current[g] = groups[g]->pick(t && g < t->sets.size() ? t->sets[g].get() : nullptr);
  std::vector<std::string> details(nodes.size());
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    const ExecNode& n = nodes[i];
    switch (n.kind) {
      case TaskKind::kernel: {
        const KernelDef* k = defs[i];
        if (!k || !k->describe) break;
        std::span<const std::byte> bytes(n.params, n.param_size), captured = bytes;
        if (n.group >= 0) {
          const SetRef& set = current[static_cast<std::size_t>(n.group)];
          if (!set) break;
          bytes = set->params[n.group_pos].span();
          const SetRef& first = groups[static_cast<std::size_t>(n.group)]->captured;
          if (first) captured = first->params[n.group_pos].span();
        }
        details[i] = k->describe(bytes, captured);
        break;
      }
      case TaskKind::ext_record:
      case TaskKind::ext_wait:
      case TaskKind::ext_reset:
        if (n.object) details[i] = "ExternalEvent '" + static_cast<const ExternalEventState*>(n.object)->name + "'";
        break;
      default:
        break;
    }
  }
  return DumpTables{std::move(def), std::move(details)};
}

}  // namespace npugraph::detail

namespace npugraph::detail {

// ---- launch order (Note [Replay order]) -------------------------------------------------------

namespace {

// Serves the next turn that was not given up (mu held); wakes the waiters.
void advance_turn(LaunchTurns& t) {
  ++t.serving;
  for (auto it = std::find(t.skipped.begin(), t.skipped.end(), t.serving); it != t.skipped.end();
       it = std::find(t.skipped.begin(), t.skipped.end(), t.serving)) {
    t.skipped.erase(it);
    ++t.serving;
  }
  std::erase_if(t.holders, [&](const auto& h) { return h.first < t.serving; });
  if (t.waiters) t.cv.notify_all();
}

}  // namespace

// ---- a replay as its task's work (Note [Task work]) ------------------------------------------

Task replay_task(std::shared_ptr<ExecGraph> graph) {
  ExecGraph& g = *graph;
  Task task = work_task(std::move(graph));
  if (TablePin pin = g.pin_table(); pin.get()) task.hold.hold_ref(g, pin.release());
  return task;
}

void ExecGraph::accept(WorkHold& hold, StreamState& stream) {
  std::lock_guard lock(turns.mu);
  const std::uint64_t turn = turns.next++;
  turns.holders.emplace_back(turn, stream.self);
  hold.hold_turn(*this, turn);
}

void ExecGraph::run(WorkHold& hold, StreamState& stream) {
  TablePin pin(static_cast<LaunchTable*>(hold.ref()));
  LaunchTicket ticket = hold.turn() != WorkHold::kNoTurn ? LaunchTicket(this, hold.turn()) : LaunchTicket();
  hold.release();  // pin and ticket own them now
  backend->replay(*this, std::move(pin), std::move(ticket), stream);
}

void ExecGraph::drop(WorkHold& hold) noexcept {
  if (hold.turn() != WorkHold::kNoTurn) skip_launch_turn(this, hold.turn());
  if (hold.ref()) release_table(static_cast<LaunchTable*>(hold.ref()));
}

void ExecGraph::trace(TraceEvent& event) const {
  event.category = "graph";
  if (event.node < 0) event.graph = graph_id;  // a graph's node keeps the id of the graph it is in
}


void skip_launch_turn(ExecGraph* graph, std::uint64_t turn) noexcept {
  LaunchTurns& t = graph->turns;
  std::lock_guard lock(t.mu);
  if (turn == t.serving) advance_turn(t);
  else t.skipped.push_back(turn);
}

bool begin_replay(ExecGraph& graph, const std::uint64_t* turn, StreamState& stream) {
  LaunchTurns& t = graph.turns;
  // A host launch runs in its turn; a nested one whenever no other replay runs (Note [Replay order]).
  auto may_run = [&] { return !t.running && (!turn || t.serving == *turn); };
  bool blocked = false;
  std::unique_lock lock(t.mu);
  while (!may_run()) {
    if (runtime_exiting() || stream.closing.load()) {  // the stream is going away: give the turn up
      if (turn) {
        if (*turn == t.serving) advance_turn(t);
        else t.skipped.push_back(*turn);
      }
      lock.unlock();
      if (blocked) stream.clear_blocked_on();
      return false;
    }
    // Blocked on the stream running the graph, else on the one whose launch comes first.
    std::weak_ptr<StreamState> holder = t.runner;
    if (!t.running)
      for (const auto& h : t.holders)
        if (h.first == t.serving) holder = h.second;
    lock.unlock();
    stream.set_blocked_on(holder);  // a synchronize of this stream looks for a stall there
    blocked = true;
    lock.lock();
    if (may_run()) break;
    ++t.waiters;
    t.cv.wait_for(lock, std::chrono::milliseconds(10));
    --t.waiters;
  }
  t.running = true;
  t.runner = stream.self;
  lock.unlock();
  if (blocked) stream.clear_blocked_on();
  return true;
}

void end_replay(ExecGraph& graph, bool had_turn) {
  LaunchTurns& t = graph.turns;
  std::lock_guard lock(t.mu);
  t.running = false;
  t.runner.reset();
  if (had_turn) advance_turn(t);
  else if (t.waiters) t.cv.notify_all();
}

void check_replay_device(const ExecGraph& graph, const StreamState& stream, const char* call) {
  NG_CHECK_ARG(stream.device == graph.device, call, ": stream = ", stream.str(), ": graph ", graph.graph_id,
               " was built for ", graph.device.str(), " and replays only on a stream of that device");
}

}  // namespace npugraph::detail
