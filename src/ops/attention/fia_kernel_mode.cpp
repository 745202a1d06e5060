#include "ops/attention/fia_kernel_mode.hpp"

#include <atomic>

namespace npugraph::ops::attention {
namespace {
std::atomic<FiaKernelMode> g_mode{FiaKernelMode::fast};
}  // namespace

void set_fia_kernel_mode(FiaKernelMode mode) { g_mode.store(mode, std::memory_order_relaxed); }
FiaKernelMode fia_kernel_mode() { return g_mode.load(std::memory_order_relaxed); }

}  // namespace npugraph::ops::attention
