// simd_dispatch_target(): a dispatch table of one function per compiled target (simd_target.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd_target.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>

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

}  // namespace npugraph::ops
#endif  // HWY_ONCE
