// Batch invariance (Note [Batch invariance] in src/llm/engine_step.cpp): a request's tokens and
// logits are bitwise those it gets alone, whatever else runs beside it — 16 copies of a prompt of
// three prefill chunks submitted together, and 16 requests of every prompt length from one token
// to three chunks, in graph and eager mode. The long prompts reach KV lengths past kMinSplit (256),
// where FIA's decode kernel splits a row's KV columns (Note [FIA decode splits]): the splits once
// depended on the whole batch's lengths, and 0 of 16 copies kept their lone bits (issue 46, item 5).
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
llm::Engine engine(llm::StepMode mode) {
  return llm::Engine({.model = tiny(), .threads = 2, .max_batch = 16, .prefill_chunk = kChunk, .mode = mode,
                      .keep_logits = true, .keep_full_logits = true});
}

// A raw prompt of about `chars` tokens (the tiny vocabulary is mostly bytes).
std::string prompt(std::size_t chars) {
  const std::string words = "the tall cat sat on a mat and ate a big red apple while the dog slept; ";
  std::string s;
  while (s.size() < chars) s += words;
  s.resize(chars);
  return s;
}

// Runs `requests` submitted together on `e` (one step() loop) and returns their results in order.
std::vector<llm::Result> together(llm::Engine& e, const std::vector<llm::Request>& requests) {
  std::vector<llm::RequestId> ids;
  for (const llm::Request& r : requests) ids.push_back(e.submit(r));
  std::map<llm::RequestId, llm::Result> done;
  while (!e.idle())
    for (llm::StepOutput& o : e.step())
      if (o.result) done[o.id] = std::move(*o.result);
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
    const std::vector<llm::Result> got = together(e, std::vector<llm::Request>(16, r));
    for (std::size_t i = 0; i < got.size(); ++i) expect_bitwise(got[i], want, name + ", copy " + std::to_string(i));
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
  }
}

}  // namespace
