// Host-path benchmarks of the runtime core: eager enqueue, replay dispatch, launch latency, task
// update of one FIA task, and re-capture + instantiate of the same graph (the cost an update avoids).
//
//   ./build/bench_runtime --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace ng = npugraph;
using clk = std::chrono::steady_clock;

namespace {

constexpr int kBatch = 1000;

// Seconds per task, printed with an SI prefix ("8.5n" is 8.5 ns).
void per_task_counter(benchmark::State& state, double tasks_per_iteration) {
  state.counters["s_per_task"] = benchmark::Counter(
      tasks_per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Host time to issue one kernel launch on an idle-ish stream (the worker drains concurrently).
void BM_EagerEnqueue(benchmark::State& state) {
  ng::Stream s = ng::Stream::create();
  const auto& k = ng::ops::noop_kernel();
  const int dummy = 0;
  for (auto _ : state) {
    const auto t0 = clk::now();
    for (int i = 0; i < kBatch; ++i) ng::launch(s, k, dummy);
    const auto t1 = clk::now();
    s.synchronize();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  per_task_counter(state, kBatch);
}
BENCHMARK(BM_EagerEnqueue)->UseManualTime();

ng::GraphExec make_graph(int n, bool chain) {
  ng::GraphDef def;
  const int dummy = 0;
  ng::GraphDef::NodeId prev = 0;
  for (int i = 0; i < n; ++i) {
    const ng::GraphDef::NodeId deps[] = {prev};
    prev = def.add_kernel(ng::ops::noop_kernel(), dummy,
                          chain && i ? std::span<const ng::GraphDef::NodeId>(deps)
                                     : std::span<const ng::GraphDef::NodeId>());
  }
  return def.instantiate();
}

// Replays of a graph of empty kernels, 10 replays per synchronize: per-task dispatch cost.
void replay_bench(benchmark::State& state, bool chain) {
  const int n = static_cast<int>(state.range(0));
  ng::GraphExec exec = make_graph(n, chain);
  ng::Stream s = ng::Stream::create();
  for (auto _ : state) {
    for (int r = 0; r < 10; ++r) exec.launch(s);
    s.synchronize();
  }
  per_task_counter(state, 10.0 * n);
}
void BM_ReplayChain(benchmark::State& state) { replay_bench(state, true); }
void BM_ReplayIndependent(benchmark::State& state) { replay_bench(state, false); }
BENCHMARK(BM_ReplayChain)->Arg(1000)->UseRealTime();
BENCHMARK(BM_ReplayIndependent)->Arg(1000)->UseRealTime();

// Host latency of launching a 1-task graph and waiting for it.
void BM_LaunchSynchronize1Task(benchmark::State& state) {
  ng::GraphExec exec = make_graph(1, true);
  ng::Stream s = ng::Stream::create();
  for (auto _ : state) {
    exec.launch(s);
    s.synchronize();
  }
}
BENCHMARK(BM_LaunchSynchronize1Task)->UseRealTime();

// The seed's decode FIA, captured once in a task group.
struct FiaGraph {
  ng::Tensor q = ng::zeros({1, 32, 1, 128}, ng::f16), k = ng::zeros({1, 32, 1, 128}, ng::f16),
             v = ng::zeros({1, 32, 1, 128}, ng::f16);
  ng::ops::FiaOptions opt{.actual_seq_lengths = {29}, .num_heads = 32, .scale = 128.0,
                          .pre_tokens = 65535, .next_tokens = 65535, .input_layout = "BNSD"};
  ng::Tensor ws, out, lse;
  ng::Graph g;
  ng::TaskGroupHandle handle;

  void capture() {
    ng::CaptureScope c(g);
    ng::Stream s = ng::current_stream();
    ws = ng::ops::fia_max_workspace(q, k, v, opt);
    out = ng::empty({1, 32, 1, 128}, ng::f16);
    lse = ng::empty({1}, ng::f16);
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    handle = ng::task_group_end(s);
  }
};

// One stream-ordered update of one FIA task: begin + op (checks, planning) + end (patch enqueued).
void BM_FiaTaskUpdate(benchmark::State& state) {
  FiaGraph f;
  f.capture();
  ng::Stream u = ng::Stream::create();
  ng::StreamGuard on(u);
  ng::ops::FiaOptions next = f.opt;
  std::int64_t len = 1;
  for (auto _ : state) {
    next.actual_seq_lengths[0] = len = len % 100 + 1;
    ng::task_update_begin(u, f.handle);
    ng::ops::fused_infer_attention_score_out(f.q, f.k, f.v, next, f.ws, f.out, f.lse);
    ng::task_update_end(u);
  }
  u.synchronize();
}
BENCHMARK(BM_FiaTaskUpdate);

// What an update avoids: capturing and instantiating the same graph again.
void BM_FiaRecaptureInstantiate(benchmark::State& state) {
  FiaGraph f;
  for (auto _ : state) {
    f.g.reset();
    f.capture();
  }
}
BENCHMARK(BM_FiaRecaptureInstantiate);

}  // namespace

BENCHMARK_MAIN();
