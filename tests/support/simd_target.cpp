// NPUGRAPH_TEST_SIMD_TARGET=<name>: the whole test run on that Highway target (a name
// hwy::TargetName gives: AVX3, AVX2, SSE4, SCALAR, ...) instead of the machine's best, through
// hwy::SetSupportedTargetsForTest, so that one machine tests the code paths other CPUs run. ctest's
// simd_target_* entries (CMakeLists.txt) run the SIMD kernels' suites this way. A target this CPU
// cannot run, or the one the default run already uses, skips every test, saying so; a name that is
// no target, or a target the library was not compiled for, fails the run.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "hwy/targets.h"
#include "ops/simd_target.hpp"

namespace {

class SimdTargetEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    const char* name = std::getenv("NPUGRAPH_TEST_SIMD_TARGET");
    if (name == nullptr || *name == '\0') return;
    const std::int64_t bit = npugraph::ops::simd_target_bit(name);
    ASSERT_NE(bit, 0) << "NPUGRAPH_TEST_SIMD_TARGET = " << name
                      << ": not a Highway target name (AVX3, AVX2, SSE4, SCALAR, ...)";
    if ((hwy::SupportedTargets() & bit) == 0)
      GTEST_SKIP() << "NPUGRAPH_TEST_SIMD_TARGET = " << name << ": this CPU cannot run it";
    const std::int64_t best = npugraph::ops::simd_dispatch_target();
    if (best == bit)
      GTEST_SKIP() << "NPUGRAPH_TEST_SIMD_TARGET = " << name
                   << ": the machine's best target, which the default run tests";
    hwy::SetSupportedTargetsForTest(bit);
    forced_ = true;
    const std::int64_t ran = npugraph::ops::simd_dispatch_target();
    ASSERT_EQ(ran, bit) << "NPUGRAPH_TEST_SIMD_TARGET = " << name << ": the kernels dispatch to "
                        << hwy::TargetName(ran) << " (the library was not compiled for " << name << ")";
    std::printf("[ SIMD     ] kernels forced to %s (this machine's best: %s)\n", name, hwy::TargetName(best));
  }
  void TearDown() override {
    if (forced_) hwy::SetSupportedTargetsForTest(0);
  }

 private:
  bool forced_ = false;
};

[[maybe_unused]] testing::Environment* const kSimdTarget =
    testing::AddGlobalTestEnvironment(new SimdTargetEnvironment);

}  // namespace
