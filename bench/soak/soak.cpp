// Soak: update -> replay cycles of the seed's FIA step on two streams paired by ExternalEvents, an
// updater thread and a replayer thread running free on the host (the streams keep them in step).
// Every replay's output is compared, inside the replay, with the eager output for the length that
// cycle's update set; RSS is sampled. Counters: cycles_per_s, wrong (must be 0), rss_growth_kB
// (from 10 % of the run to its end), cycles. NPUGRAPH_SOAK_CYCLES sets the cycle count (default
// 1,000,000; about 1-3 minutes on a 2-core VM).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace {

namespace ng = npugraph;

long rss_kb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4;  // 4 KiB pages
}

ng::Tensor random_f16(const ng::Shape& shape, unsigned seed) {
  ng::Tensor t = ng::empty(shape, ng::f16);
  auto* p = static_cast<ng::half*>(t.data());
  unsigned x = seed * 2654435761u + 1;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = ng::half(static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
  }
  return t;
}

void Soak(benchmark::State& state) {
  const char* env = std::getenv("NPUGRAPH_SOAK_CYCLES");
  const long cycles = env ? std::atol(env) : 1000000;
  // The seed's decode shape, with a KV length to update each cycle.
  const ng::Tensor q = random_f16({1, 32, 1, 128}, 1), k = random_f16({1, 32, 256, 128}, 2),
                   v = random_f16({1, 32, 256, 128}, 3);
  ng::ops::FiaOptions opt{.actual_seq_lengths_kv = {256}, .num_heads = 32, .scale = 0.088,
                          .input_layout = "BNSD"};
  constexpr int kLengths = 16;
  std::vector<ng::Tensor> expected;
  for (int i = 0; i < kLengths; ++i) {
    opt.actual_seq_lengths_kv = {16 * (i + 1)};
    expected.push_back(ng::ops::fused_infer_attention_score(q, k, v, opt).attention_out);
  }
  ng::device_synchronize();
  auto length_of = [](long cycle) { return static_cast<int>(cycle % kLengths); };

  ng::ExternalEvent ready("params_ready"), done("replay_done");
  ready.set_wait_deadline(std::chrono::seconds(60));
  done.set_wait_deadline(std::chrono::seconds(60));
  std::atomic<long> replayed{0}, wrong{0};
  ng::Graph g;
  ng::TaskGroupHandle handle;
  ng::Tensor ws, out, lse;
  opt.actual_seq_lengths_kv = {256};
  {
    ng::CaptureScope capture(g);
    const ng::Stream s = ng::current_stream();
    ws = ng::ops::fia_max_workspace(q, k, v, opt);
    out = ng::empty({1, 32, 1, 128}, ng::f16);
    lse = ng::empty({1}, ng::f32);
    ready.wait(s);
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    handle = ng::task_group_end(s);
    ng::launch_host_func(s, [&] {
      const ng::Tensor& want = expected[static_cast<std::size_t>(length_of(replayed.load()))];
      if (std::memcmp(out.data(), want.data(), want.nbytes()) != 0) ++wrong;
      ++replayed;
    });
    done.record(s);
  }
  for (auto _ : state) {
    const ng::Stream u = ng::Stream::create(), r = ng::Stream::create();
    done.record(u);  // the first update needs no replay before it
    long rss_start = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread updater([&] {
      ng::StreamGuard on(u);
      ng::ops::FiaOptions o = opt;
      for (long c = 0; c < cycles; ++c) {
        done.wait(u);  // the previous replay has run: its parameters may be replaced
        o.actual_seq_lengths_kv = {16 * (length_of(c) + 1)};
        ng::task_update_begin(u, handle);
        ng::ops::fused_infer_attention_score_out(q, k, v, o, ws, out, lse);
        ng::task_update_end(u);
        ready.record(u);
        if (c % 4096 == 4095) u.synchronize();  // bound how far the host runs ahead
      }
      u.synchronize();
    });
    std::thread replayer([&] {
      for (long c = 0; c < cycles; ++c) {
        g.replay(r);
        if (c == cycles / 10) {
          r.synchronize();
          rss_start = rss_kb();
        }
        if (c % 4096 == 4095) r.synchronize();
      }
      r.synchronize();
    });
    updater.join();
    replayer.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(seconds);
    state.counters["cycles"] = static_cast<double>(replayed.load());
    state.counters["cycles_per_s"] = static_cast<double>(replayed.load()) / seconds;
    state.counters["wrong"] = static_cast<double>(wrong.load());
    state.counters["rss_growth_kB"] = static_cast<double>(rss_kb() - rss_start);
    done.wait(u);  // leave the pair as it started (done set once)
    u.synchronize();
  }
}
BENCHMARK(Soak)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);

}  // namespace
