// Token constraints (Request::constraint, Note [Token constraints]) on the tiny random Llama: a
// scripted constraint allows a few tokens per step; every token generated is one of them, each
// greedy token is the argmax of its raw logits row (kept by keep_full_logits) over the allowed
// set, computed here; the request stops when the constraint is finished; graph == eager and alone
// == batched with unconstrained requests, bitwise; the logits are the model's own (the mask works
// in the sampler's copy); a refused token ends the request with an error; a factory that makes
// nothing is an ArgumentError.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "llm/bitwise_results.hpp"
#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "support/throws.hpp"

namespace {

namespace llm = npugraph::llm;
using ngtest::throws;

const std::filesystem::path& tiny() {
  static const auto path = ngtest::write_tiny_llama("tiny_llama_constraint.gguf");
  return path;
}

llm::EngineOptions opts(llm::EngineOptions o = {}) {
  o.model = tiny();
  o.keep_full_logits = true;
  return o;
}

// Step i allows tokens allowed(i) (three of them, none an end of generation: ids from 10 up), and
// the constraint is finished after `length` tokens. It records what it was told.
struct Script {
  std::int64_t vocab = 0, length = 0, salt = 0;
  std::set<std::int32_t> allowed(std::int64_t i) const {
    const std::int64_t span = vocab - 10;
    return {static_cast<std::int32_t>(10 + (7 * i + 3 + salt) % span), static_cast<std::int32_t>(10 + (11 * i + 5 + salt) % span),
            static_cast<std::int32_t>(10 + (13 * i + 1 + 2 * salt) % span)};
  }
};

class ScriptedConstraint : public llm::TokenConstraint {
 public:
  ScriptedConstraint(Script s, bool refuse = false) : s_(s), refuse_(refuse) {}
  void allowed(std::span<std::uint32_t> mask) override {
    for (std::int32_t t : s_.allowed(i_)) mask[static_cast<std::size_t>(t / 32)] |= 1u << (t % 32);
  }
  bool accept(std::int32_t token) override {
    if (refuse_ || !s_.allowed(i_).contains(token)) return false;
    ++i_;
    return true;
  }
  bool finished() const override { return i_ >= s_.length; }

 private:
  Script s_;
  bool refuse_;
  std::int64_t i_ = 0;
};

llm::TokenConstraintFactory scripted(Script s, bool refuse = false) {
  return [s, refuse] { return std::make_unique<ScriptedConstraint>(s, refuse); };
}

TEST(LlmEngineConstraint, GreedyTokensAreTheArgmaxOverTheAllowedSetAndTheRequestStopsWhenFinished) {
  llm::Engine e(opts({.max_batch = 2, .mode = llm::StepMode::graph}));
  const std::int64_t V = e.vocab();
  const Script s{.vocab = V, .length = 7};
  const llm::Result r = e.generate(std::vector<llm::Request>{{.prompt = "once upon a time", .max_tokens = 20,
                                                             .constraint = scripted(s)}})[0];
  ASSERT_EQ(r.tokens.size(), 7u);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.finish, llm::FinishReason::stop);
  ASSERT_EQ(r.logits.size(), 7u * static_cast<std::size_t>(V));
  std::size_t differs_from_unconstrained = 0;
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    const float* row = r.logits.data() + i * static_cast<std::size_t>(V);
    std::int32_t best = -1;
    for (std::int32_t t : s.allowed(static_cast<std::int64_t>(i)))  // ascending: ties to the lower id
      if (best < 0 || row[t] > row[best]) best = t;
    EXPECT_EQ(r.tokens[i], best) << "token " << i;
    differs_from_unconstrained += std::max_element(row, row + V) - row != best;
  }
  EXPECT_GT(differs_from_unconstrained, 0u);  // the mask did something
}

TEST(LlmEngineConstraint, GraphEqualsEagerAndAloneEqualsBatchedBitwise) {
  llm::Engine g(opts({.max_batch = 4, .mode = llm::StepMode::graph}));
  llm::Engine e(opts({.max_batch = 4, .mode = llm::StepMode::eager}));
  std::vector<llm::Request> req;  // request 1 unconstrained; greedy, sampled, top-k
  for (int i = 0; i < 5; ++i) {
    llm::Request r{.prompt = i % 2 ? "the cat sat" : "once upon a time", .max_tokens = 12,
                   .seed = static_cast<std::uint64_t>(i), .temperature = i < 2 ? 0.0 : 1.1,
                   .top_k = i == 3 ? 3 : 0};
    if (i != 1) r.constraint = scripted({.vocab = g.vocab(), .length = 9, .salt = i});
    req.push_back(std::move(r));
  }
  const auto a = g.generate(req), b = e.generate(req);
  for (std::size_t i = 0; i < req.size(); ++i) ngtest::expect_bitwise(a[i], b[i], "request " + std::to_string(i));
  for (std::size_t i = 0; i < req.size(); ++i) {
    llm::Engine alone(opts({.max_batch = 1, .mode = llm::StepMode::graph}));
    ngtest::expect_bitwise(alone.generate(std::vector<llm::Request>{req[i]})[0], a[i], "alone " + std::to_string(i));
  }
  for (std::size_t i = 0; i < req.size(); ++i) {
    if (i == 1) continue;
    const Script s{.vocab = g.vocab(), .length = 9, .salt = static_cast<std::int64_t>(i)};
    ASSERT_EQ(a[i].tokens.size(), 9u) << i;
    for (std::size_t k = 0; k < a[i].tokens.size(); ++k)
      EXPECT_TRUE(s.allowed(static_cast<std::int64_t>(k)).contains(a[i].tokens[k])) << i << " token " << k;
  }
}

TEST(LlmEngineConstraint, ARefusedTokenEndsTheRequestWithAnError) {
  llm::Engine e(opts({.max_batch = 2}));
  const auto r = e.generate(std::vector<llm::Request>{
      {.prompt = "once upon", .max_tokens = 5, .constraint = scripted({.vocab = e.vocab(), .length = 5}, /*refuse=*/true)},
      {.prompt = "once upon", .max_tokens = 5}});
  EXPECT_EQ(r[0].finish, llm::FinishReason::error);
  EXPECT_EQ(r[0].tokens.size(), 1u);
  EXPECT_EQ(r[1].finish, llm::FinishReason::length);  // the other request is not disturbed
  EXPECT_EQ(r[1].tokens.size(), 5u);
}

TEST(LlmEngineConstraint, AFactoryThatMakesNothingIsAnArgumentError) {
  llm::Engine e(opts());
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [&] { e.submit({.prompt = "x", .constraint = [] { return std::unique_ptr<llm::TokenConstraint>(); }}); },
      {"request.constraint: the factory made no constraint (null)"}));
}

}  // namespace
