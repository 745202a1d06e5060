// Shared helpers of the host-path benchmarks (bench/chain, bench/independent, bench/runtime,
// bench/update).
#pragma once

#include <benchmark/benchmark.h>

#include <span>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace npugraph::bench {

// Seconds per task, printed with an SI prefix ("8.5n" is 8.5 ns).
inline void per_task_counter(benchmark::State& state, double tasks_per_iteration,
                             const char* name = "s_per_task") {
  state.counters[name] = benchmark::Counter(
      tasks_per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// A graph of n empty kernels (ops::noop_kernel), chained or independent, built with GraphDef.
inline GraphExec noop_graph(int n, bool chain) {
  GraphDef def;
  const int dummy = 0;
  GraphDef::NodeId prev = 0;
  for (int i = 0; i < n; ++i) {
    const GraphDef::NodeId deps[] = {prev};
    prev = def.add_kernel(ops::noop_kernel(), dummy,
                          chain && i ? std::span<const GraphDef::NodeId>(deps)
                                     : std::span<const GraphDef::NodeId>());
  }
  return def.instantiate();
}

// One replay + synchronize of an n-task noop graph per iteration (chained or independent).
inline void replay_and_wait(benchmark::State& state, bool chain) {
  const int n = static_cast<int>(state.range(0));
  GraphExec exec = noop_graph(n, chain);
  Stream s = Stream::create();
  for (auto _ : state) {
    exec.launch(s);
    s.synchronize();
  }
  per_task_counter(state, n);
}

// The floor: n calls of the same empty kernel function through a function pointer, in a loop.
inline void plain_loop(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  KernelFn fn = ops::noop_kernel().cpu;
  benchmark::DoNotOptimize(fn);
  const ExecContext ctx(nullptr, 1);
  const int dummy = 0;
  for (auto _ : state)
    for (int i = 0; i < n; ++i) fn(&dummy, sizeof dummy, ctx);
  per_task_counter(state, n);
}

// The seed's decode FIA (query/key/value 1x32x1x128 fp16, BNSD), `groups` times, each call in its own
// task group of one graph: the shape of a decode step's attention layers. With `others` > 0, each
// layer also launches that many other (empty) kernels: a whole decode step's graph.
struct FiaStepGraph {
  explicit FiaStepGraph(int groups, int others = 0) : n(groups), other_kernels(others) {}

  int n;
  int other_kernels;
  Tensor q = zeros({1, 32, 1, 128}, f16), k = zeros({1, 32, 1, 128}, f16),
         v = zeros({1, 32, 1, 128}, f16);
  ops::FiaOptions opt{.actual_seq_lengths = {29}, .num_heads = 32, .scale = 128.0,
                      .pre_tokens = 65535, .next_tokens = 65535, .input_layout = "BNSD"};
  Tensor ws, lse;
  std::vector<Tensor> out;
  Graph g;
  std::vector<TaskGroupHandle> handles;

  void capture() {
    CaptureScope c(g);
    Stream s = current_stream();
    ws = ops::fia_max_workspace(q, k, v, opt);
    lse = empty({1}, f16);
    out.clear();
    handles.clear();
    const int dummy = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < other_kernels; ++j) launch(s, ops::noop_kernel(), dummy);
      out.push_back(empty({1, 32, 1, 128}, f16));
      task_group_begin(s);
      ops::fused_infer_attention_score_out(q, k, v, opt, ws, out.back(), lse);
      handles.push_back(task_group_end(s));
    }
  }

  // Re-issues every call with new actual lengths (between task_update_begin and _end).
  void reissue(const ops::FiaOptions& next) {
    for (int i = 0; i < n; ++i) ops::fused_infer_attention_score_out(q, k, v, next, ws, out[i], lse);
  }
};

}  // namespace npugraph::bench
