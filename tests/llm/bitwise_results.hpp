// Bitwise comparison of two engine results (tests/llm): tokens, text, the logits' hashes and every
// kept logit by its bits (-0 vs 0 and NaNs count), and the logprobs with their top alternatives.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "npugraph/llm/request.hpp"

namespace ngtest {

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

inline void expect_same_logprobs(const std::vector<npugraph::llm::TokenLogprob>& got,
                                 const std::vector<npugraph::llm::TokenLogprob>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << what << " #" << i;
    EXPECT_TRUE(same_bits(got[i].logprob, want[i].logprob)) << what << " #" << i;
    ASSERT_EQ(got[i].top.size(), want[i].top.size()) << what << " #" << i;
    for (std::size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_EQ(got[i].top[k].first, want[i].top[k].first) << what << " #" << i;
      EXPECT_TRUE(same_bits(got[i].top[k].second, want[i].top[k].second)) << what << " #" << i;
    }
  }
}

inline void expect_bitwise(const npugraph::llm::Result& got, const npugraph::llm::Result& want,
                           const std::string& what) {
  EXPECT_EQ(got.prompt_tokens, want.prompt_tokens) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logits_hashes, want.logits_hashes) << what;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.logits.size(); ++i) differ += !same_bits(got.logits[i], want.logits[i]);
  EXPECT_EQ(differ, 0u) << what << ": logits that differ in their bits, of " << got.logits.size();
  EXPECT_EQ(got.text, want.text) << what;
  expect_same_logprobs(got.logprobs, want.logprobs, what + " (logprobs)");
  expect_same_logprobs(got.prompt_logprobs, want.prompt_logprobs, what + " (prompt logprobs)");
}

}  // namespace ngtest
