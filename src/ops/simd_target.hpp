// The Highway target the operators' SIMD kernels run on now. Every *_simd.cpp (and the FIA fast
// kernels) is compiled for the same targets and dispatches through hwy's one chosen target, so the
// target simd_target.cpp's own dispatch table picks is the one all of them pick. Tests use it to
// check that a forced target (hwy::SetSupportedTargetsForTest, tests/support/simd_target.cpp) is
// the one that ran.
#pragma once

#include <cstdint>

namespace npugraph::ops {

// The HWY_* bit of the target the kernels dispatch to (hwy::TargetName names it).
std::int64_t simd_dispatch_target();

}  // namespace npugraph::ops
