#include "ops/attention/fia_kernel_mode.hpp"

#include <atomic>

namespace npugraph::ops::attention {
namespace {
std::atomic<FiaKernelMode> g_mode{FiaKernelMode::fast};
std::atomic<std::uint64_t> g_paths[static_cast<int>(FiaPath::count)];
}  // namespace

void set_fia_kernel_mode(FiaKernelMode mode) { g_mode.store(mode, std::memory_order_relaxed); }
FiaKernelMode fia_kernel_mode() { return g_mode.load(std::memory_order_relaxed); }

const char* fia_path_name(FiaPath path) {
  switch (path) {
    case FiaPath::simple: return "simple";
    case FiaPath::fallback: return "fallback";
    case FiaPath::decode_tiles: return "decode_tiles";
    case FiaPath::decode_direct: return "decode_direct";
    case FiaPath::prefill: return "prefill";
    case FiaPath::count: break;
  }
  return "?";
}

FiaPathCounts FiaPathCounts::since(const FiaPathCounts& earlier) const {
  FiaPathCounts d;
  for (int i = 0; i < static_cast<int>(FiaPath::count); ++i) d.n[i] = n[i] - earlier.n[i];
  return d;
}

std::uint64_t FiaPathCounts::total() const {
  std::uint64_t t = 0;
  for (std::uint64_t x : n) t += x;
  return t;
}

FiaPathCounts fia_path_counts() {
  FiaPathCounts c;
  for (int i = 0; i < static_cast<int>(FiaPath::count); ++i)
    c.n[i] = g_paths[i].load(std::memory_order_relaxed);
  return c;
}

void count_fia_path(FiaPath path) {
  g_paths[static_cast<int>(path)].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace npugraph::ops::attention
