// The scheduler's plan, by hand (Note [Step-level engine] in src/llm/engine_step.cpp): admission
// into free batch rows, prefill chunks at fixed offsets under the step's token budget, and the
// decode rows the plan names — the requests past their prefill and those whose prompt this step's
// chunks finish, in admission order.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "llm/scheduler.hpp"

namespace {

namespace llm = npugraph::llm;

std::unique_ptr<llm::RequestState> request(int prompt_tokens) {
  auto a = std::make_unique<llm::RequestState>();
  a->seq.tokens.assign(static_cast<std::size_t>(prompt_tokens), 7);
  return a;
}

// What the engine does with a plan: each chunk caches its tokens; the one that ends a prompt
// takes its first token.
void run(const llm::StepPlan& plan) {
  for (const llm::PrefillChunk& c : plan.prefill) {
    c.request->seq.cached += c.tokens;
    if (c.request->seq.cached == static_cast<std::int64_t>(c.request->seq.tokens.size())) c.request->prefilled = true;
  }
}

std::vector<llm::RequestId> ids(const std::vector<llm::RequestState*>& rows) {
  std::vector<llm::RequestId> out;
  for (const llm::RequestState* a : rows) out.push_back(a->id);
  return out;
}

TEST(Scheduler, ThePlanNamesTheDecodeRowsIncludingPromptsItsChunksFinish) {
  llm::Scheduler s(/*max_batch=*/2, /*prefill_chunk=*/4);
  const auto lock = s.begin_step();
  const llm::RequestId a = s.enqueue(request(3)), b = s.enqueue(request(10)), c = s.enqueue(request(2));
  // Step 1: a and b take the two rows (c waits); nobody decodes, so the whole budget of 4: a's
  // 3 tokens (its prompt done: it decodes this step), then b's first chunk of 4 (the budget left
  // is 1, and a chunk is never cut).
  llm::StepPlan p = s.schedule();
  ASSERT_EQ(p.prefill.size(), 2u);
  EXPECT_EQ(p.prefill[0].request->id, a);
  EXPECT_EQ(p.prefill[0].tokens, 3);
  EXPECT_EQ(p.prefill[1].request->id, b);
  EXPECT_EQ(p.prefill[1].tokens, 4);
  EXPECT_EQ(ids(p.decode), (std::vector<llm::RequestId>{a}));
  run(p);
  // Step 2: a decodes, so the budget is a quarter (1): b's second chunk [4, 8).
  p = s.schedule();
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].tokens, 4);
  EXPECT_EQ(ids(p.decode), (std::vector<llm::RequestId>{a}));
  run(p);
  // Step 3: b's last 2 tokens finish its prompt: both rows decode, in admission order.
  p = s.schedule();
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].tokens, 2);
  EXPECT_EQ(ids(p.decode), (std::vector<llm::RequestId>{a, b}));
  // A request that ends on its first token leaves the decode rows.
  p.drop_decode(p.prefill[0].request);
  EXPECT_EQ(ids(p.decode), (std::vector<llm::RequestId>{a}));
  run(p);
  // Step 4: a is cancelled and its row freed; c joins and prefills whole (budget 1, one chunk).
  ASSERT_TRUE(s.cancel(a));
  p = s.schedule();
  ASSERT_EQ(p.cancelled.size(), 1u);
  EXPECT_EQ(p.cancelled[0]->id, a);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].request->id, c);
  EXPECT_EQ(ids(p.decode), (std::vector<llm::RequestId>{b, c}));
}

}  // namespace
