// The CUDA backend's benchmarks (bench_cuda; tools/gpu_check.sh runs it). Each one reports an
// error and measures nothing where there is no CUDA device (perf_table.py skips such entries), so
// `make bench` stays green on machines without a GPU. NOT YET RUN ON A GPU: no figure exists.
//   Replay:  one replay + synchronize of a captured chain of n noop kernels (one cudaGraphExec)
//   Eager:   the same n launches issued one by one + synchronize
//   Update:  one stream-ordered task update of a scale kernel (its alpha) + replay + synchronize
//   CopyD2D: a device-to-device copy_ of 256 MiB + synchronize (bytes/s: the bandwidth yardstick)
//   FiaDecode/B/S: one replay + synchronize of a graph holding one FIA decode (float16, 32 query
//            and 32 KV heads, D 128, KV length S): bytes/s = the key, value and query bytes read
//            per replay (the HBM bandwidth it achieves; compare with CopyD2D and with
//            torch_peer.py's BM_Torch_SdpaDecode of the same shapes)
#include <benchmark/benchmark.h>

#include "npugraph/npugraph.hpp"
#include "runtime/backend.hpp"

namespace {

namespace ng = npugraph;
const ng::Device kGpu = ng::Device::cuda(0);

bool no_gpu(benchmark::State& state) {
  if (npugraph::detail::cuda_device_count() > 0) return false;
  state.SkipWithError("no CUDA device: not measured");
  return true;
}

void BM_Cuda_Replay(benchmark::State& state) {
  if (no_gpu(state)) return;
  const int n = static_cast<int>(state.range(0));
  ng::Stream s = ng::Stream::create(kGpu);
  const int dummy = 0;
  ng::Graph g;
  {
    ng::CaptureScope capture(g, s);
    for (int i = 0; i < n; ++i) ng::launch(s, ng::ops::noop_kernel(), dummy);
    capture.end();
  }
  for (auto _ : state) {
    g.replay(s);
    s.synchronize();
  }
  state.counters["tasks/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Cuda_Replay)->Arg(1000)->UseRealTime();

void BM_Cuda_Eager(benchmark::State& state) {
  if (no_gpu(state)) return;
  const int n = static_cast<int>(state.range(0));
  ng::Stream s = ng::Stream::create(kGpu);
  const int dummy = 0;
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) ng::launch(s, ng::ops::noop_kernel(), dummy);
    s.synchronize();
  }
  state.counters["tasks/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Cuda_Eager)->Arg(1000)->UseRealTime();

void BM_Cuda_Update(benchmark::State& state) {
  if (no_gpu(state)) return;
  ng::Stream s = ng::Stream::create(kGpu);
  const ng::StreamGuard guard(s);  // the update's launches go to s
  ng::Tensor x = ng::zeros({4096}, ng::f16, kGpu), y = ng::empty({4096}, ng::f16, kGpu);
  ng::Graph g;
  ng::TaskGroupHandle group;
  {
    ng::CaptureScope capture(g, s);
    ng::task_group_begin(s);
    ng::ops::scale_out(x, 1.0, y);
    group = ng::task_group_end(s);
    capture.end();
  }
  double alpha = 1.0;
  for (auto _ : state) {
    ng::task_update_begin(s, group);
    ng::ops::scale_out(x, alpha += 1.0, y);
    ng::task_update_end(s);
    g.replay(s);
    s.synchronize();
  }
}
BENCHMARK(BM_Cuda_Update)->UseRealTime();

void BM_Cuda_CopyD2D(benchmark::State& state) {
  if (no_gpu(state)) return;
  const std::int64_t n = std::int64_t{128} << 20;  // f16 elements: 256 MiB
  ng::Stream s = ng::Stream::create(kGpu);
  ng::Tensor a = ng::zeros({n}, ng::f16, kGpu), b = ng::empty({n}, ng::f16, kGpu);
  for (auto _ : state) {
    ng::copy_(s, b, a);
    s.synchronize();
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(a.nbytes()));  // read + write
}
BENCHMARK(BM_Cuda_CopyD2D)->UseRealTime();

void BM_Cuda_FiaDecode(benchmark::State& state) {
  if (no_gpu(state)) return;
  const std::int64_t B = state.range(0), S = state.range(1), N = 32, D = 128;
  ng::Stream s = ng::Stream::create(kGpu);
  const ng::StreamGuard guard(s);
  const ng::Tensor q = ng::zeros({B, N, 1, D}, ng::f16, kGpu);
  const ng::Tensor k = ng::zeros({B, N, S, D}, ng::f16, kGpu), v = ng::zeros({B, N, S, D}, ng::f16, kGpu);
  ng::ops::FiaOptions opt{.num_heads = N, .scale = 1.0 / 128, .input_layout = "BNSD",
                          .num_key_value_heads = N, .softmax_lse_flag = true};
  opt.actual_seq_lengths_kv = {S};
  const ng::Tensor ws = ng::ops::fia_max_workspace(q, k, v, opt);
  const ng::Tensor out = ng::empty({B, N, 1, D}, ng::f16, kGpu);
  const ng::Tensor lse = ng::empty(ng::ops::fia_lse_shape(q, k, v, opt), ng::f32, kGpu);
  ng::Graph g;
  {
    ng::CaptureScope capture(g, s);
    ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    capture.end();
  }
  g.replay(s);
  s.synchronize();
  for (auto _ : state) {
    g.replay(s);
    s.synchronize();
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<std::int64_t>(k.nbytes() + v.nbytes() + q.nbytes()));
}
BENCHMARK(BM_Cuda_FiaDecode)->Args({1, 4096})->Args({1, 32768})->Args({16, 4096})->Args({16, 32768})->UseRealTime();

}  // namespace
