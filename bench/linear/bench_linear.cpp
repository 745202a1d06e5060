// bench_linear: the decode engine's linear layers against this machine's roofline, measured first
// in the same run (bench/attention/roofline.*).
//
//   roofline/dram_read            GBps        streaming read of 1 GiB on every core (best of 5)
//   roofline/fma_f32              GFLOPs      register-resident SIMD FMA chains on every core
//   roofline/int8_vnni            GOPS        register-resident vpdpbusd (AVX512-VNNI) chains on every
//                                             core: the int8 dot-product peak the q8 GEMVs' integer
//                                             sums run against (128 ops an instruction); without
//                                             VNNI, AVX2's pmaddubsw + pmaddwd chains (label says
//                                             which); 0 where the CPU has neither
//                                 GOPS_cpu_time  the same ops over each thread's CPU time, summed:
//                                             the cores' own peak, which a machine shared with other
//                                             processes does not lower (GOPS, the wall figure the
//                                             fractions use, drops with the kernels' times there)
//   gemv/<fmt>/<N>x<K>/T:<T>      time per call (16 calls on successive weight copies, then one
//                                 stream synchronize: a decode step's back-to-back layers)
//                                 GBps, bw_frac          weight bytes read / time, / dram_read
//                                 probe_GBps, bw_frac_probe   a 256 MiB read probe right before and
//                                 after the case (mean), and GBps / it (the VM's DRAM rate drifts)
//                                 GFLOPs                 2 T N K / time
//                                 us_best, GBps_best, bw_frac_best   the fastest batch of 16 calls
//                                 (as the roofline keeps its best pass: on a shared machine other
//                                 processes only ever slow a batch down)
//   gemv_hot/...                  the same (T 1 and 8) with one weight copy (cache-resident: the kernel's
//                                 compute ceiling, not a DRAM figure): Q4_1 and Q8_0 (rows16 where
//                                 packed), and Q4_K 576x1536 for the super-block kernel
//   gemv_q8/..., gemv_q8_hot/...  the same with q8 activations (Note [Q8 activations]), and
//                                 GOPS       2 T N K / time (int8 multiply-adds, 2 ops each)
//                                 int8_frac  GOPS / int8_vnni (absent without VNNI): how near the
//                                            small-batch kernels run to the integer peak (issue 45)
//   gemv_q8p/..., gemv_q8p_hot/...  q8 activations on rows16 weights (pack_rows16, Note [Packed
//                                 weights]): the decode engine's cpu default
//   gemm/<fmt>/<N>x<K>/T:128      prefill: GFLOPs, peak_frac (of fma_f32)
//   gemm_q8p/<fmt>/<N>x<K>/T:128  prefill with q8 activations on rows16 weights (the packed kernel
//                                 serves every T; the rows layout's q8 calls of T > 16 are gemm/'s
//                                 float32 GEMM): GOPS, int8_frac
// Weight copies total >= 1 GiB (4x this machine's 260 MiB L3) so GEMV weights come from DRAM.
// Every case runs on the best Highway target and again with AVX2 forced (suffix /avx2, through
// hwy::SetSupportedTargetsForTest), and the rows16 cases with AVX3 (/avx3) where the best is
// AVX3_DL (their VNNI code); `target` reports which ran (the HWY_* bit).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <hwy/targets.h>

#include "attention/roofline.hpp"
#include "npugraph/npugraph.hpp"
#include "ops/simd_target.hpp"

namespace npugraph_bench {
namespace {

namespace ng = npugraph;
using ng::ops::QuantType;

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

struct Spec {
  const char* fmt;  // a quantisation table type ("Q4_1", "Q4_K", ...) or "F16"
  std::int64_t N, K;
};

bool is_quant(const Spec& s) { return std::strcmp(s.fmt, "F16") != 0; }
QuantType quant_of(const Spec& s) {
  for (const ng::ops::QuantTraits& t : ng::ops::kQuantTable)
    if (t.name == s.fmt) return static_cast<QuantType>(t.type);
  return QuantType::q8_0;
}

// Copies of one random weight (quantised with ggml's reference quantiser) totalling >= `bytes`.
struct Weights {
  std::vector<ng::ops::QuantWeight> q;
  std::vector<ng::Tensor> f;
  std::size_t bytes_each = 0;
  std::size_t count() const { return q.empty() ? f.size() : q.size(); }
};

Weights make_weights(const Spec& s, std::size_t total, bool packed) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(s.N * s.K));
  for (auto& x : v) x = dist(gen);
  Weights w;
  if (is_quant(s)) {
    const ng::ops::QuantWeight rows = ng::ops::quantize(quant_of(s), v, s.N, s.K);
    const ng::ops::QuantWeight one = packed ? ng::ops::pack_rows16(rows) : rows;
    w.bytes_each = one.bytes().nbytes();
    const std::size_t n = std::max<std::size_t>(1, (total + w.bytes_each - 1) / w.bytes_each);
    for (std::size_t i = 0; i < n; ++i) {
      ng::Tensor b = ng::empty(one.bytes().shape(), ng::DType::u8);
      std::memcpy(b.data(), one.bytes().data(), w.bytes_each);
      w.q.emplace_back(b, one.type(), one.rows(), one.cols(), one.layout());
    }
  } else {
    w.bytes_each = v.size() * 2;
    const std::size_t n = std::max<std::size_t>(1, (total + w.bytes_each - 1) / w.bytes_each);
    for (std::size_t i = 0; i < n; ++i) {
      ng::Tensor t = ng::empty({s.N, s.K}, ng::DType::f16);
      for (std::size_t j = 0; j < v.size(); ++j) t.data_ptr<ng::half>()[j] = ng::half(v[j]);
      w.f.push_back(t);
    }
  }
  return w;
}

// The weights of a case, built once (the cold copies are large) and shared by its variants.
const Weights& weights_for(const Spec& s, bool hot, bool packed) {
  static std::vector<std::pair<std::string, Weights>> cache;
  const std::string key = std::string(s.fmt) + std::to_string(s.N) + "x" + std::to_string(s.K) +
                          (packed ? "p" : "") + (hot ? "h" : "c");
  for (auto& [k, w] : cache)
    if (k == key && w.count() > 0) return w;
  // Keep one set of cold copies at a time (1 GiB each), their memory handed back first.
  if (!hot) {
    for (auto& [k, w] : cache)
      if (k.back() == 'c') w = Weights{};
    ng::empty_cache();
  }
  for (auto& [k, w] : cache)
    if (k == key) return w = make_weights(s, hot ? 0 : std::size_t{1} << 30, packed);
  cache.emplace_back(key, make_weights(s, hot ? 0 : std::size_t{1} << 30, packed));
  return cache.back().second;
}

// Forces the target `bit` for the scope (0: none; all targets again at its end).
class TargetScope {
 public:
  explicit TargetScope(std::int64_t bit) : forced_(bit != 0) {
    if (forced_) hwy::SetSupportedTargetsForTest(bit);
  }
  ~TargetScope() {
    if (forced_) hwy::SetSupportedTargetsForTest(0);
  }
  TargetScope(const TargetScope&) = delete;
  TargetScope& operator=(const TargetScope&) = delete;

 private:
  bool forced_;
};

// The HWY_* bit of the target the kernels run now (the forced one inside a TargetScope).
double running_target_bit() { return static_cast<double>(npugraph::ops::simd_dispatch_target()); }

// What enters the call: float32 activations, q8 ones, q8 ones on rows16 weights.
enum class Variant { f32, q8, q8_packed };

void BM_linear(benchmark::State& state, Spec s, std::int64_t T, bool hot, std::int64_t target,
               Variant variant = Variant::f32) {
  const Roofline roof = roofline();
  const bool q8 = variant != Variant::f32;
  const double int8 = q8 ? int8_peak() : 0;
  const TargetScope scope(target);
  const Weights& w = weights_for(s, hot, variant == Variant::q8_packed);
  const ng::Stream stream = ng::current_stream();
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  ng::Tensor x = ng::empty({T, s.K}, ng::DType::f32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data_ptr<float>()[i] = dist(gen);
  ng::Tensor y = ng::empty({T, s.N}, ng::DType::f32);
  std::size_t i = 0;
  auto call = [&] {
    const std::size_t c = i++ % w.count();
    if (is_quant(s))
      ng::ops::weight_quant_linear_out(
          x, w.q[c], {}, y, {.activations = q8 ? ng::ops::Activations::q8 : ng::ops::Activations::f32});
    else ng::ops::linear_out(x, w.f[c], {}, y);
  };
  constexpr int kBatch = 16;
  for (int k = 0; k < 4; ++k) call();  // warm: first touch of x, y, the pool's threads
  stream.synchronize();
  const bool gemv = T <= ng::ops::kLinearGemvMaxRows;
  constexpr std::size_t kProbeBytes = std::size_t{256} << 20;
  const double probe0 = gemv && !hot ? measure_read_bandwidth(kProbeBytes, roofline_threads(), 3) : 0;
  double total = 0, best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kBatch; ++k) call();
    stream.synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += dt;
    best = std::min(best, dt / kBatch);
    state.SetIterationTime(dt / kBatch);  // reported time: one call
  }
  const double per_call = total / static_cast<double>(state.iterations() * kBatch);
  const double bytes = static_cast<double>(w.bytes_each);
  const double flops = 2.0 * static_cast<double>(T * s.N * s.K);
  state.counters["GFLOPs"] = flops / per_call / 1e9;
  state.counters["us_per_call"] = per_call * 1e6;
  state.counters["target"] = running_target_bit();
  state.counters["us_best"] = best * 1e6;
  if (q8) {
    state.counters["GOPS"] = flops / per_call / 1e9;
    if (int8 > 0) state.counters["int8_frac"] = flops / per_call / int8;
  }
  if (gemv) {
    state.counters["GBps"] = bytes / per_call / 1e9;
    state.counters["GBps_best"] = bytes / best / 1e9;
    if (!hot) {
      const double probe = (probe0 + measure_read_bandwidth(kProbeBytes, roofline_threads(), 3)) / 2;
      state.counters["bw_frac"] = bytes / per_call / roof.read_bytes_per_s;
      state.counters["bw_frac_best"] = bytes / best / roof.read_bytes_per_s;
      state.counters["probe_GBps"] = probe / 1e9;
      state.counters["bw_frac_probe"] = bytes / per_call / probe;
    }
  } else if (!q8) {
    state.counters["peak_frac"] = flops / per_call / roof.fma_flops_per_s;
  }
}

std::string shape_name(const Spec& s) {
  return std::string(s.fmt) + "/" + std::to_string(s.N) + "x" + std::to_string(s.K);
}

const bool registered = [] {
  benchmark::RegisterBenchmark("roofline/dram_read", BM_dram_read)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("roofline/fma_f32", BM_fma_peak)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("roofline/int8_vnni", int8_peak_benchmark)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // SmolLM2-135M's decode GEMVs: gate/up [1536, 576], down [576, 1536], the tied output projection
  // [49152, 576] in Q8_0; q/o [576, 576] and k/v [192, 576]; a float16 weight for the plain linear.
  const std::vector<Spec> gemv = {{"Q4_1", 1536, 576}, {"Q4_1", 576, 1536}, {"Q8_0", 49152, 576},
                                  {"Q4_1", 576, 576},  {"Q4_1", 192, 576},  {"Q4_0", 1536, 576},
                                  {"F16", 1536, 576},
                                  // What Q4_K_M files hold (issue 34): Q5_0 where rows are not whole
                                  // 256-element blocks, the K-quants where they are.
                                  {"Q5_0", 1536, 576}, {"Q4_K", 576, 1536}, {"Q5_K", 576, 1536},
                                  {"Q6_K", 576, 1536},
                                  // Gemma 3 270M's tied output projection (178 MB: most of its bytes
                                  // per token) and its Q4_K_M FFN shapes (gate/up Q5_0: 640 is not a multiple of 256).
                                  {"Q8_0", 262144, 640}, {"Q5_0", 2048, 640}, {"Q4_K", 640, 2048}, {"Q6_K", 640, 2048},
                                  // K-quant matrices of 9.4 and 37.7 MB (per-call costs amortised; the second larger than L3)
                                  {"Q4_K", 8192, 2048}, {"Q4_K", 16384, 4096}, {"Q6_K", 16384, 4096}};
  // The forced targets: AVX2, and AVX3 where the best is above it (AVX3_DL: only the rows16 GEMV
  // has code of its own there, VNNI, so /avx3 rows are that variant's).
  std::vector<std::pair<std::string, std::int64_t>> targets = {{"", 0}, {"/avx2", HWY_AVX2}};
  if (ng::ops::simd_dispatch_target() < HWY_AVX3 && (hwy::SupportedTargets() & HWY_AVX3) != 0)
    targets.insert(targets.begin() + 1, {"/avx3", HWY_AVX3});
  for (const auto& [sfx, target] : targets) {
    const char* prefix[] = {"gemv", "gemv_q8", "gemv_q8p"};
    const auto skip = [&, target = target](Variant v) { return target == HWY_AVX3 && v != Variant::q8_packed; };
    for (const Spec& s : gemv)
      for (Variant v : {Variant::f32, Variant::q8, Variant::q8_packed}) {
        if (skip(v)) continue;
        if (v != Variant::f32 && (!is_quant(s) || !ng::ops::quant_traits(quant_of(s)).q8_kernel)) continue;
        if (v == Variant::q8_packed && !ng::ops::quant_traits(quant_of(s)).rows16) continue;
        for (std::int64_t T : {1, 8})
          benchmark::RegisterBenchmark(
              (std::string(prefix[static_cast<int>(v)]) + "/" + shape_name(s) + "/T:" + std::to_string(T) + sfx).c_str(),
              [s, T, target, v](benchmark::State& st) { BM_linear(st, s, T, false, target, v); })
              ->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
      }
    for (Variant v : {Variant::f32, Variant::q8, Variant::q8_packed})
      for (const Spec& s : {Spec{"Q4_1", 1536, 576}, Spec{"Q8_0", 49152, 576}, Spec{"Q4_K", 576, 1536}})
        for (std::int64_t T : {1, 8}) {
          if (skip(v)) continue;
          if (v == Variant::q8_packed && !ng::ops::quant_traits(quant_of(s)).rows16) continue;
          benchmark::RegisterBenchmark(
              (std::string(prefix[static_cast<int>(v)]) + "_hot/" + shape_name(s) + "/T:" + std::to_string(T) + sfx).c_str(),
              [s, T, target, v](benchmark::State& st) { BM_linear(st, s, T, true, target, v); })
              ->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
        }
    if (target == HWY_AVX3) continue;
    for (Variant v : {Variant::f32, Variant::q8_packed})
      for (const Spec& s : {Spec{"Q4_1", 1536, 576}, Spec{"Q4_1", 576, 1536}, Spec{"Q4_K", 576, 1536}}) {
        if (v == Variant::q8_packed && !ng::ops::quant_traits(quant_of(s)).rows16) continue;
        const char* gemm_prefix[] = {"gemm", "gemm_q8", "gemm_q8p"};
        benchmark::RegisterBenchmark((std::string(gemm_prefix[static_cast<int>(v)]) + "/" + shape_name(s) + "/T:128" + sfx).c_str(),
                                     [s, target, v](benchmark::State& st) { BM_linear(st, s, 128, true, target, v); })
            ->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
      }
  }
  return true;
}();

}  // namespace
}  // namespace npugraph_bench
