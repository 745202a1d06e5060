// n independent empty tasks, npugraph: one replay + synchronize per iteration (the compute pool's
// helpers join). Peers in this folder: oneTBB flow graph and a plain loop of function calls.
#include "bench_util.hpp"

namespace {
void BM_Independent_Npugraph(benchmark::State& state) { npugraph::bench::replay_and_wait(state, false); }
BENCHMARK(BM_Independent_Npugraph)->Arg(1000)->UseRealTime();
}  // namespace
