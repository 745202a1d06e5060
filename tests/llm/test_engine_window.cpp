// Gemma 3's sliding-window layers past the window (Note [Sliding window] in src/llm/runner.hpp), on
// a tiny random gemma3 model: the window changes nothing while a sequence fits in it and changes
// the logits from the first token it hides on, exactly at W + 1 keys (prefill chunks, one-token
// chunks and decode steps alike); graph and eager steps stay bitwise equal in both graph orders
// for ragged batches crossing the window and block boundaries. Exactness against a float64
// reference: tests/python/llm/test_engine_reference.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "support/throws.hpp"

namespace {

namespace llm = npugraph::llm;

constexpr std::int64_t kWindow = 24;

// 7 layers: 0-4 and 6 sliding, 5 global. window: the file's sliding_window (>= max_context: no
// sequence reaches past it, so the runner issues those layers unwindowed).
const std::filesystem::path& gemma(std::int64_t window) {
  static std::map<std::int64_t, std::filesystem::path> paths;
  auto [it, added] = paths.try_emplace(window);
  if (added)
    it->second = ngtest::write_tiny_llama("tiny_gemma3_w" + std::to_string(window) + ".gguf",
                                          {.layers = 7, .context = 1024, .architecture = "gemma3",
                                           .sliding_window = window});
  return it->second;
}

std::vector<llm::Result> run(std::int64_t window, llm::EngineOptions o, const std::vector<llm::Request>& requests) {
  o.model = gemma(window);
  o.keep_logits = true;
  o.max_context = 1024;
  llm::Engine engine(o);
  return engine.generate(requests);
}

// n prompt tokens (digits: one token each in the tiny vocabulary), no chat template.
llm::Request digits(std::int64_t n, std::int64_t max_tokens) {
  std::string s;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<char>('0' + (i * 7) % 10);
  return {.prompt = s, .max_tokens = max_tokens, .chat = false};
}

// The first generated token whose logits the window changes: the one computed over more than
// kWindow keys (token t is sampled at KV length prompt + t).
std::size_t first_windowed(const llm::Result& r) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, kWindow + 1 - static_cast<std::int64_t>(r.prompt_tokens.size())));
}

void expect_window_starts_at_its_edge(const llm::Result& windowed, const llm::Result& whole, const std::string& what) {
  const std::size_t edge = first_windowed(windowed);
  ASSERT_EQ(windowed.prompt_tokens, whole.prompt_tokens) << what;
  ASSERT_GT(windowed.logits_hashes.size(), edge) << what << ": ended before the window";
  for (std::size_t t = 0; t < edge; ++t)
    EXPECT_EQ(windowed.logits_hashes[t], whole.logits_hashes[t]) << what << ": token " << t << " (inside the window)";
  EXPECT_NE(windowed.logits_hashes[edge], whole.logits_hashes[edge]) << what << ": token " << edge
                                                                     << " (the first past the window)";
}

TEST(LlmEngineWindow, TheWindowChangesNothingInsideItAndTheLogitsFromItsEdgeOn) {
  // Prompts of W - 5 tokens (the edge in decode), W (the first decode step), W + 1 (the prefill's
  // last row); prefill chunks of 8 (W + 1 = 3 * 8 + 1: a one-token chunk at the edge) and 256.
  for (std::int64_t chunk : {8, 256})
    for (llm::StepMode mode : {llm::StepMode::eager, llm::StepMode::graph})
      for (std::int64_t prompt : {kWindow - 5, kWindow, kWindow + 1}) {
        const std::vector<llm::Request> req{digits(prompt, 12)};
        const llm::EngineOptions o{.max_batch = 1, .prefill_chunk = chunk, .mode = mode};
        const std::string what = "prompt " + std::to_string(prompt) + ", chunk " + std::to_string(chunk) +
                                 (mode == llm::StepMode::graph ? ", graph" : ", eager");
        expect_window_starts_at_its_edge(run(kWindow, o, req)[0], run(1024, o, req)[0], what);
      }
}

TEST(LlmEngineWindow, GraphAndEagerAreBitwiseEqualPastTheWindowInBothOrders) {
  // Ragged rows crossing the window and the 128-token block boundary (where the window's table
  // row starts to skip whole blocks) at different steps; 2 rows at a time: requests join as others
  // leave; 8: padded buckets. Chunks of 40: prompts of 121 and 161 tokens end in one-token chunks
  // (in mixed steps: the window buffers' row after the decode rows), and unmixed steps agree.
  const std::vector<llm::Request> req{digits(3, 60), digits(121, 40), digits(161, 30), digits(30, 120), digits(250, 20)};
  for (std::int64_t max_batch : {2, 8}) {
    const llm::EngineOptions o{.max_batch = max_batch, .prefill_chunk = 40};
    auto eager = o, replay_first = o, unmixed = o;
    eager.mode = llm::StepMode::eager;
    replay_first.order = llm::GraphOrder::replay_then_update;
    unmixed.mixed_steps = false;  // joins run their chunks inside decode steps otherwise (Note [Mixed steps])
    const auto e = run(kWindow, eager, req);
    const auto g = run(kWindow, o, req);
    const auto r = run(kWindow, replay_first, req);
    const auto u = run(kWindow, unmixed, req);
    ASSERT_EQ(e.size(), req.size());
    for (std::size_t i = 0; i < req.size(); ++i) {
      EXPECT_EQ(e[i].tokens.size(), static_cast<std::size_t>(req[i].max_tokens)) << "request " << i;
      EXPECT_EQ(e[i].tokens, g[i].tokens) << "request " << i;
      EXPECT_EQ(e[i].logits_hashes, g[i].logits_hashes) << "request " << i;
      EXPECT_EQ(e[i].logits_hashes, r[i].logits_hashes) << "request " << i;
      EXPECT_EQ(e[i].logits_hashes, u[i].logits_hashes) << "request " << i << " (unmixed)";
    }
  }
}

TEST(LlmEngineWindow, ANegativeWindowIsRefusedByName) {
  const auto bad = ngtest::write_tiny_llama("tiny_gemma3_negative_window.gguf",
                                            {.architecture = "gemma3", .sliding_window = -4});
  EXPECT_TRUE(ngtest::throws<npugraph::ArgumentError>(
      [&] { llm::Engine e({.model = bad}); },
      {"tiny_gemma3_negative_window.gguf", "gemma3.attention.sliding_window = -4", "must be positive"}));
}

}  // namespace
