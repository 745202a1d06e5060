// ops::simd_target_bit (src/ops/simd_target.hpp): Highway target names to HWY_* bits, as the
// forcing of a target by name in tests and benchmarks uses them.
#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "ops/simd_target.hpp"

namespace {

using npugraph::ops::simd_target_bit;

TEST(SimdTarget, NamesMapToTheirBits) {
  EXPECT_EQ(simd_target_bit("AVX2"), HWY_AVX2);
  EXPECT_EQ(simd_target_bit("AVX3"), HWY_AVX3);
  EXPECT_EQ(simd_target_bit("SSE4"), HWY_SSE4);
  EXPECT_EQ(simd_target_bit("SCALAR"), HWY_SCALAR);
  // The target the kernels run on now round-trips through its name.
  const std::int64_t now = npugraph::ops::simd_dispatch_target();
  EXPECT_EQ(simd_target_bit(hwy::TargetName(now)), now);
}

TEST(SimdTarget, ANameThatIsNoTargetIsZero) {
  EXPECT_EQ(simd_target_bit(""), 0);
  EXPECT_EQ(simd_target_bit("avx2"), 0);  // Highway's names are upper case
  EXPECT_EQ(simd_target_bit("AVX9"), 0);
  EXPECT_EQ(simd_target_bit("Unknown"), 0);  // what hwy::TargetName says of a bit that is no target
}

}  // namespace
