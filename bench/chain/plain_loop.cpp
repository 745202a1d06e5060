// The floor: n calls of the same empty kernel function through a function pointer, in a loop.
#include "bench_util.hpp"

namespace {

void BM_Chain_PlainLoop(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  npugraph::KernelFn fn = npugraph::ops::noop_kernel().cpu;
  benchmark::DoNotOptimize(fn);
  const npugraph::ExecContext ctx(nullptr, 1);
  const int dummy = 0;
  for (auto _ : state)
    for (int i = 0; i < n; ++i) fn(&dummy, sizeof dummy, ctx);
  npugraph::bench::per_task_counter(state, n);
}
BENCHMARK(BM_Chain_PlainLoop)->Arg(1000)->UseRealTime();

}  // namespace
