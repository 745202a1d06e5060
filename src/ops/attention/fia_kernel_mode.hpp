// Which CPU kernel runs FIA launches, and which one ran.
//
// The mode: the fast SIMD kernels (default) or the simple row-at-a-time kernel they replaced (kept
// as a baseline for benchmarks and as a cross-check in tests). Process-wide; read when a launch
// runs, so switch it only while no FIA work is in flight.
//
// The path counters (a test hook): the kernel entry counts every launch under the path that ran
// it, once per launch (a relaxed atomic add), so a test can assert that the kernel it means to
// check really ran, e.g. that a fast-kernel test did not fall back to the simple kernel:
//   const FiaPathCounts before = fia_path_counts();
//   ... run, synchronize ...
//   EXPECT_EQ(fia_path_counts().since(before).decode_direct, 1);
#pragma once

#include <cstdint>

namespace npugraph::ops::attention {

enum class FiaKernelMode { fast, simple };

void set_fia_kernel_mode(FiaKernelMode mode);
FiaKernelMode fia_kernel_mode();

enum class FiaPath : std::uint8_t {
  simple,         // FiaKernelMode::simple
  fallback,       // FiaKernelMode::fast, but the fast kernels do not cover the launch: simple ran
  decode_tiles,   // fast decode, K/V converted through float32 tiles
  decode_direct,  // fast decode, K/V converted in registers (units of at most 4 query rows)
  prefill,        // fast prefill
  count
};
const char* fia_path_name(FiaPath path);

// Launches per path since the process started.
struct FiaPathCounts {
  std::uint64_t n[static_cast<int>(FiaPath::count)] = {};
  std::uint64_t operator[](FiaPath path) const { return n[static_cast<int>(path)]; }
  FiaPathCounts since(const FiaPathCounts& earlier) const;
  std::uint64_t total() const;
};
FiaPathCounts fia_path_counts();
// Called by the kernel entry (fia_cpu_kernel, fia_launch.cpp) and the fast decode kernel, once per launch.
void count_fia_path(FiaPath path);

}  // namespace npugraph::ops::attention
