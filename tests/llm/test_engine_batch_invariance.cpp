// Batch invariance (Note [Batch invariance] in src/llm/engine_step.cpp): a request's tokens and
// logits are bitwise those it gets alone, whatever else runs beside it — 16 copies of a prompt of
// three prefill chunks submitted together, and 16 requests of every prompt length from one token
// to three chunks, in graph and eager mode. The long prompts reach KV lengths past kMinSplit (256),
// where FIA's decode kernel splits a row's KV columns (Note [FIA decode splits]): the splits once
// depended on the whole batch's lengths, and 0 of 16 copies kept their lone bits (issue 46, item 5).
// Requests joining while others decode run mixed steps (Note [Mixed steps]): counted, and compared
// with the same requests on an engine whose steps do not mix, and on a K-quant model (whose
// projections in the rows layout a mixed step issues per part).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "llm/bitwise_results.hpp"
#include "llm/tiny_model.hpp"
#include "npugraph/llm/engine.hpp"

namespace {

namespace llm = npugraph::llm;

const std::filesystem::path& tiny() {
  static const auto path = ngtest::write_tiny_llama("tiny_llama_batch_invariance.gguf");
  return path;
}

constexpr std::int64_t kChunk = 128;

// Two threads whatever the machine: the split the old kernel chose for a row alone (two splits of
// a ~300-token KV) and in a batch of 16 (one) then differ on every machine, as they did on ours.
llm::Engine engine(llm::StepMode mode, bool mixed_steps = true, const std::filesystem::path& model = tiny()) {
  return llm::Engine({.model = model, .threads = 2, .max_batch = 16, .prefill_chunk = kChunk, .mode = mode,
                      .keep_logits = true, .keep_full_logits = true, .mixed_steps = mixed_steps});
}

// A raw prompt of about `chars` tokens (the tiny vocabulary is mostly bytes).
std::string prompt(std::size_t chars) {
  const std::string words = "the tall cat sat on a mat and ate a big red apple while the dog slept; ";
  std::string s;
  while (s.size() < chars) s += words;
  s.resize(chars);
  return s;
}

// Runs `requests` on `e` and returns their results in order: submitted together (one step() loop),
// or each `steps_apart` steps after the one before it.
std::vector<llm::Result> together(llm::Engine& e, const std::vector<llm::Request>& requests, int steps_apart = 0) {
  std::vector<llm::RequestId> ids;
  std::map<llm::RequestId, llm::Result> done;
  auto step = [&] {
    for (llm::StepOutput& o : e.step())
      if (o.result) done[o.id] = std::move(*o.result);
  };
  for (const llm::Request& r : requests) {
    ids.push_back(e.submit(r));
    for (int s = 0; s < steps_apart; ++s) step();
  }
  while (!e.idle()) step();
  std::vector<llm::Result> out;
  for (llm::RequestId id : ids) out.push_back(done.at(id));
  return out;
}

using ngtest::expect_bitwise;

TEST(LlmEngineBatchInvariance, SixteenCopiesOfAThreeChunkPromptGetTheirLoneBits) {
  const llm::Request r{.prompt = prompt(300), .max_tokens = 12, .chat = false};
  std::vector<llm::Result> lone;
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    const std::string name = mode == llm::StepMode::graph ? "graph" : "eager";
    llm::Engine e = engine(mode);
    // Alone first, then 16 copies on the same engine (other KV blocks, the bucket of 16).
    lone.push_back(together(e, {r})[0]);
    const llm::Result& want = lone.back();
    const auto n = static_cast<std::int64_t>(want.prompt_tokens.size());
    ASSERT_GT(n, 2 * kChunk) << "the prompt must take three prefill chunks";
    ASSERT_LE(n, 3 * kChunk) << "the prompt must take three prefill chunks";
    ASSERT_GE(want.tokens.size(), 2u) << "the test wants decode steps, not only the prefill's token";
    const std::int64_t mixed_before = e.stats().mixed_steps;
    const std::vector<llm::Result> got = together(e, std::vector<llm::Request>(16, r));
    for (std::size_t i = 0; i < got.size(); ++i) expect_bitwise(got[i], want, name + ", copy " + std::to_string(i));
    // The copies' second and later chunks run while the first copies decode.
    EXPECT_GT(e.stats().mixed_steps, mixed_before) << name;
  }
  expect_bitwise(lone[0], lone[1], "graph alone vs eager alone");
}

TEST(LlmEngineBatchInvariance, SixteenPromptLengthsFromOneTokenToThreeChunksGetTheirLoneBits) {
  std::vector<llm::Request> requests;
  for (std::size_t i = 0; i < 16; ++i)  // 1 .. 376 characters, 3 .. 18 new tokens
    requests.push_back({.prompt = prompt(1 + 25 * i), .max_tokens = static_cast<std::int64_t>(3 + i), .chat = false});
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    const std::string name = mode == llm::StepMode::graph ? "graph" : "eager";
    llm::Engine e = engine(mode);
    std::vector<llm::Result> lone;
    for (const llm::Request& r : requests) lone.push_back(together(e, {r})[0]);
    const std::vector<llm::Result> got = together(e, requests);
    for (std::size_t i = 0; i < got.size(); ++i)
      expect_bitwise(got[i], lone[i], name + ", request " + std::to_string(i));
    EXPECT_GT(e.stats().mixed_steps, 0) << name;
  }
}

// Requests that join one at a time, each while the earlier ones decode, on engines whose steps mix
// and do not: the same bits, and mixed steps only where they are on.
void joining_one_by_one(const std::filesystem::path& model) {
  std::vector<llm::Request> requests;
  for (std::size_t i = 0; i < 6; ++i)  // 1 .. 271 characters: one to three chunks
    requests.push_back({.prompt = prompt(1 + 54 * i), .max_tokens = 8, .chat = false});
  auto run = [&](llm::Engine& e) { return together(e, requests, /*steps_apart=*/2); };  // each joins 2 steps later
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    const std::string name = std::string(mode == llm::StepMode::graph ? "graph" : "eager") + " " + model.filename().string();
    llm::Engine on = engine(mode, true, model), off = engine(mode, false, model);
    const std::vector<llm::Result> a = run(on), b = run(off);
    for (std::size_t i = 0; i < a.size(); ++i) expect_bitwise(a[i], b[i], name + ", request " + std::to_string(i));
    EXPECT_EQ(off.stats().mixed_steps, 0) << name;
    EXPECT_GT(on.stats().mixed_steps, 0) << name;
  }
}

TEST(LlmEngineBatchInvariance, MixedStepsGiveTheBitsOfSeparateOnes) { joining_one_by_one(tiny()); }

TEST(LlmEngineBatchInvariance, KQuantModelsMixWithTheirRowsLayoutProjectionsPerPart) {
  // Q4_K matrices in the rows layout: their q8 GEMV serves up to 16 rows, the float32 GEMM more, so
  // a mixed step of more than 16 rows issues them per part (chunks of up to 128 tokens here).
  static const auto kq = ngtest::write_tiny_llama("tiny_q4k_mixed.gguf", {.hidden = 256, .ffn = 512, .matrix_type = 12, .embd_type = 14});
  joining_one_by_one(kq);
  // With float32 activations every projection's rows are independent of the row count.
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    llm::Engine e({.model = kq, .threads = 2, .max_batch = 16, .prefill_chunk = kChunk, .mode = mode,
                   .activations = npugraph::ops::Activations::f32});
    e.submit({.prompt = prompt(20), .max_tokens = 8, .chat = false});
    e.step();
    e.step();
    e.submit({.prompt = prompt(40), .max_tokens = 4, .chat = false});
    while (!e.idle()) e.step();
    EXPECT_EQ(e.stats().mixed_steps, 1);
  }
}

}  // namespace
