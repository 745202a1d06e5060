// Per-replay state of the cpu graph executor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/compute_pool.hpp"
#include "backends/cpu/replay_team.hpp"
#include "graph/exec_graph.hpp"

namespace npugraph::detail {

// The cpu backend's executable form of a graph: replay states, reused from replay to replay (a
// nested launch inside a replay takes another).
struct RunState;
struct CpuGraph final : BackendGraph {
  explicit CpuGraph(ExecGraph& g);  // plans the fused pairs (fusion_plan.cpp)
  void replay(ExecGraph& g, TablePin pin, LaunchTicket ticket, StreamState& stream) override;  // run_graph
  std::uint32_t fused_pairs() const override { return fused_count; }
  ExecGraph* graph;
  std::mutex runs_mu;
  std::vector<std::unique_ptr<RunState>> free_runs;

  // Note [Kernel fusion] (npugraph/kernel.hpp): per node, the fusion it runs with its only successor
  // (null: none), and whether it ran already, inside its predecessor's fused task. Empty when no pair
  // fused.
  struct Fused {
    const KernelFusion* run = nullptr;
    bool absorbed = false;
  };
  std::vector<Fused> fused;
  std::uint32_t fused_count = 0;
};

struct RunState final : ComputePool::Job {
  explicit RunState(const CpuGraph& cpu);

  bool has_work() const override;
  void help() override;

  // Runs nodes until none is claimable; the owner also waits until every sink has run.
  void work(bool owner);

  const ExecGraph* graph = nullptr;
  const CpuGraph* cpu = nullptr;
  StreamState* stream = nullptr;
  ComputePool* pool = nullptr;
  bool parallel = false;  // whether helpers are invited
  bool use_team = false;  // a chain's kernels run their chunks on `team` (Note [A replay's team])
  ReplayTeam team;

  std::unique_ptr<std::atomic<std::int32_t>[]> counters;
  TablePin table;                // the launch table pinned at launch (Note [Update order])
  std::vector<SetRef> pinned;    // per group, picked at its first task

  std::atomic<bool> cancelled{false};  // a wait gave up: skip the rest (Note [Stalls])
  std::atomic<std::uint32_t> next_source{0};
  std::atomic<std::uint32_t> sinks_left{0};

  std::mutex ready_mu;
  std::vector<std::uint32_t> ready;
  std::atomic<std::int32_t> ready_count{0};

  std::mutex wake_mu;
  std::condition_variable wake_cv;
  std::atomic<bool> owner_waiting{false};

 private:
  void run_node(std::uint32_t node);  // traced while a trace runs (npugraph/trace.hpp)
  void run_node_untraced(std::uint32_t id, const ExecNode& node, const KernelFusion* fusion);
  std::string describe(std::uint32_t id, const KernelFusion* fusion) const;  // for errors
  void push_ready(std::uint32_t node);
  bool pop_ready(std::uint32_t& node);
  void finish_sinks(std::uint32_t count);
};

}  // namespace npugraph::detail
