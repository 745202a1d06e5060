// This machine's limits, measured in the benchmark run itself (issue 6: every case is reported as a
// fraction of them): DRAM read bandwidth and the fp32 FMA peak, both with every core busy.
#pragma once

#include <cstddef>

namespace benchmark {
class State;
}

namespace npugraph_bench {

struct Roofline {
  double read_bytes_per_s = 0;  // streaming read of a buffer far larger than the caches
  double fma_flops_per_s = 0;   // fp32, SIMD, register-resident chains (an FMA counts as 2 FLOPs)
};

// One measured pass with `threads` threads over `bytes` of memory (≥ 1 GiB for the roofline);
// returns bytes per second. The buffer lives only for the call.
double measure_read_bandwidth(std::size_t bytes, int threads, int passes);
// One pass of FMA chains on `threads` threads lasting about `seconds`; returns FLOPs per second.
double measure_fma_peak(double seconds, int threads);

// The roofline figure of one repetition: best of 5 read passes over 1 GiB; best of 3 FMA passes
// of 0.1 s. (Best of passes: other processes on a shared machine only ever lower a pass.)
double best_read_bandwidth();
double best_fma_peak();

// The int8 dot-product peak: register-resident vpdpbusd (AVX512-VNNI) chains on `threads` threads
// for about `seconds`; returns int8 ops per second (a multiply and an add per byte pair: one
// 512-bit vpdpbusd is 128 ops); without AVX512-VNNI, AVX2's pmaddubsw + pmaddwd chains (64 ops a
// step: what the AVX2 q8 GEMVs run); 0 where the CPU (or the compiler) has neither.
// *cpu_time_rate (when given): each thread's ops over its own CPU time, summed — the peak of the
// cores themselves, which other processes on a shared machine do not lower (they lower the
// wall-clock figure, as they do the kernels' times).
double measure_int8_peak(double seconds, int threads, double* cpu_time_rate = nullptr);
// Best of 3 passes of 0.1 s (and the best CPU-time rate); int8_peak() is the median of the wall
// figures noted (measured once itself when none were), as roofline() keeps the others. Not part of
// roofline(): only bench_linear and bench_profile pay for it.
double best_int8_peak(double* cpu_time_rate = nullptr);
void note_int8_peak(double ops_per_s);
double int8_peak();
// The roofline/int8_vnni case of those benchmarks: best_int8_peak noted, as GOPS and GOPS_cpu_time.
void int8_peak_benchmark(benchmark::State& state);

// The roofline benchmarks note one figure per repetition; roofline() is the median of those noted
// (the figure the report shows), measuring once itself when the roofline benchmarks were filtered
// out, so the cases' fractions are always defined.
void note_read_bandwidth(double bytes_per_s);
void note_fma_peak(double flops_per_s);
Roofline roofline();

// The threads the limits use: all of the machine's cores (as the FIA kernels do by default).
int roofline_threads();

}  // namespace npugraph_bench
