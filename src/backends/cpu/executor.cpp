// The cpu graph executor.
//
// Note [Replay dispatch]
// A replay is one graph_launch task on the stream: O(1) to enqueue, whatever the graph's size. The
// stream's worker then walks the graph. A node's successor with a single predecessor is run next by
// the same thread with no atomic operation at all, so a chain costs one indirect call per task.
// Other newly ready nodes go to a shared queue; sources are claimed in shrinking batches from one
// atomic cursor. Helpers from the compute pool join only graphs that have parallel work (a fork or
// several sources), and only as many as the stream's thread count allows. The owner returns once all
// sinks have run — every node is an ancestor of a sink, so then every node has run. A chain's
// parallel kernels share one team of helpers for the whole replay (Note [A replay's team]).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "backends/cpu/execute.hpp"
#include "backends/cpu/run_state.hpp"
#include "npugraph/error.hpp"
#include "runtime/stream_state.hpp"
#include "runtime/trace.hpp"

namespace npugraph::detail {
namespace {
constexpr std::uint32_t kNone = ~0u;

bool graph_is_parallel(const ExecGraph& g) {
  if (g.sources.size() > 1) return true;
  for (const ExecNode& n : g.nodes)
    if (n.succ_end - n.succ_begin > 1) return true;
  return false;
}
}  // namespace

RunState::RunState(const CpuGraph& c)
    : graph(c.graph),
      cpu(&c),
      parallel(graph_is_parallel(*c.graph)),
      counters(new std::atomic<std::int32_t>[c.graph->counter_init.size()]),
      pinned(c.graph->groups.size()) {}

bool RunState::has_work() const {
  return ready_count.load(std::memory_order_relaxed) > 0 ||
         next_source.load(std::memory_order_relaxed) < graph->sources.size();
}

void RunState::help() { work(false); }

void RunState::push_ready(std::uint32_t node) {
  {
    std::lock_guard lock(ready_mu);
    ready.push_back(node);
    ready_count.fetch_add(1, std::memory_order_seq_cst);
  }
  if (parallel) pool->poke();
  if (owner_waiting.load()) {
    { std::lock_guard lock(wake_mu); }
    wake_cv.notify_one();
  }
}

bool RunState::pop_ready(std::uint32_t& node) {
  if (ready_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(ready_mu);
  if (ready.empty()) return false;
  node = ready.back();
  ready.pop_back();
  ready_count.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void RunState::finish_sinks(std::uint32_t count) {
  if (count == 0) return;
  if (sinks_left.fetch_sub(count, std::memory_order_seq_cst) == count && owner_waiting.load()) {
    { std::lock_guard lock(wake_mu); }
    wake_cv.notify_one();
  }
}

void RunState::run_node(std::uint32_t id) {
  // A cancelled replay (Note [Stalls]) skips what is left; the walk goes on so that it ends.
  if (cancelled.load(std::memory_order_relaxed)) return;
  const ExecNode& node = graph->nodes[id];
  const KernelFusion* fusion = nullptr;
  if (!cpu->fused.empty()) {  // Note [Kernel fusion]
    if (cpu->fused[id].absorbed) return;  // it ran inside its predecessor's task
    fusion = cpu->fused[id].run;
  }
  if (!tracing_on()) return run_node_untraced(id, node, fusion);
  const TraceLaneScope lane(stream->id);  // a parallel kernel's join event goes to its lane
  const std::int64_t start = trace_now_ns();
  run_node_untraced(id, node, fusion);
  trace_task(fusion ? fusion->name : graph->names[id], node.kind, node.object, start, stream->id, graph->graph_id,
             static_cast<std::int32_t>(id), node.group);
}

void RunState::run_node_untraced(std::uint32_t id, const ExecNode& node, const KernelFusion* fusion) {
  try {
    if (node.kind == TaskKind::kernel) {
      const ExecContext ctx(use_team ? static_cast<ChunkRunner*>(&team) : pool, stream->num_threads);
      if (fusion) {  // both outside groups: their blocks are the arena's
        const ExecNode& second = graph->nodes[graph->succ[node.succ_begin]];
        fusion->cpu(node.params, node.param_size, second.params, second.param_size, ctx);
      } else if (node.group < 0) {
        node.fn(node.params, node.param_size, ctx);
      } else {
        const auto g = static_cast<std::size_t>(node.group);
        SetRef& pin = pinned[g];
        if (node.group_pos == 0)
          pin = graph->groups[g]->pick(table.get() ? table.get()->sets[g].get() : nullptr);
        const ParamBytes& p = pin->params[node.group_pos];
        node.fn(p.data(), p.size(), ctx);
      }
    } else {
      if (!execute_builtin(node.kind, node.params, node.object, node.value,
                           WaitSite{stream, graph->graph_id, id}))
        cancelled.store(true, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    stream->report_error(cat("graph ", graph->graph_id, " ", describe(id, fusion), " failed: ", e.what()));
  } catch (...) {
    stream->report_error(cat("graph ", graph->graph_id, " ", describe(id, fusion), " failed"));
  }
}

std::string RunState::describe(std::uint32_t id, const KernelFusion* fusion) const {
  if (!fusion) return graph->describe(id);
  return cat(graph->describe(id), " (fused as '", fusion->name, "' with ",
             graph->describe(graph->succ[graph->nodes[id].succ_begin]), ")");
}

void RunState::work(bool owner) {
  const auto& nodes = graph->nodes;
  const auto& succ = graph->succ;
  const auto& sources = graph->sources;
  const auto nsources = static_cast<std::uint32_t>(sources.size());
  const std::uint32_t threads = static_cast<std::uint32_t>(std::max(1, stream->num_threads));
  std::uint32_t next = kNone, src = 0, src_end = 0, sinks_done = 0;
  for (;;) {
    std::uint32_t id;
    if (next != kNone) {
      id = next;
      next = kNone;
    } else if (src < src_end) {
      id = sources[src++];
    } else if (next_source.load(std::memory_order_relaxed) < nsources) {
      // Claim a batch: a share of what is left, so threads rarely meet on the cursor.
      const std::uint32_t left = nsources - std::min(nsources, next_source.load(std::memory_order_relaxed));
      const std::uint32_t batch = parallel ? std::max(1u, left / (2 * threads)) : left;
      src = next_source.fetch_add(batch, std::memory_order_relaxed);
      src_end = std::min(nsources, src + batch);
      continue;
    } else if (pop_ready(id)) {
    } else {
      finish_sinks(sinks_done);
      sinks_done = 0;
      if (!owner) return;
      if (sinks_left.load(std::memory_order_acquire) == 0) return;
      // Wait for helpers: spin a little, then sleep until they push work or finish the last sink.
      bool found = false;
      for (int i = 0; i < 2000 && !found; ++i)
        found = ready_count.load(std::memory_order_acquire) > 0 ||
                sinks_left.load(std::memory_order_acquire) == 0;
      if (!found) {
        owner_waiting.store(true);
        std::unique_lock lock(wake_mu);
        wake_cv.wait_for(lock, std::chrono::milliseconds(1), [&] {
          return ready_count.load() > 0 || sinks_left.load() == 0;
        });
        owner_waiting.store(false);
      }
      continue;
    }
    run_node(id);
    const ExecNode& node = nodes[id];
    if (node.succ_begin == node.succ_end) {
      ++sinks_done;
      continue;
    }
    for (std::uint32_t k = node.succ_begin; k < node.succ_end; ++k) {
      const std::uint32_t s = succ[k];
      const ExecNode& sn = nodes[s];
      if (sn.single_pred ||
          counters[static_cast<std::size_t>(sn.counter)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        if (next == kNone) next = s;
        else push_ready(s);
      }
    }
  }
}

void CpuGraph::replay(ExecGraph& g, TablePin pin, LaunchTicket ticket, StreamState& stream) {
  run_graph(g, std::move(pin), std::move(ticket), stream, compute_pool());
}

void run_graph(ExecGraph& graph, TablePin pin, LaunchTicket ticket, StreamState& stream,
               ComputePool& pool) {
  // A host launch has its turn; a launch by a graph's node has none (Note [Replay order]).
  const bool had_turn = ticket.held();
  const std::uint64_t turn = ticket.turn();
  ticket.consume();  // from here the turn is waited for and served (or given up) below
  if (!begin_replay(graph, had_turn ? &turn : nullptr, stream)) return;  // the stream is going away
  auto& cpu = static_cast<CpuGraph&>(*graph.backend);
  std::unique_ptr<RunState> run;
  {
    std::lock_guard lock(cpu.runs_mu);
    if (!cpu.free_runs.empty()) {
      run = std::move(cpu.free_runs.back());
      cpu.free_runs.pop_back();
    }
  }
  if (!run) run = std::make_unique<RunState>(cpu);
  run->stream = &stream;
  run->pool = &pool;
  run->table = pin.get() ? std::move(pin) : graph.pin_table();
  for (std::size_t i = 0; i < graph.counter_init.size(); ++i)
    run->counters[i].store(graph.counter_init[i], std::memory_order_relaxed);
  run->next_source.store(0, std::memory_order_relaxed);
  run->cancelled.store(false, std::memory_order_relaxed);
  run->sinks_left.store(graph.sinks, std::memory_order_release);
  // A chain runs one node at a time, here: its kernels' chunks go to one team for the whole replay.
  // Set before post(): a parallel graph's helpers read use_team.
  run->use_team = !run->parallel && stream.num_threads > 1 && pool.helpers() > 0;
  if (run->use_team) run->team.begin(pool, stream.num_threads - 1);
  const bool helpers = run->parallel && stream.num_threads > 1 && pool.helpers() > 0;
  if (helpers) pool.post(run.get(), stream.num_threads - 1);
  run->work(/*owner=*/true);
  if (helpers) pool.retire(run.get());
  if (run->use_team) run->team.end();
  for (auto& p : run->pinned) p.reset();
  run->table.reset();
  {
    std::lock_guard lock(cpu.runs_mu);
    cpu.free_runs.push_back(std::move(run));
  }
  end_replay(graph, had_turn);
}

}  // namespace npugraph::detail
