// A chain of n empty tasks, npugraph: one replay + synchronize per iteration. Peers in this folder:
// oneTBB flow graph (tbb_flow_graph.cpp) and a plain loop of function calls (plain_loop.cpp).
#include "bench_util.hpp"

namespace {

void BM_Chain_Npugraph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  npugraph::GraphExec exec = npugraph::bench::noop_graph(n, /*chain=*/true);
  npugraph::Stream s = npugraph::Stream::create();
  for (auto _ : state) {
    exec.launch(s);
    s.synchronize();
  }
  npugraph::bench::per_task_counter(state, n);
}
BENCHMARK(BM_Chain_Npugraph)->Arg(1000)->UseRealTime();

}  // namespace
