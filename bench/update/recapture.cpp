// The peer of an update: capturing and instantiating the same graph again — the 1-FIA seed graph, the
// 80-group graph, and a decode step's graph (80 layers of 24 other kernels + 1 FIA group each).
#include "bench_util.hpp"

namespace {

void recapture_bench(benchmark::State& state, int groups, int others = 0) {
  npugraph::bench::FiaStepGraph f(groups, others);
  for (auto _ : state) {
    f.g.reset();
    f.capture();
  }
  npugraph::bench::per_task_counter(state, groups, "s_per_group");
}
void BM_Recapture_Fia1(benchmark::State& s) { recapture_bench(s, 1); }
void BM_Recapture_Fia80(benchmark::State& s) { recapture_bench(s, 80); }
void BM_Recapture_DecodeStep(benchmark::State& s) { recapture_bench(s, 80, 24); }
BENCHMARK(BM_Recapture_Fia1);
BENCHMARK(BM_Recapture_Fia80);
BENCHMARK(BM_Recapture_DecodeStep)->Unit(benchmark::kMicrosecond);

}  // namespace
