// Task update of FIA tasks, npugraph, beside its peer in this folder (recapture.cpp: capturing and
// instantiating the same graph again, the cost an update avoids).
//   - one group of one FIA task, stream-ordered (torch_npu semantics: a patch task) and launch-ordered;
//   - one batched update of 80 groups (a decode step), both orders.
// Each includes the op's whole host path (argument checks, planning, the parameter block).
#include "bench_util.hpp"

namespace ng = npugraph;

namespace {

void update_bench(benchmark::State& state, int groups, ng::UpdateOrder order) {
  ng::bench::FiaStepGraph f(groups);
  f.capture();
  ng::Stream u = ng::Stream::create();
  ng::StreamGuard on(u);
  ng::ops::FiaOptions next = f.opt;
  std::int64_t len = 1;
  for (auto _ : state) {
    next.actual_seq_lengths[0] = len = len % 100 + 1;
    ng::task_update_begin(u, f.handles, order);
    f.reissue(next);
    ng::task_update_end(u);
  }
  u.synchronize();
  ng::bench::per_task_counter(state, groups, "s_per_group");
}

void BM_Update_Fia1_StreamOrder(benchmark::State& s) { update_bench(s, 1, ng::UpdateOrder::stream); }
void BM_Update_Fia1_LaunchOrder(benchmark::State& s) { update_bench(s, 1, ng::UpdateOrder::launch); }
void BM_Update_Fia80Batched_StreamOrder(benchmark::State& s) { update_bench(s, 80, ng::UpdateOrder::stream); }
void BM_Update_Fia80Batched_LaunchOrder(benchmark::State& s) { update_bench(s, 80, ng::UpdateOrder::launch); }
BENCHMARK(BM_Update_Fia1_StreamOrder);
BENCHMARK(BM_Update_Fia1_LaunchOrder);
BENCHMARK(BM_Update_Fia80Batched_StreamOrder);
BENCHMARK(BM_Update_Fia80Batched_LaunchOrder);

}  // namespace
