// The old names of the helpers now in tests/support, kept only for the files not yet switched
// (tests/runtime/test_stalls.cpp, tests/graph/test_update_launch_order.cpp, tests/llm,
// tests/ops/llm): new code includes the support/ headers and uses ngtest::throws<E> (for
// throws_with<E>), ngtest::bitwise_equal (for same_bytes, which compares the bytes only),
// ngtest::f32_tensor / values_of and ngtest::DiagnosticLog. Delete this file when those are
// switched.
#pragma once

#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>

#include "support/bitwise.hpp"
#include "support/diagnostics.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

namespace ngtest {

template <class E>
::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       std::initializer_list<std::string> parts) {
  return throws<E>(f, parts);
}

inline bool same_bytes(const npugraph::Tensor& a, const npugraph::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace ngtest
