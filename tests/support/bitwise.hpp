// ngtest::bitwise_equal(a, b): the one "same result" comparison of the tests (eager, replayed,
// updated: docs/semantics.md §6). Succeeds when both tensors have the same dtype and shape and hold
// the same bytes; a failure names the first differing element.
#pragma once

#include <gtest/gtest.h>

#include "npugraph/npugraph.hpp"

namespace ngtest {

::testing::AssertionResult bitwise_equal(const npugraph::Tensor& a, const npugraph::Tensor& b);

}  // namespace ngtest
