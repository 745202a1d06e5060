// ngtest::throws<E>(f, {"words", ...}): the one error matcher of the tests. Succeeds when f throws
// E (or a type derived from it) whose message contains every part; the message is streamed into
// the result either way, so a failing EXPECT_TRUE shows what was thrown.
//
//   EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { op(); }, {"num_heads = 0", "[1, 256]"}));
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>

namespace ngtest {

template <class E, class F>
::testing::AssertionResult throws(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& p : parts)
      if (what.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << what << "\" lacks \"" << p << "\"";
    return ::testing::AssertionSuccess() << what;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace ngtest
