// bench_attention: the attention kernels of issue 6 against this machine's roofline, measured first
// in the same run, and against the simple kernel they replace (FiaKernelMode::simple).
//
//   roofline/dram_read     GBps        streaming read of 1 GiB on every core (best of 5 passes)
//   roofline/fma_f32       GFLOPs      register-resident SIMD FMA chains on every core
//   fia/<case>/<kernel>    real_time   one `.out` call + stream synchronize
//                          GBps, bw_frac       decode: KV bytes read / time, / dram_read
//                          probe_GBps, bw_frac_probe   decode: a 256 MiB read probe run right
//                                              before and after the case (mean), and GBps / it:
//                                              this VM's DRAM rate drifts (40-75 GB/s seen
//                                              within minutes), so the run-start roofline alone
//                                              can be far from what the case had
//                          GFLOPs, peak_frac   prefill: unmasked FLOPs / time, / fma_f32
//   fia/decode_f16_small_*/fast_graph   us_per_call: 30 calls captured in a graph and replayed (the
//                          engine's form: no eager host path), per call; GBps as above (cold
//                          cases: one call per copy of the inputs, each from DRAM)
//   fia/<case>_hot/fast    the same counters for a KV that stays in the last-level cache (no probe): the kernels'
//                          compute rate; bw_frac > 1 is the headroom over DRAM
//
// NPUGRAPH_BENCH_SIMD_TARGET=AVX2 runs every case on the AVX2 code path (bench/support/machine.cpp).
// The PyTorch peer of the same cases is bench/attention/torch_peer.py.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>

#include "attention/fia_cases.hpp"
#include "attention/roofline.hpp"
#include "ops/attention/fia_kernel_mode.hpp"

namespace npugraph_bench {
namespace {

namespace ng = npugraph;
using ng::ops::attention::FiaKernelMode;

void BM_dram_read(benchmark::State& state) {
  double best = 0;
  for (auto _ : state) best = best_read_bandwidth();
  note_read_bandwidth(best);
  state.counters["GBps"] = best / 1e9;
  state.counters["threads"] = roofline_threads();
}

void BM_fma_peak(benchmark::State& state) {
  double best = 0;
  for (auto _ : state) best = best_fma_peak();
  note_fma_peak(best);
  state.counters["GFLOPs"] = best / 1e9;
  state.counters["threads"] = roofline_threads();
}

void BM_fia(benchmark::State& state, const FiaCaseSpec& spec, FiaKernelMode mode) {
  const FiaCase& c = fia_case(spec);
  const Roofline roof = roofline();
  ng::ops::attention::set_fia_kernel_mode(mode);
  const ng::Stream stream = ng::current_stream();
  auto call = [&](const FiaInputs& in) {
    ng::ops::fused_infer_attention_score_out(in.q, in.k, in.v, in.opt, c.workspace, c.out, c.lse);
    stream.synchronize();
  };
  // Warm: first touch of the outputs and the workspace (shared by both kernels of a case; the
  // simple prefill, seconds per call, relies on the fast run before it).
  if (spec.q_len == 1 || mode == FiaKernelMode::fast) call(c.copies.front());
  const bool decode = spec.q_len == 1;
  constexpr std::size_t kProbeBytes = std::size_t{256} << 20;
  const bool probe_dram = decode && !spec.hot;
  const double probe0 = probe_dram ? measure_read_bandwidth(kProbeBytes, roofline_threads(), 3) : 0;
  std::size_t i = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) call(c.copies[i++ % c.copies.size()]);
  const double per_call =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  ng::ops::attention::set_fia_kernel_mode(FiaKernelMode::fast);
  if (decode) {
    state.counters["GBps"] = c.kv_bytes / per_call / 1e9;
    state.counters["bw_frac"] = c.kv_bytes / per_call / roof.read_bytes_per_s;
    if (probe_dram) {
      const double probe =
          (probe0 + measure_read_bandwidth(kProbeBytes, roofline_threads(), 3)) / 2;
      state.counters["probe_GBps"] = probe / 1e9;
      state.counters["bw_frac_probe"] = c.kv_bytes / per_call / probe;
    }
  } else {
    state.counters["GFLOPs"] = c.flops / per_call / 1e9;
    state.counters["peak_frac"] = c.flops / per_call / roof.fma_flops_per_s;
  }
}

// The decode step's form: kGraphCalls calls (a model's layers) captured once into a graph, replayed
// per iteration; reported time and us_per_call are per call, so the eager path's host work (checks,
// planning, enqueue, synchronize) is left out and the kernel's own fixed costs show.
constexpr int kGraphCalls = 30;

void BM_fia_graph(benchmark::State& state, const FiaCaseSpec& spec) {
  const FiaCase& c = fia_case(spec);
  ng::ops::attention::set_fia_kernel_mode(FiaKernelMode::fast);
  // Cold cases: a copy per call, every copy once a replay (so more calls than a model's layers).
  const int calls = std::max(kGraphCalls, static_cast<int>(c.copies.size()));
  ng::Graph g;
  {
    ng::CaptureScope scope(g);
    for (int i = 0; i < calls; ++i) {
      const FiaInputs& in = c.copies[static_cast<std::size_t>(i) % c.copies.size()];
      ng::ops::fused_infer_attention_score_out(in.q, in.k, in.v, in.opt, c.workspace, c.out, c.lse);
    }
  }
  const ng::Stream stream = ng::Stream::create();
  g.replay(stream);  // warm
  stream.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    g.replay(stream);
    stream.synchronize();
  }
  const double per_call =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations()) / calls;
  state.counters["us_per_call"] = per_call * 1e6;
  state.counters["GBps"] = c.kv_bytes / per_call / 1e9;
}

// Registered in one place so the roofline runs first and the cases keep the order.
const bool registered = [] {
  benchmark::RegisterBenchmark("roofline/dram_read", BM_dram_read)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("roofline/fma_f32", BM_fma_peak)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (const FiaCaseSpec& spec : fia_case_specs()) {
    const bool prefill = spec.q_len > 1;
    for (FiaKernelMode mode : {FiaKernelMode::fast, FiaKernelMode::simple}) {
      const bool simple = mode == FiaKernelMode::simple;
      if (simple && spec.hot) continue;  // the fast kernels' compute rate only
      auto* b = benchmark::RegisterBenchmark(
          ("fia/" + spec.name + (simple ? "/simple" : "/fast")).c_str(),
          [&spec, mode](benchmark::State& s) { BM_fia(s, spec, mode); });
      b->UseRealTime()->Unit(benchmark::kMillisecond);
      // The simple prefill takes seconds per call: one call per repetition.
      if (prefill && simple) b->Iterations(1);
      else b->MinTime(prefill ? 1.0 : 0.3);
    }
    if (spec.name.starts_with("decode_f16_small"))
      benchmark::RegisterBenchmark(("fia/" + spec.name + "/fast_graph").c_str(),
                                   [&spec](benchmark::State& s) { BM_fia_graph(s, spec); })
          ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
  }
  return true;
}();

}  // namespace
}  // namespace npugraph_bench
