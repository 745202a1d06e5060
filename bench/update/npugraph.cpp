// Task update of FIA tasks, npugraph, beside its peer in this folder (recapture.cpp: capturing and
// instantiating the same graph again, the cost an update avoids).
//   - one group of one FIA task, stream-ordered (torch_npu semantics: a patch task) and launch-ordered;
//   - one batched update of 80 groups (a decode step), both orders;
//   - the same re-issued with the host values only (fused_infer_attention_score_update);
//   - 80 groups after the caches were flushed (a 64 MiB read between updates, untimed), as an update
//     finds them after a decode step has streamed the model's weights: both forms.
// Each includes the op's whole host path (argument checks, planning, the parameter block).
#include <cstdint>
#include <vector>

#include "bench_util.hpp"

namespace ng = npugraph;

namespace {

enum class Reissue { out_form, host_values };

// Reads 64 MiB: what the update touches leaves the caches (the machines' L3 is up to 260 MiB, but
// shared with the neighbours and with this process's other data).
void flush_caches() {
  static std::vector<std::uint64_t> big(std::size_t{8} << 20, 1);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < big.size(); i += 8) sum += big[i];
  benchmark::DoNotOptimize(sum);
}

void update_bench(benchmark::State& state, int groups, ng::UpdateOrder order,
                  Reissue how = Reissue::out_form, bool cold = false) {
  ng::bench::FiaStepGraph f(groups);
  f.capture();
  ng::Stream u = ng::Stream::create();
  ng::StreamGuard on(u);
  ng::ops::FiaOptions next = f.opt;
  std::int64_t len = 1;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      u.synchronize();
      flush_caches();
      state.ResumeTiming();
    }
    next.actual_seq_lengths[0] = len = len % 100 + 1;
    ng::task_update_begin(u, f.handles, order);
    if (how == Reissue::out_form) {
      f.reissue(next);
    } else {
      const ng::ops::FiaHostValues host = ng::ops::FiaHostValues::of(next);
      for (int i = 0; i < groups; ++i) ng::ops::fused_infer_attention_score_update(u, host);
    }
    ng::task_update_end(u);
  }
  u.synchronize();
  ng::bench::per_task_counter(state, groups, "s_per_group");
}

constexpr auto kStream = ng::UpdateOrder::stream;
void BM_Update_Fia1_StreamOrder(benchmark::State& s) { update_bench(s, 1, kStream); }
void BM_Update_Fia1_LaunchOrder(benchmark::State& s) { update_bench(s, 1, ng::UpdateOrder::launch); }
void BM_Update_Fia80Batched_StreamOrder(benchmark::State& s) { update_bench(s, 80, kStream); }
void BM_Update_Fia80Batched_LaunchOrder(benchmark::State& s) { update_bench(s, 80, ng::UpdateOrder::launch); }
void BM_Update_Fia1_HostValues(benchmark::State& s) { update_bench(s, 1, kStream, Reissue::host_values); }
void BM_Update_Fia80Batched_HostValues(benchmark::State& s) {
  update_bench(s, 80, kStream, Reissue::host_values);
}
void BM_Update_Fia80Batched_StreamOrder_Cold(benchmark::State& s) {
  update_bench(s, 80, kStream, Reissue::out_form, true);
}
void BM_Update_Fia80Batched_HostValues_Cold(benchmark::State& s) {
  update_bench(s, 80, kStream, Reissue::host_values, true);
}
BENCHMARK(BM_Update_Fia1_StreamOrder);
BENCHMARK(BM_Update_Fia1_LaunchOrder);
BENCHMARK(BM_Update_Fia80Batched_StreamOrder);
BENCHMARK(BM_Update_Fia80Batched_LaunchOrder);
BENCHMARK(BM_Update_Fia1_HostValues);
BENCHMARK(BM_Update_Fia80Batched_HostValues);
BENCHMARK(BM_Update_Fia80Batched_StreamOrder_Cold)->Iterations(300);
BENCHMARK(BM_Update_Fia80Batched_HostValues_Cold)->Iterations(300);

}  // namespace
