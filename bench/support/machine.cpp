// The machine a benchmark ran on, in every benchmark binary's context (the JSON's "context" and the
// console header): the CPU model, the Highway target the kernels dispatch to, and the cores, so
// that figures from different machines are never mixed up (tools/perf_table.py prints them in the
// README table header). Linked into every bench_* binary (CMakeLists.txt).
#include <benchmark/benchmark.h>

#include <fstream>
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

const bool kRegistered = [] {
  benchmark::AddCustomContext("npugraph_cpu_model", cpu_model());
  benchmark::AddCustomContext("npugraph_simd_target", hwy_target());
  benchmark::AddCustomContext("npugraph_cores", std::to_string(std::thread::hardware_concurrency()));
  return true;
}();

}  // namespace
