// Host-path costs of the runtime core: eager enqueue per launch, launch + synchronize latency of a
// 1-task graph, and what big graphs cost: capture + instantiate per task, replay per task, and memory
// per task of a 100,000-task graph.
#include <malloc.h>

#include <chrono>

#include "bench_util.hpp"

namespace ng = npugraph;
using clk = std::chrono::steady_clock;

namespace {

constexpr int kBatch = 1000;

// Host time to issue one kernel launch (the worker drains concurrently; the synchronize is untimed).
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
  ng::bench::per_task_counter(state, kBatch);
}
BENCHMARK(BM_EagerEnqueue)->UseManualTime();

// Host latency of launching a 1-task graph and waiting for it.
void BM_LaunchSynchronize1Task(benchmark::State& state) {
  ng::GraphExec exec = ng::bench::noop_graph(1, true);
  ng::Stream s = ng::Stream::create();
  for (auto _ : state) {
    exec.launch(s);
    s.synchronize();
  }
}
BENCHMARK(BM_LaunchSynchronize1Task)->UseRealTime();

// Stream capture of n empty launches (a chain on one stream) + instantiate, per task.
void capture(ng::Graph& g, int n) {
  const auto& k = ng::ops::noop_kernel();
  const int dummy = 0;
  ng::CaptureScope c(g);
  ng::Stream s = ng::current_stream();
  for (int i = 0; i < n; ++i) ng::launch(s, k, dummy);
}

void BM_CaptureInstantiate(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    ng::Graph g;
    capture(g, n);
    state.PauseTiming();  // the graph's destruction is not part of the cost
    g = ng::Graph();
    state.ResumeTiming();
  }
  ng::bench::per_task_counter(state, n);
}
BENCHMARK(BM_CaptureInstantiate)->Arg(1000)->Arg(100000)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Replay + synchronize of the captured n-task chain, per task.
void BM_ReplayCaptured(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ng::Graph g;
  capture(g, n);
  ng::Stream s = ng::Stream::create();
  for (auto _ : state) {
    g.replay(s);
    s.synchronize();
  }
  ng::bench::per_task_counter(state, n);
}
BENCHMARK(BM_ReplayCaptured)->Arg(100000)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Heap bytes held by a captured + instantiated graph, per task, at two sizes (linear when equal).
void BM_MemoryPerTask(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  double per_task = 0;
  for (auto _ : state) {
    malloc_trim(0);
    const struct mallinfo2 before = mallinfo2();
    ng::Graph g;
    capture(g, n);
    const struct mallinfo2 after = mallinfo2();
    const double used = static_cast<double>(after.uordblks + after.hblkhd) -
                        static_cast<double>(before.uordblks + before.hblkhd);
    per_task = used / n;
  }
  state.counters["bytes_per_task"] = per_task;
}
BENCHMARK(BM_MemoryPerTask)->Arg(1000)->Arg(100000)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
