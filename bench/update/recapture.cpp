// The peer of an update: capturing and instantiating the same graph again (1 FIA group, 80 groups).
#include "bench_util.hpp"

namespace {

void recapture_bench(benchmark::State& state, int groups) {
  npugraph::bench::FiaStepGraph f(groups);
  for (auto _ : state) {
    f.g.reset();
    f.capture();
  }
  npugraph::bench::per_task_counter(state, groups, "s_per_group");
}
void BM_Recapture_Fia1(benchmark::State& s) { recapture_bench(s, 1); }
void BM_Recapture_Fia80(benchmark::State& s) { recapture_bench(s, 80); }
BENCHMARK(BM_Recapture_Fia1);
BENCHMARK(BM_Recapture_Fia80);

}  // namespace
