// Helpers shared by the runtime tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace ngtest {

// Succeeds when f throws E whose message contains every part.
template <class E>
::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& p : parts)
      if (what.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks '" << p << "': " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// A float32 tensor holding `values`, written on the host (no stream work).
inline npugraph::Tensor f32_tensor(const std::vector<float>& values) {
  npugraph::Tensor t = npugraph::empty({static_cast<std::int64_t>(values.size())}, npugraph::f32);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

inline std::vector<float> values_of(const npugraph::Tensor& t) {
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

inline bool same_bytes(const npugraph::Tensor& a, const npugraph::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Collects runtime diagnostics for the scope of a test.
class DiagnosticLog {
 public:
  DiagnosticLog() {
    npugraph::set_diagnostic_handler([this](const std::string& m) {
      std::lock_guard lock(mu_);
      lines_.push_back(m);
    });
  }
  ~DiagnosticLog() { npugraph::set_diagnostic_handler(nullptr); }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace ngtest
