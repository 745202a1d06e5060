// The machine a benchmark ran on, in every benchmark binary's context (the JSON's "context" and the
// console header): the CPU model, the Highway target the kernels dispatch to, and the cores, so
// that figures from different machines are never mixed up (tools/perf_table.py prints them in the
// README table header). Linked into every bench_* binary (CMakeLists.txt).
//
// NPUGRAPH_BENCH_SIMD_TARGET=<name> (AVX2, SSE4, ... as hwy::TargetName spells them) runs the whole
// binary with Highway's dispatch limited to that target (hwy::SetSupportedTargetsForTest): the code
// path a CPU without the machine's best target runs, on this machine's cores — not a figure for
// such a CPU. The context then says npugraph_simd_target = the forced target and
// npugraph_simd_forced = 1. A name that is no target, or one this CPU or the library cannot run,
// stops the binary before any benchmark runs, saying why.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstdint>
#include <string>
#include <thread>

#include <hwy/targets.h>

#include "ops/simd_target.hpp"

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

// The Highway target the library's kernels dispatch to: the best one this CPU supports among those
// the library was compiled for (hwy::SupportedTargets() alone also lists targets it was not
// compiled for, AVX3_DL among them: Highway 1.0 builds it only with HWY_WANT_AVX3_DL).
std::string hwy_target() { return hwy::TargetName(npugraph::ops::simd_dispatch_target()); }

// Applies NPUGRAPH_BENCH_SIMD_TARGET; true if it forced a target.
bool force_target_from_env() {
  const char* name = std::getenv("NPUGRAPH_BENCH_SIMD_TARGET");
  if (name == nullptr || *name == '\0') return false;
  const std::int64_t bit = npugraph::ops::simd_target_bit(name);
  const char* why = bit == 0                                ? "not a Highway target name (AVX3, AVX2, SSE4, SCALAR, ...)"
                    : (hwy::SupportedTargets() & bit) == 0 ? "this CPU cannot run it"
                                                            : nullptr;
  if (why == nullptr) {
    hwy::SetSupportedTargetsForTest(bit);
    if (npugraph::ops::simd_dispatch_target() != bit) why = "the library was not compiled for it";
  }
  if (why != nullptr) {
    std::fprintf(stderr, "NPUGRAPH_BENCH_SIMD_TARGET = %s: %s\n", name, why);
    std::exit(2);
  }
  return true;
}

const bool kRegistered = [] {
  const bool forced = force_target_from_env();
  benchmark::AddCustomContext("npugraph_cpu_model", cpu_model());
  benchmark::AddCustomContext("npugraph_simd_target", hwy_target());
  benchmark::AddCustomContext("npugraph_cores", std::to_string(std::thread::hardware_concurrency()));
  benchmark::AddCustomContext("npugraph_simd_forced", forced ? "1" : "0");
  return true;
}();

}  // namespace
