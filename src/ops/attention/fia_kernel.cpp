// FIA's CPU kernel entry (fia_cpu_kernel): decodes the block into a FiaLaunch (Note [FIA launch
// view]) and runs it on the fast kernels (fia_fast.hpp) in FiaKernelMode::fast when they cover it,
// else on the simple kernel (fia_kernel_simple.cpp), counting the path (fia_kernel_mode.hpp).
#include "ops/attention/fia_fast.hpp"
#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/attention/fia_launch.hpp"

namespace npugraph::ops::attention {

void fia_cpu_kernel(const void* params, std::size_t size, const ExecContext& ctx) {
  const FiaLaunch l(params, size);
  if (fia_kernel_mode() == FiaKernelMode::fast) {
    if (fast::fia_fast_covers(l.p)) {
      // The decode kernel counts its own path (tiles or direct: a per-target choice).
      if (l.p.plan.fast_splits > 0) return fast::run_fast_decode(l, ctx);
      count_fia_path(FiaPath::prefill);
      return fast::run_fast_prefill(l, ctx);
    }
    count_fia_path(FiaPath::fallback);
  } else {
    count_fia_path(FiaPath::simple);
  }
  run_simple_kernel(l, ctx);
}

}  // namespace npugraph::ops::attention
