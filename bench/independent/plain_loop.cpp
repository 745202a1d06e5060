// The floor for independent tasks: n calls of the same empty kernel function (no dependencies to
// honour either way).
#include "bench_util.hpp"

namespace {
void BM_Independent_PlainLoop(benchmark::State& state) { npugraph::bench::plain_loop(state); }
BENCHMARK(BM_Independent_PlainLoop)->Arg(1000)->UseRealTime();
}  // namespace
