// simd_dispatch_target(): a dispatch table of one function per compiled target (simd_target.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd_target.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>
#include <string_view>

#include "hwy/highway.h"
#include "ops/simd_target.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops {
namespace HWY_NAMESPACE {

std::int64_t DispatchTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops {

HWY_EXPORT(DispatchTarget);

std::int64_t simd_dispatch_target() { return HWY_DYNAMIC_DISPATCH(DispatchTarget)(); }

std::int64_t simd_target_bit(std::string_view name) {
  if (name.empty() || name == "Unknown") return 0;  // what hwy::TargetName says of a bit that is no target
  for (int i = 0; i < 63; ++i) {
    const std::int64_t bit = std::int64_t{1} << i;
    if (name == hwy::TargetName(bit)) return bit;
  }
  return 0;
}

}  // namespace npugraph::ops
#endif  // HWY_ONCE
