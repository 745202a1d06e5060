// The step-level engine (Note [Step-level engine]) on the tiny random Llama: requests joining
// mid-flight and prefilled in chunks give each request the tokens and logits it gets alone (greedy
// and seeded sampling alike, graph == eager); per-request sampling settings mix in one captured step
// without re-capturing; cancellation frees KV blocks; stop strings cut the text, streamed and whole;
// submit's errors name the field; a thread submitting while another steps loses nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "support/throws.hpp"

namespace {

namespace llm = npugraph::llm;
using ngtest::throws;

const std::filesystem::path& tiny() {
  static const auto path = ngtest::write_tiny_llama("tiny_llama_step.gguf");
  return path;
}

llm::EngineOptions opts(llm::EngineOptions o = {}) {
  o.model = tiny();
  o.keep_logits = true;
  return o;
}

// Each request alone in its own engine (generate, batch of one).
llm::Result alone(const llm::Request& r, llm::StepMode mode = llm::StepMode::graph, std::int64_t prefill_chunk = 256) {
  llm::Engine e(opts({.max_batch = 1, .prefill_chunk = prefill_chunk, .mode = mode}));
  return e.generate(std::vector<llm::Request>{r})[0];
}

struct Collected {
  std::map<llm::RequestId, std::string> streamed;
  std::map<llm::RequestId, llm::Result> results;
  std::map<llm::RequestId, llm::FinishReason> finish;
  void add(std::vector<llm::StepOutput> outs) {
    for (llm::StepOutput& o : outs) {
      streamed[o.id] += o.text;
      if (o.finish != llm::FinishReason::none) {
        EXPECT_TRUE(o.result.has_value()) << o.id;
        EXPECT_FALSE(finish.contains(o.id)) << "request " << o.id << " finished twice";
        finish[o.id] = o.finish;
        if (o.result) {
          EXPECT_EQ(o.completion_tokens, static_cast<std::int64_t>(o.result->tokens.size()));
          results[o.id] = std::move(*o.result);
        }
      } else {
        EXPECT_FALSE(o.result.has_value());
      }
    }
  }
};

std::vector<llm::Request> mixed() {
  return {{.prompt = "hello", .max_tokens = 14},
          {.prompt = "the tall cat sat on a mat", .max_tokens = 9, .seed = 3, .temperature = 3.0, .top_k = 50},
          {.prompt = "a much longer prompt that is prefilled in several small chunks while others decode",
           .max_tokens = 12},
          {.prompt = "ab", .max_tokens = 11, .chat = false, .seed = 9, .temperature = 2.0, .top_p = 0.9},
          {.prompt = "hello hello", .max_tokens = 1}};
}

TEST(LlmEngineStep, RequestsJoiningMidFlightGetWhatTheyGetAlone) {
  const auto req = mixed();
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    // prefill_chunk 8: the long prompt takes several steps, interleaved with the others' decoding.
    llm::Engine e(opts({.max_batch = 4, .prefill_chunk = 8, .mode = mode}));
    Collected c;
    std::vector<llm::RequestId> ids{e.submit(req[0]), e.submit(req[1])};
    c.add(e.step());
    c.add(e.step());
    ids.push_back(e.submit(req[2]));  // joins while 0 and 1 decode
    c.add(e.step());
    ids.push_back(e.submit(req[3]));
    ids.push_back(e.submit(req[4]));  // waits for a free row (max_batch 4)
    while (!e.idle()) c.add(e.step());
    ASSERT_EQ(c.results.size(), req.size());
    for (std::size_t i = 0; i < req.size(); ++i) {
      const llm::Result want = alone(req[i], mode, /*prefill_chunk=*/8);  // chunks of its own prompt
      const llm::Result& got = c.results.at(ids[i]);
      EXPECT_EQ(got.tokens, want.tokens) << "request " << i;
      EXPECT_EQ(got.logits_hashes, want.logits_hashes) << "request " << i;
      EXPECT_EQ(got.text, want.text) << "request " << i;
      EXPECT_EQ(c.streamed.at(ids[i]), got.text) << "request " << i;
      EXPECT_EQ(got.finish, c.finish.at(ids[i]));
    }
    EXPECT_EQ(c.results.at(ids[4]).tokens.size(), 1u);
    EXPECT_EQ(c.finish.at(ids[4]), llm::FinishReason::length);
    EXPECT_EQ(e.load().kv_blocks_used, 0);
    EXPECT_EQ(e.load().running + e.load().waiting, 0);
  }
}

TEST(LlmEngineStep, SamplingSettingsMixInOneCapturedStepPerBucket) {
  // Greedy and sampled requests side by side and in changing mixes: graph == eager bitwise, and
  // the captured graphs are the buckets', never one per mix.
  std::vector<llm::Request> req;
  for (int i = 0; i < 8; ++i)
    req.push_back({.prompt = "once upon a time", .max_tokens = 6 + 2 * i, .seed = static_cast<std::uint64_t>(i),
                   .temperature = i % 2 ? 0.0 : 1.0 + 0.5 * i, .top_k = i % 3 ? 0 : 20,
                   .top_p = i % 4 == 2 ? 0.8 : 1.0});
  std::vector<llm::Result> graph, eager;
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    llm::Engine e(opts({.max_batch = 4, .mode = mode}));
    auto& out = mode == llm::StepMode::graph ? graph : eager;
    out = e.generate(req);
    if (mode == llm::StepMode::graph) {
      EXPECT_LE(e.captured_graphs(), 3);  // buckets 1, 2, 4
    }
  }
  for (std::size_t i = 0; i < req.size(); ++i) {
    EXPECT_EQ(graph[i].tokens, eager[i].tokens) << i;
    EXPECT_EQ(graph[i].logits_hashes, eager[i].logits_hashes) << i;
    EXPECT_EQ(graph[i].tokens, alone(req[i]).tokens) << i;  // the draws depend on (seed, step) only
  }
  // Another seed, another draw (the settings reach the sampler).
  llm::Request other = req[0];
  other.seed = 1234;
  EXPECT_NE(alone(other).tokens, graph[0].tokens);
}

TEST(LlmEngineStep, CancelFreesTheBlocksAndReportsTheRequest) {
  llm::Engine e(opts({.max_batch = 2, .block_size = 128}));
  const llm::RequestId a = e.submit({.prompt = "hello", .max_tokens = 40});
  const llm::RequestId b = e.submit({.prompt = "the tall cat", .max_tokens = 40});
  const llm::RequestId w = e.submit({.prompt = "waiting", .max_tokens = 40});  // no free row yet
  Collected c;
  c.add(e.step());
  c.add(e.step());
  EXPECT_EQ(e.load().running, 2);
  EXPECT_EQ(e.load().waiting, 1);
  EXPECT_EQ(e.load().kv_blocks_used, 2);
  EXPECT_TRUE(e.cancel(a));
  EXPECT_TRUE(e.cancel(w));
  EXPECT_FALSE(e.cancel(9999));
  c.add(e.step());
  EXPECT_EQ(c.finish.at(a), llm::FinishReason::cancelled);
  EXPECT_EQ(c.finish.at(w), llm::FinishReason::cancelled);
  EXPECT_EQ(c.results.at(w).tokens.size(), 0u);
  EXPECT_GE(c.results.at(a).tokens.size(), 2u);
  EXPECT_EQ(e.load().running, 1);
  EXPECT_EQ(e.load().waiting, 0);
  EXPECT_EQ(e.load().kv_blocks_used, 1);
  EXPECT_FALSE(e.cancel(a));  // already reported
  while (!e.idle()) c.add(e.step());
  EXPECT_EQ(c.finish.at(b), llm::FinishReason::length);
  EXPECT_EQ(c.results.at(b).tokens, alone({.prompt = "the tall cat", .max_tokens = 40}).tokens);
  EXPECT_EQ(e.load().kv_blocks_used, 0);
}

TEST(LlmEngineStep, StopStringsCutTheTextStreamedAndWhole) {
  const llm::Request base{.prompt = "hello there", .max_tokens = 30};
  const llm::Result full = alone(base);
  ASSERT_GE(full.text.size(), 12u) << full.text;
  // Stop strings taken from the greedy text: the text ends just before the earliest one.
  const std::string s1 = full.text.substr(6, 4), s2 = full.text.substr(9, 3);
  const std::size_t cut = std::min(full.text.find(s1), full.text.find(s2));
  llm::Request r = base;
  r.stop = {s1, s2, "never appears \x01"};
  llm::Engine e(opts({.max_batch = 2}));
  const llm::RequestId id = e.submit(r);
  Collected c;
  while (!e.idle()) c.add(e.step());
  EXPECT_EQ(c.results.at(id).text, full.text.substr(0, cut));
  EXPECT_EQ(c.streamed.at(id), full.text.substr(0, cut));
  EXPECT_EQ(c.finish.at(id), llm::FinishReason::stop);
  EXPECT_TRUE(c.results.at(id).stopped);
  EXPECT_LT(c.results.at(id).tokens.size(), full.tokens.size());
  // A stop string that never occurs changes nothing.
  llm::Request never = base;
  never.stop = {"\x01\x02"};
  const llm::RequestId id2 = e.submit(never);
  Collected c2;
  while (!e.idle()) c2.add(e.step());
  EXPECT_EQ(c2.results.at(id2).text, full.text);
  EXPECT_EQ(c2.streamed.at(id2), full.text);
}

TEST(LlmEngineStep, MessagesUseTheChatTemplate) {
  // One user message is exactly the prompt with chat = true.
  llm::Engine e(opts());
  const llm::RequestId a = e.submit({.messages = {{"user", "the tall cat"}}, .max_tokens = 8});
  const llm::RequestId b = e.submit({.prompt = "the tall cat", .max_tokens = 8});
  const llm::RequestId s = e.submit({.messages = {{"system", "be brief"}, {"user", "the tall cat"}}, .max_tokens = 8});
  Collected c;
  while (!e.idle()) c.add(e.step());
  EXPECT_EQ(c.results.at(a).prompt_tokens, c.results.at(b).prompt_tokens);
  EXPECT_EQ(c.results.at(a).tokens, c.results.at(b).tokens);
  EXPECT_NE(c.results.at(s).prompt_tokens, c.results.at(a).prompt_tokens);  // the system turn replaces the default
}

TEST(LlmEngineStep, SubmitErrorsNameTheField) {
  llm::Engine e(opts({.max_context = 64}));
  using npugraph::ArgumentError;
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({}); }, {"request.prompt is empty (and no messages)"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.prompt = "a", .messages = {{"user", "b"}}}); },
                                    {"request: give a prompt or messages, not both"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.prompt = "a", .max_tokens = 0}); },
                                    {"request.max_tokens = 0: must be >= 1"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.prompt = "a", .temperature = -0.5}); },
                                    {"request.temperature = -0.5: must be finite and >= 0"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.prompt = "a", .top_k = -1}); },
                                    {"request.top_k = -1: must be in [0, ", "the model's vocabulary"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.prompt = "a", .top_p = 1.5}); },
                                    {"request.top_p = 1.5: must be in (0, 1]"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.prompt = "a", .stop = {"x", ""}}); },
                                    {"request.stop[1] is empty"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { e.submit({.messages = {{"robot", "hi"}}}); },
                                    {"request.messages[0].role = 'robot'", "'system', 'user' or 'assistant'"}));
  EXPECT_TRUE(throws<llm::ContextLengthError>([&] { e.submit({.prompt = std::string(300, 'x'), .chat = false}); },
                                              {"request.prompt is", "tokens: longer than the context",
                                               "max_context = 64"}));
  EXPECT_TRUE(e.idle());  // nothing was queued
  // generate() drives step() itself: not while submitted requests are pending.
  e.submit({.prompt = "a", .max_tokens = 2, .chat = false});
  EXPECT_TRUE(throws<ArgumentError>([&] { e.generate(std::vector<llm::Request>{{.prompt = "b"}}); },
                                    {"generate: the engine is serving 1 submitted requests"}));
  while (!e.idle()) (void)e.step();
  EXPECT_EQ(e.generate(std::vector<llm::Request>{{.prompt = "b", .max_tokens = 2, .chat = false}})[0].tokens.size(), 2u);
}

// submit() in two halves (prepare, then submit the PreparedRequest) runs the same request: the same
// tokens as submit(Request); a prompt its bytes alone prove too long is refused before tokenising,
// with the same error type and field; a moved-from PreparedRequest is refused by name.
TEST(LlmEngineStep, PreparedRequestsRunAsSubmittedOnesAndLongPromptsFailOnTheirBytes) {
  llm::Engine e(opts({.max_context = 64}));
  const llm::Request r{.prompt = "abc", .max_tokens = 5, .chat = false, .temperature = 0.0};
  const auto whole = e.generate(std::vector<llm::Request>{r});
  llm::PreparedRequest p = e.prepare(r);
  EXPECT_EQ(p.prompt_tokens(), static_cast<std::int64_t>(whole[0].prompt_tokens.size()));
  EXPECT_TRUE(e.idle());  // prepared, not queued
  const llm::RequestId id = e.submit(std::move(p));
  std::vector<std::int32_t> tokens;
  while (!e.idle())
    for (const llm::StepOutput& o : e.step())
      if (o.id == id) tokens.insert(tokens.end(), o.tokens.begin(), o.tokens.end());
  EXPECT_EQ(tokens, whole[0].tokens);
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { e.submit(std::move(p)); }, {"already submitted"}));
  // 4 MB: refused on its byte count ("bytes, at least N tokens"), the engine untouched.
  EXPECT_TRUE(throws<llm::ContextLengthError>([&] { (void)e.prepare({.prompt = std::string(4 << 20, 'x'), .chat = false}); },
                                              {"request.prompt is 4194304 bytes, at least ", "tokens: longer than the context",
                                               "max_context = 64"}));
  EXPECT_TRUE(throws<llm::ContextLengthError>(
      [&] { (void)e.prepare({.messages = {{"user", std::string(1 << 20, 'y')}}}); },
      {"request.messages is ", "bytes, at least", "longer than the context"}));
  EXPECT_TRUE(e.idle());
}

TEST(LlmEngineStep, AThreadSubmittingAndCancellingWhileAnotherStepsLosesNothing) {
  llm::Engine e(opts({.max_batch = 4}));
  constexpr int kRequests = 12;
  std::atomic<int> submitted{0};
  std::vector<llm::RequestId> ids(kRequests);
  std::thread producer([&] {
    for (int i = 0; i < kRequests; ++i) {
      ids[static_cast<std::size_t>(i)] = e.submit({.prompt = "hello number " + std::to_string(i), .max_tokens = 4 + i % 5});
      if (i % 4 == 3) e.cancel(ids[static_cast<std::size_t>(i)]);
      submitted.fetch_add(1, std::memory_order_release);
    }
  });
  Collected c;
  while (submitted.load(std::memory_order_acquire) < kRequests || !e.idle()) c.add(e.step());
  producer.join();
  ASSERT_EQ(c.finish.size(), static_cast<std::size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    const llm::RequestId id = ids[static_cast<std::size_t>(i)];
    if (c.finish.at(id) == llm::FinishReason::cancelled) {
      EXPECT_EQ(i % 4, 3) << i;
      continue;
    }
    const llm::Request r{.prompt = "hello number " + std::to_string(i), .max_tokens = 4 + i % 5};
    EXPECT_EQ(c.results.at(id).tokens, alone(r).tokens) << i;
  }
  EXPECT_EQ(e.load().kv_blocks_used, 0);
}

// Two threads preparing (tokenising, no lock) and submitting prepared requests while a third
// steps: every request runs, each with the tokens it gets alone (what npugraph-serve's workers do).
TEST(LlmEngineStep, ThreadsPreparingAndSubmittingWhileAnotherStepsLoseNothing) {
  llm::Engine e(opts({.max_batch = 4}));
  constexpr int kPerThread = 6;
  std::atomic<int> submitted{0};
  std::vector<llm::RequestId> ids(2 * kPerThread);
  auto request = [](int i) {
    return llm::Request{.prompt = "prepared number " + std::to_string(i), .max_tokens = 3 + i % 4, .chat = false};
  };
  auto producer = [&](int first) {
    for (int i = first; i < first + kPerThread; ++i) {
      llm::PreparedRequest p = e.prepare(request(i));
      ids[static_cast<std::size_t>(i)] = e.submit(std::move(p));
      submitted.fetch_add(1, std::memory_order_release);
    }
  };
  std::thread a(producer, 0), b(producer, kPerThread);
  Collected c;
  while (submitted.load(std::memory_order_acquire) < 2 * kPerThread || !e.idle()) c.add(e.step());
  a.join();
  b.join();
  ASSERT_EQ(c.finish.size(), static_cast<std::size_t>(2 * kPerThread));
  for (int i = 0; i < 2 * kPerThread; ++i)
    EXPECT_EQ(c.results.at(ids[static_cast<std::size_t>(i)]).tokens, alone(request(i)).tokens) << i;
  EXPECT_EQ(e.load().kv_blocks_used, 0);
}

}  // namespace
