// The floor for the chain: n calls of the same empty kernel function through a function pointer.
#include "bench_util.hpp"

namespace {
void BM_Chain_PlainLoop(benchmark::State& state) { npugraph::bench::plain_loop(state); }
BENCHMARK(BM_Chain_PlainLoop)->Arg(1000)->UseRealTime();
}  // namespace
