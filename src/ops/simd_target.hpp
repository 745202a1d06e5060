// The Highway target the operators' SIMD kernels run on now. Every *_simd.cpp (and the FIA fast
// kernels) is compiled for the same targets and dispatches through hwy's one chosen target, so the
// target simd_target.cpp's own dispatch table picks is the one all of them pick. Tests use it to
// check that a forced target (hwy::SetSupportedTargetsForTest, tests/support/simd_target.cpp) is
// the one that ran.
#pragma once

#include <cstdint>
#include <string_view>

namespace npugraph::ops {

// The HWY_* bit of the target the kernels dispatch to (hwy::TargetName names it).
std::int64_t simd_dispatch_target();

// The HWY_* bit of the target hwy::TargetName calls `name` ("AVX3", "AVX2", "SSE4", "SCALAR", ...),
// or 0 for a name that is no target. For forcing a target by name (tests, benchmarks).
std::int64_t simd_target_bit(std::string_view name);

}  // namespace npugraph::ops
