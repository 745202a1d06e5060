// Roofline probes with Highway, dispatched at run time to the best SIMD target of the machine
// (the same targets the FIA kernels use).
//   read:  each thread sums its slice of one buffer with 4 vector accumulators (loads dominate).
//   fma:   each thread runs 12 independent FMA chains (acc = acc * a + b) in registers; 12 covers
//          the FMA latency times the FMA ports of current x86 cores (4 cycles x 2 ports = 8).
//   int8:  each thread runs 16 independent vpdpbusd chains (512-bit AVX512-VNNI, the instruction of
//          the rows16 GEMV's AVX3_DL code) in registers: 16 covers its latency (5 cycles) times
//          2 ports. Compiled with a target attribute (not through Highway: Highway 1.0 builds
//          AVX3_DL only where HWY_WANT_AVX3_DL is defined) and run only where the CPU has VNNI.
//          Where it has AVX2 and no VNNI, the sequence the AVX2 q8 GEMVs use instead: 8 chains of
//          acc += pmaddwd(pmaddubsw(a, b), 1) on 256-bit vectors (64 ops per step: 32 byte pairs).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/roofline.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace npugraph_bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of p[0, n); n a multiple of 4 vectors.
HWY_NOINLINE float SumFloats(const float* HWY_RESTRICT p, std::size_t n) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  for (std::size_t i = 0; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, hn::LoadU(d, p + i));
    s1 = hn::Add(s1, hn::LoadU(d, p + i + N));
    s2 = hn::Add(s2, hn::LoadU(d, p + i + 2 * N));
    s3 = hn::Add(s3, hn::LoadU(d, p + i + 3 * N));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
}

// `iters` rounds of 12 chained FMAs; returns a value that depends on every chain (so nothing is
// optimised away) and the FLOPs done in *flops.
HWY_NOINLINE float FmaChains(std::size_t iters, double* flops) {
  const hn::ScalableTag<float> d;
  const auto a = hn::Set(d, 0.9999999f);
  const auto b = hn::Set(d, 1e-7f);
  auto c0 = hn::Set(d, 0.10f), c1 = hn::Set(d, 0.11f), c2 = hn::Set(d, 0.12f);
  auto c3 = hn::Set(d, 0.13f), c4 = hn::Set(d, 0.14f), c5 = hn::Set(d, 0.15f);
  auto c6 = hn::Set(d, 0.16f), c7 = hn::Set(d, 0.17f), c8 = hn::Set(d, 0.18f);
  auto c9 = hn::Set(d, 0.19f), c10 = hn::Set(d, 0.20f), c11 = hn::Set(d, 0.21f);
  for (std::size_t i = 0; i < iters; ++i) {
    c0 = hn::MulAdd(c0, a, b); c1 = hn::MulAdd(c1, a, b); c2 = hn::MulAdd(c2, a, b);
    c3 = hn::MulAdd(c3, a, b); c4 = hn::MulAdd(c4, a, b); c5 = hn::MulAdd(c5, a, b);
    c6 = hn::MulAdd(c6, a, b); c7 = hn::MulAdd(c7, a, b); c8 = hn::MulAdd(c8, a, b);
    c9 = hn::MulAdd(c9, a, b); c10 = hn::MulAdd(c10, a, b); c11 = hn::MulAdd(c11, a, b);
  }
  *flops = 2.0 * 12.0 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
  const auto s = hn::Add(hn::Add(hn::Add(c0, c1), hn::Add(c2, c3)),
                         hn::Add(hn::Add(hn::Add(c4, c5), hn::Add(c6, c7)),
                                 hn::Add(hn::Add(c8, c9), hn::Add(c10, c11))));
  return hn::GetLane(hn::SumOfLanes(d, s));
}

}  // namespace npugraph_bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <chrono>
#include <latch>
#include <thread>

#include <time.h>
#include <vector>

#include <benchmark/benchmark.h>
#include <hwy/aligned_allocator.h>

#include "attention/roofline.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NPUGRAPH_BENCH_VNNI 1
#endif

namespace npugraph_bench {
HWY_EXPORT(SumFloats);
HWY_EXPORT(FmaChains);

namespace {

using Clock = std::chrono::steady_clock;

// Values noted by the roofline benchmarks (one per repetition); the cases use their median, the
// figure the report shows. Only touched from the benchmark thread.
std::vector<double> g_read;
std::vector<double> g_fma;
std::vector<double> g_int8;
volatile float g_sink = 0;  // keeps the probes' results alive

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs fn(thread_index) on `threads` threads started together; returns the wall seconds from the
// first thread's start to the last thread's finish, as the threads themselves read the clock (a
// clock read by the releasing thread after the latch would start late whenever that thread is
// scheduled after the workers, as on a loaded 2-core machine, and overstate the rate).
template <class Fn>
double timed_on_threads(int threads, Fn fn) {
  std::latch start(threads);
  std::vector<Clock::time_point> begin(static_cast<std::size_t>(threads)),
      end(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      begin[static_cast<std::size_t>(t)] = Clock::now();
      fn(t);
      end[static_cast<std::size_t>(t)] = Clock::now();
    });
  for (auto& th : pool) th.join();
  const auto t0 = *std::min_element(begin.begin(), begin.end());
  const auto t1 = *std::max_element(end.begin(), end.end());
  return std::chrono::duration<double>(t1 - t0).count();
}

#ifdef NPUGRAPH_BENCH_VNNI
// `iters` rounds of 16 chained vpdpbusd; returns a value that depends on every chain and the ops
// done in *ops (128 per instruction: 64 byte pairs, a multiply and an add each).
__attribute__((target("avx512f,avx512vnni"), noinline)) int VnniChains(std::size_t iters, double* ops) {
  const __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-5);
  __m512i c[16];
  for (int i = 0; i < 16; ++i) c[i] = _mm512_set1_epi32(i);
  for (std::size_t n = 0; n < iters; ++n) {
    // One statement per chain: the compiler keeps the 16 accumulators in registers.
    c[0] = _mm512_dpbusd_epi32(c[0], a, b); c[1] = _mm512_dpbusd_epi32(c[1], a, b);
    c[2] = _mm512_dpbusd_epi32(c[2], a, b); c[3] = _mm512_dpbusd_epi32(c[3], a, b);
    c[4] = _mm512_dpbusd_epi32(c[4], a, b); c[5] = _mm512_dpbusd_epi32(c[5], a, b);
    c[6] = _mm512_dpbusd_epi32(c[6], a, b); c[7] = _mm512_dpbusd_epi32(c[7], a, b);
    c[8] = _mm512_dpbusd_epi32(c[8], a, b); c[9] = _mm512_dpbusd_epi32(c[9], a, b);
    c[10] = _mm512_dpbusd_epi32(c[10], a, b); c[11] = _mm512_dpbusd_epi32(c[11], a, b);
    c[12] = _mm512_dpbusd_epi32(c[12], a, b); c[13] = _mm512_dpbusd_epi32(c[13], a, b);
    c[14] = _mm512_dpbusd_epi32(c[14], a, b); c[15] = _mm512_dpbusd_epi32(c[15], a, b);
  }
  *ops = 128.0 * 16.0 * static_cast<double>(iters);
  __m512i s = c[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, c[i]);
  return _mm512_reduce_add_epi32(s);
}

bool has_vnni() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni"); }

// `iters` rounds of 8 chains of acc += pmaddwd(pmaddubsw(a, b), 1): the AVX2 int8 dot product (64
// ops a step). pmaddubsw is inline assembly (volatile), so its constant inputs are not hoisted.
__attribute__((target("avx2"), noinline)) int Avx2DotChains(std::size_t iters, double* ops) {
  const __m256i a = _mm256_set1_epi8(3);
  const __m256i b = _mm256_set1_epi8(-5);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[8];
  for (int i = 0; i < 8; ++i) c[i] = _mm256_set1_epi32(i);
  for (std::size_t n = 0; n < iters; ++n)
    for (int i = 0; i < 8; ++i) {
      __m256i p;
      asm volatile("vpmaddubsw %2, %1, %0" : "=x"(p) : "x"(a), "x"(b));
      c[i] = _mm256_add_epi32(c[i], _mm256_madd_epi16(p, ones));
    }
  *ops = 64.0 * 8.0 * static_cast<double>(iters);
  __m256i s = c[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, c[i]);
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  int sum = 0;
  for (int v : lanes) sum += v;
  return sum;
}
bool has_avx2() { return __builtin_cpu_supports("avx2"); }
#else
int VnniChains(std::size_t, double* ops) {
  *ops = 0;
  return 0;
}
bool has_vnni() { return false; }
int Avx2DotChains(std::size_t, double* ops) {
  *ops = 0;
  return 0;
}
bool has_avx2() { return false; }
#endif

// The int8 chains this CPU runs: VNNI's, else AVX2's.
int Int8Chains(std::size_t iters, double* ops) {
  return has_vnni() ? VnniChains(iters, ops) : Avx2DotChains(iters, ops);
}

// The calling thread's CPU time (seconds): what it ran, not what the machine's other processes did.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int roofline_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double measure_read_bandwidth(std::size_t bytes, int threads, int passes) {
  constexpr std::size_t kAlign = 4096 / sizeof(float);  // slices start on page boundaries
  const std::size_t n = bytes / sizeof(float) / kAlign * kAlign;
  const std::size_t slice = n / static_cast<std::size_t>(threads) / kAlign * kAlign;
  auto buf = hwy::AllocateAligned<float>(n);
  float* p = buf.get();
  // First touch on the threads that read (pages land where they are used).
  timed_on_threads(threads, [&](int t) {
    std::fill_n(p + slice * static_cast<std::size_t>(t), slice, 1.0f);
  });
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<float> sums(static_cast<std::size_t>(threads));
    const double s = timed_on_threads(threads, [&](int t) {
      sums[static_cast<std::size_t>(t)] =
          HWY_DYNAMIC_DISPATCH(SumFloats)(p + slice * static_cast<std::size_t>(t), slice);
    });
    for (float x : sums) g_sink = g_sink + x;
    best = std::max(best, static_cast<double>(slice * sizeof(float)) * threads / s);
  }
  return best;
}

double best_read_bandwidth() {
  return measure_read_bandwidth(std::size_t{1} << 30, roofline_threads(), 5);
}

double best_fma_peak() {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass)
    best = std::max(best, measure_fma_peak(0.1, roofline_threads()));
  return best;
}

double measure_fma_peak(double seconds, int threads) {
  // Calibrate the round count on one thread, then run every thread for about `seconds`.
  double flops = 0;
  const auto t0 = Clock::now();
  g_sink = g_sink + HWY_DYNAMIC_DISPATCH(FmaChains)(1 << 20, &flops);
  const double per_round = std::chrono::duration<double>(Clock::now() - t0).count() / (1 << 20);
  const auto rounds = static_cast<std::size_t>(seconds / std::max(per_round, 1e-12));
  std::vector<double> done(static_cast<std::size_t>(threads));
  std::vector<float> sinks(static_cast<std::size_t>(threads));
  const double s = timed_on_threads(threads, [&](int t) {
    sinks[static_cast<std::size_t>(t)] =
        HWY_DYNAMIC_DISPATCH(FmaChains)(rounds, &done[static_cast<std::size_t>(t)]);
  });
  double total = 0;
  for (std::size_t t = 0; t < done.size(); ++t) {
    total += done[t];
    g_sink = g_sink + sinks[t];
  }
  return total / s;
}

double measure_int8_peak(double seconds, int threads, double* cpu_time_rate) {
  if (cpu_time_rate) *cpu_time_rate = 0;
  if (!has_vnni() && !has_avx2()) return 0;
  double ops = 0;
  const auto t0 = Clock::now();
  g_sink = g_sink + static_cast<float>(Int8Chains(1 << 20, &ops));
  const double per_round = std::chrono::duration<double>(Clock::now() - t0).count() / (1 << 20);
  const auto rounds = static_cast<std::size_t>(seconds / std::max(per_round, 1e-12));
  std::vector<double> done(static_cast<std::size_t>(threads)), cpu(static_cast<std::size_t>(threads));
  std::vector<int> sinks(static_cast<std::size_t>(threads));
  const double s = timed_on_threads(threads, [&](int t) {
    const double c0 = thread_cpu_seconds();
    sinks[static_cast<std::size_t>(t)] = Int8Chains(rounds, &done[static_cast<std::size_t>(t)]);
    cpu[static_cast<std::size_t>(t)] = thread_cpu_seconds() - c0;
  });
  double total = 0;
  for (std::size_t t = 0; t < done.size(); ++t) {
    total += done[t];
    if (cpu_time_rate && cpu[t] > 0) *cpu_time_rate += done[t] / cpu[t];
    g_sink = g_sink + static_cast<float>(sinks[t]);
  }
  return total / s;
}

double best_int8_peak(double* cpu_time_rate) {
  double best = 0, best_cpu = 0;
  for (int pass = 0; pass < 3; ++pass) {
    double c = 0;
    best = std::max(best, measure_int8_peak(0.1, roofline_threads(), &c));
    best_cpu = std::max(best_cpu, c);
  }
  if (cpu_time_rate) *cpu_time_rate = best_cpu;
  return best;
}

void note_int8_peak(double ops_per_s) { g_int8.push_back(ops_per_s); }

double int8_peak() {
  if (g_int8.empty()) note_int8_peak(best_int8_peak());
  return median(g_int8);
}

void int8_peak_benchmark(benchmark::State& state) {
  double best = 0, cpu_time = 0;
  for (auto _ : state) best = best_int8_peak(&cpu_time);
  note_int8_peak(best);
  state.counters["GOPS"] = best / 1e9;
  state.counters["GOPS_cpu_time"] = cpu_time / 1e9;
  state.counters["threads"] = roofline_threads();
  state.SetLabel(best == 0 ? "no AVX512-VNNI or AVX2" : has_vnni() ? "vpdpbusd" : "AVX2 pmaddubsw+pmaddwd (no VNNI)");
}

void note_read_bandwidth(double bytes_per_s) { g_read.push_back(bytes_per_s); }
void note_fma_peak(double flops_per_s) { g_fma.push_back(flops_per_s); }

Roofline roofline() {
  if (g_read.empty()) note_read_bandwidth(best_read_bandwidth());
  if (g_fma.empty()) note_fma_peak(best_fma_peak());
  return {median(g_read), median(g_fma)};
}

}  // namespace npugraph_bench
#endif  // HWY_ONCE
