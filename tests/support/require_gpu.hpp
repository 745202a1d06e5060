// NG_REQUIRE_GPU(): skips the current test, saying why, where no CUDA device can run it (a build
// without the CUDA backend, or no device on this machine). For the CudaGpu* suites.
#pragma once

#include <gtest/gtest.h>

#include "runtime/backend.hpp"

#define NG_REQUIRE_GPU()                                                                              \
  do {                                                                                               \
    if (::npugraph::detail::cuda_device_count() == 0)                                                \
      GTEST_SKIP() << "no CUDA device: "                                                             \
                   << (NPUGRAPH_BUILT_WITH_CUDA ? "cudaGetDeviceCount found none on this machine"    \
                                                : "this build has no cuda backend (NPUGRAPH_CUDA)"); \
  } while (0)
