// A chain of n empty tasks, npugraph: one replay + synchronize per iteration. Peers in this folder:
// oneTBB flow graph (tbb_flow_graph.cpp) and a plain loop of function calls (plain_loop.cpp).
#include "bench_util.hpp"

namespace {
void BM_Chain_Npugraph(benchmark::State& state) { npugraph::bench::replay_and_wait(state, true); }
BENCHMARK(BM_Chain_Npugraph)->Arg(1000)->UseRealTime();
}  // namespace
