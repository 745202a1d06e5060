// Which CPU kernel runs FIA launches: the fast SIMD kernels (default) or the simple row-at-a-time
// kernel they replaced (kept as a baseline for benchmarks and as a cross-check in tests).
// Process-wide; read when a launch runs, so switch it only while no FIA work is in flight.
#pragma once

namespace npugraph::ops::attention {

enum class FiaKernelMode { fast, simple };

void set_fia_kernel_mode(FiaKernelMode mode);
FiaKernelMode fia_kernel_mode();

}  // namespace npugraph::ops::attention
