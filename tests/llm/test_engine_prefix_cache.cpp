// The engine's prefix cache (Note [Prefix cache] in src/llm/prefix_cache.hpp) on the tiny random
// models, with prompts of digits (one token each, so block counts are known by hand): a second
// prompt of 3.5 blocks takes exactly 3 blocks; a request served from cached blocks gets the
// tokens, logits and logprobs it gets with the cache off, bitwise, in graph and eager mode, at
// several prefill chunks, through Gemma 3's sliding window too; a prompt-logprobs request
// computes its whole prompt; a cancelled request's published blocks stay cached and nothing is
// used when idle; under pressure the least recently used prefix is evicted; copies prefilled side
// by side end as one cached prefix; on SmolLM2 (when its file is there), a chat's second turn
// served from the first's blocks gets the cold bits.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "llm/bitwise_results.hpp"
#include "llm/model_path.hpp"
#include "llm/tiny_model.hpp"
#include "npugraph/llm/engine.hpp"

namespace {

namespace llm = npugraph::llm;

const std::filesystem::path& tiny() {
  static const auto path = ngtest::write_tiny_llama("tiny_llama_prefix_cache.gguf");
  return path;
}

const std::filesystem::path& gemma() {  // 7 layers, 6 of them sliding (window 24)
  static const auto path = ngtest::write_tiny_llama(
      "tiny_gemma3_prefix_cache.gguf", {.layers = 7, .context = 1024, .architecture = "gemma3", .sliding_window = 24});
  return path;
}

llm::Engine engine(bool cache, llm::EngineOptions o = {}) {
  if (o.model.empty()) o.model = tiny();
  o.threads = 2;
  o.keep_logits = true;
  o.keep_full_logits = true;
  o.prefix_cache = cache;
  return llm::Engine(o);
}

// `n` digits, one token each: the first `shared` the same for every `variant`, the rest its own.
std::string digits(std::int64_t n, std::int64_t shared = 0, int variant = 0) {
  std::string s;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<char>('0' + (i * 7 + (i < shared ? 0 : 3 + variant)) % 10);
  return s;
}

llm::Request request(std::string prompt, std::int64_t max_tokens = 6) {
  return {.prompt = std::move(prompt), .max_tokens = max_tokens, .chat = false};
}

struct Served {
  llm::Result result;
  std::int64_t cached_tokens = -1;  // from its last StepOutput
};

// Submits `requests` together and steps `e` until they are done.
std::vector<Served> serve(llm::Engine& e, const std::vector<llm::Request>& requests) {
  std::vector<llm::RequestId> ids;
  for (const llm::Request& r : requests) ids.push_back(e.submit(r));
  std::map<llm::RequestId, Served> done;
  while (!e.idle())
    for (llm::StepOutput& o : e.step())
      if (o.result) done[o.id] = {std::move(*o.result), o.cached_tokens};
  std::vector<Served> out;
  for (llm::RequestId id : ids) out.push_back(std::move(done.at(id)));
  return out;
}
Served serve(llm::Engine& e, const llm::Request& r) { return std::move(serve(e, std::vector{r})[0]); }

using ngtest::expect_bitwise;

TEST(LlmEnginePrefixCache, ASecondPromptOfThreeAndAHalfBlocksTakesExactlyThreeBlocks) {
  llm::Engine e = engine(true, {.max_batch = 2, .prefill_chunk = 128});  // blocks of 128 tokens
  const llm::Request r = request(digits(448, 448));
  const Served first = serve(e, r);
  ASSERT_EQ(first.result.prompt_tokens.size(), 448u);
  EXPECT_EQ(first.cached_tokens, 0);
  llm::EngineLoad l = e.load();
  EXPECT_EQ(l.prefix_cache_queries, 448);
  EXPECT_EQ(l.prefix_cache_hits, 0);
  EXPECT_EQ(l.kv_blocks_used, 0);    // idle: no block is used ...
  EXPECT_EQ(l.kv_blocks_cached, 3);  // ... the prompt's 3 full blocks are cached
  e.reset_stats();
  const Served second = serve(e, r);
  EXPECT_EQ(second.cached_tokens, 384);
  EXPECT_EQ(e.stats().prefill_tokens, 448 - 384);  // only the half block is prefilled
  EXPECT_EQ(second.result.tokens, first.result.tokens);
  l = e.load();
  EXPECT_EQ(l.prefix_cache_queries, 2 * 448);
  EXPECT_EQ(l.prefix_cache_hits, 384);
  EXPECT_EQ(l.kv_blocks_used, 0);
  EXPECT_EQ(l.kv_blocks_cached, 3);
  // 200 tokens in common: one whole block.
  const Served third = serve(e, request(digits(300, 200)));
  EXPECT_EQ(third.cached_tokens, 128);
  EXPECT_EQ(e.load().prefix_cache_hits, 384 + 128);
  // A prompt that ends where the cache does computes its last token: 2 blocks of 3.
  EXPECT_EQ(serve(e, request(digits(384, 384))).cached_tokens, 256);
}

TEST(LlmEnginePrefixCache, OffItLooksNothingUpAndKeepsNothing) {
  llm::Engine e = engine(false, {.prefill_chunk = 128});
  const llm::Request r = request(digits(448));
  EXPECT_EQ(serve(e, r).cached_tokens, 0);
  EXPECT_EQ(serve(e, r).cached_tokens, 0);
  const llm::EngineLoad l = e.load();
  EXPECT_EQ(l.prefix_cache_queries, 0);
  EXPECT_EQ(l.kv_blocks_cached, 0);
  EXPECT_EQ(l.kv_blocks_used, 0);
}

TEST(LlmEnginePrefixCache, AChunkWhoseLcmWithTheBlockPassesTheContextNeverHits) {
  llm::Engine e = engine(true, {.prefill_chunk = 100});  // lcm(128, 100) = 3200 > 512
  const llm::Request r = request(digits(448));
  serve(e, r);
  EXPECT_EQ(serve(e, r).cached_tokens, 0);
  EXPECT_EQ(e.load().prefix_cache_queries, 2 * 448);
  EXPECT_EQ(e.load().prefix_cache_hits, 0);
}

// A (400 shared + 60) warms the cache; B (400 shared + 80, logprobs, greedy and seeded) and C (the
// first 392 shared tokens: a tail of 8 past a hit of 3 blocks, which the q8 GEMV computes where a
// cold chunk of more than 16 rows would not) are served from it, and cold on an engine without it.
void expect_cold_bits(llm::EngineOptions o, std::int64_t want_hit, const std::string& what) {
  const llm::Request a = request(digits(460, 400, 0), 4);
  std::vector<llm::Request> b{request(digits(480, 400, 1), 8), request(digits(480, 400, 1), 8),
                              request(digits(392, 400), 8)};
  b[0].logprobs = 3;
  b[1].seed = 11;
  b[1].temperature = 1.5;
  b[1].top_k = 20;
  llm::Engine warm = engine(true, o), cold = engine(false, o);
  serve(warm, a);
  for (std::size_t i = 0; i < b.size(); ++i) {
    const Served hot = serve(warm, b[i]);
    EXPECT_EQ(hot.cached_tokens, want_hit) << what << ", request " << i;
    expect_bitwise(hot.result, serve(cold, b[i]).result, what + ", request " + std::to_string(i));
  }
}

TEST(LlmEnginePrefixCache, ServedFromCachedBlocksItGetsTheColdBitsInGraphAndEagerMode) {
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    const std::string name = mode == llm::StepMode::graph ? "graph" : "eager";
    // The hit: whole blocks of A's full chunks, in steps of lcm(128, chunk), inside the 400 shared.
    expect_cold_bits({.max_batch = 2, .prefill_chunk = 128, .mode = mode}, 384, name + ", chunk 128");
    expect_cold_bits({.max_batch = 2, .prefill_chunk = 16, .mode = mode}, 384, name + ", chunk 16 (q8 GEMV)");
    expect_cold_bits({.max_batch = 2, .prefill_chunk = 256, .mode = mode}, 256, name + ", chunk 256");
    expect_cold_bits({.max_batch = 2, .prefill_chunk = 64, .mode = mode, .order = llm::GraphOrder::replay_then_update},
                     384, name + ", chunk 64, replay then update");
  }
}

TEST(LlmEnginePrefixCache, SlidingWindowLayersGetTheColdBitsFromCachedBlocks) {
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager})
    expect_cold_bits({.model = gemma(), .max_batch = 2, .max_context = 1024, .prefill_chunk = 128, .mode = mode}, 384,
                     mode == llm::StepMode::graph ? "gemma3, graph" : "gemma3, eager");
}

TEST(LlmEnginePrefixCache, APromptLogprobsRequestComputesItsWholePromptAndStillPublishes) {
  const llm::Request plain = request(digits(460));
  llm::Request echo = plain;
  echo.prompt_logprobs = 2;
  llm::Engine warm = engine(true, {.prefill_chunk = 128}), cold = engine(false, {.prefill_chunk = 128});
  serve(warm, plain);
  const Served got = serve(warm, echo);
  EXPECT_EQ(got.cached_tokens, 0);
  EXPECT_EQ(warm.load().prefix_cache_queries, 460);  // it looked nothing up
  ASSERT_EQ(got.result.prompt_logprobs.size(), 460u);
  expect_bitwise(got.result, serve(cold, echo).result, "prompt logprobs");
  // On an empty cache, it publishes its blocks for the next prompt.
  llm::Engine fresh = engine(true, {.prefill_chunk = 128});
  serve(fresh, echo);
  EXPECT_EQ(fresh.load().kv_blocks_cached, 3);
  EXPECT_EQ(serve(fresh, plain).cached_tokens, 384);
}

TEST(LlmEnginePrefixCache, ACancelledRequestsPublishedBlocksStayCachedAndNoneIsUsed) {
  llm::Engine e = engine(true, {.prefill_chunk = 128});
  const llm::Request r = request(digits(460));
  const llm::RequestId id = e.submit(r);
  (void)e.step();  // its first chunk: tokens [0, 128), one full block published
  EXPECT_EQ(e.load().kv_blocks_used, 4);
  ASSERT_TRUE(e.cancel(id));
  bool cancelled = false;
  for (const llm::StepOutput& o : e.step()) cancelled |= o.id == id && o.finish == llm::FinishReason::cancelled;
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(e.idle());
  EXPECT_EQ(e.load().kv_blocks_used, 0);
  EXPECT_EQ(e.load().kv_blocks_cached, 1);
  llm::Engine cold = engine(false, {.prefill_chunk = 128});
  const Served again = serve(e, r);
  EXPECT_EQ(again.cached_tokens, 128);
  expect_bitwise(again.result, serve(cold, r).result, "after a cancelled prefill");
}

TEST(LlmEnginePrefixCache, UnderPressureTheLeastRecentlyUsedPrefixIsEvictedAndResultsStayCold) {
  // One row: 4 blocks in all. A's 3 cached blocks must make room for B's 4.
  const llm::EngineOptions o{.max_batch = 1, .prefill_chunk = 128};
  llm::Engine e = engine(true, o), cold = engine(false, o);
  const llm::Request a = request(digits(460, 0, 0)), b = request(digits(460, 0, 1));
  serve(e, a);
  ASSERT_EQ(e.load().kv_blocks_cached, 3);
  const Served b1 = serve(e, b);
  EXPECT_EQ(b1.cached_tokens, 0);
  EXPECT_EQ(e.load().kv_blocks_cached, 3);  // B's now: A's were evicted for them
  const Served a2 = serve(e, a);
  EXPECT_EQ(a2.cached_tokens, 0);
  const Served a3 = serve(e, a);  // A is back in the cache
  EXPECT_EQ(a3.cached_tokens, 384);
  const Served cold_a = serve(cold, a);
  expect_bitwise(a2.result, cold_a.result, "A after its eviction");
  expect_bitwise(a3.result, cold_a.result, "A from the cache");
  expect_bitwise(b1.result, serve(cold, b).result, "B");
}

TEST(LlmEnginePrefixCache, SixteenCopiesPrefilledSideBySideEndAsOneCachedPrefixWithTheColdBits) {
  const llm::EngineOptions o{.max_batch = 16, .prefill_chunk = 128};
  llm::Engine e = engine(true, o), cold = engine(false, o);
  const llm::Request r = request(digits(460, 0, 2), 5);
  const llm::Result want = serve(cold, r).result;
  const std::vector<Served> got = serve(e, std::vector<llm::Request>(16, r));
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].cached_tokens, 0) << "copy " << i;  // all admitted before any block was published
    expect_bitwise(got[i].result, want, "copy " + std::to_string(i));
  }
  EXPECT_EQ(e.load().kv_blocks_cached, 3);
  EXPECT_EQ(e.load().kv_blocks_used, 0);
}

TEST(LlmEnginePrefixCache, SmolLm2SecondChatTurnFromCachedBlocksGetsTheColdBits) {
  NGTEST_REQUIRE_MODEL(path);
  std::string history;
  while (history.size() < 1400) history += "A graph is captured once and replayed while its tasks are updated. ";
  std::vector<llm::ChatMessage> chat{{"user", history + "What is this about?"}};
  const llm::EngineOptions o{.model = path, .max_batch = 1, .max_context = 1024, .prefill_chunk = 128};
  llm::Engine warm = engine(true, o), cold = engine(false, o);
  const Served first = serve(warm, {.messages = chat, .max_tokens = 8});
  chat.push_back({"assistant", first.result.text});
  chat.push_back({"user", "Shorter, please."});
  llm::Request second{.messages = chat, .max_tokens = 8, .logprobs = 5};
  const Served hot = serve(warm, second);
  const auto prompt = static_cast<std::int64_t>(first.result.prompt_tokens.size());
  EXPECT_EQ(hot.cached_tokens, prompt / 128 * 128) << "the first turn's full chunks";
  ASSERT_GT(hot.cached_tokens, 0);
  expect_bitwise(hot.result, serve(cold, second).result, "SmolLM2, second turn");
}

}  // namespace
