// Log-probabilities (Request::logprobs) and logit adjustments (penalties, logit_bias: Note [Logit
// adjustments]) on the tiny random Llama. Each is checked against an independent computation
// from the raw logits rows the engine keeps (keep_full_logits): a float64 log-softmax and its
// top-k here; the adjusted row recomputed here from the request's settings and the tokens so far,
// whose argmax must be the greedy token. Graph == eager bitwise, alone == in a batch, and every
// bad value is an ArgumentError naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <optional>
#include <set>
#include <vector>

#include "llm/logprobs.hpp"
#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "support/throws.hpp"

namespace {

namespace llm = npugraph::llm;
using ngtest::throws;

const std::filesystem::path& tiny() {
  static const auto path = ngtest::write_tiny_llama("tiny_llama_logprobs.gguf");
  return path;
}

llm::EngineOptions opts(llm::EngineOptions o = {}) {
  o.model = tiny();
  o.keep_full_logits = true;
  return o;
}

// The reference: log-softmax of a float32 row in long double, and the ids by logit descending
// (then id ascending).
struct Reference {
  std::vector<long double> logprob;
  std::vector<std::int32_t> order;
};
Reference reference(const float* row, std::size_t V) {
  Reference r;
  long double max = -INFINITY;
  for (std::size_t j = 0; j < V; ++j) max = std::max<long double>(max, row[j]);
  long double sum = 0;
  for (std::size_t j = 0; j < V; ++j) sum += std::exp(static_cast<long double>(row[j]) - max);
  for (std::size_t j = 0; j < V; ++j) r.logprob.push_back(row[j] - max - std::log(sum));
  r.order.resize(V);
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
  return r;
}

void expect_logprobs_match(const llm::Result& got, std::size_t V, std::int64_t top, const std::string& what) {
  ASSERT_EQ(got.logprobs.size(), got.tokens.size()) << what;
  ASSERT_EQ(got.logits.size(), got.tokens.size() * V) << what;
  for (std::size_t i = 0; i < got.tokens.size(); ++i) {
    const float* row = got.logits.data() + i * V;
    const Reference ref = reference(row, V);
    const llm::TokenLogprob& t = got.logprobs[i];
    EXPECT_EQ(t.token, got.tokens[i]) << what << " token " << i;
    EXPECT_NEAR(static_cast<double>(ref.logprob[t.token]), t.logprob, 1e-4) << what << " token " << i;
    ASSERT_EQ(static_cast<std::int64_t>(t.top.size()), top) << what << " token " << i;
    for (std::size_t k = 0; k < t.top.size(); ++k) {
      const auto [id, lp] = t.top[k];
      EXPECT_NEAR(static_cast<double>(ref.logprob[id]), lp, 1e-4) << what << " token " << i << " top " << k;
      // Order exact except ties: the k-th is the reference's k-th, or ties with it.
      const std::int32_t want = ref.order[k];
      if (id != want) {
        EXPECT_EQ(row[id], row[want]) << what << " token " << i << " top " << k;
      }
    }
  }
}

TEST(LlmEngineLogprobs, AWideRowWithTiesAndANaNMatchesTheFloat64Reference) {
  // SmolLM2's vocabulary size; the three largest logits tie, one is NaN (as -inf), one -inf.
  const std::size_t V = 49152;
  std::mt19937 g(5);
  std::normal_distribution<float> d(0, 4);
  std::vector<float> row(V);
  for (float& x : row) x = d(g);
  const float top = *std::max_element(row.begin(), row.end()) + 1;
  row[40000] = row[7] = row[123] = top;
  row[9] = NAN;
  row[10] = -INFINITY;
  std::vector<float> clean = row;
  clean[9] = -INFINITY;
  const Reference ref = reference(clean.data(), V);
  for (std::int32_t token : {7, 9, 10, 500}) {
    const llm::TokenLogprob t = llm::token_logprob(row.data(), static_cast<std::int64_t>(V), token, 20);
    if (token == 9 || token == 10) {
      EXPECT_EQ(t.logprob, -INFINITY);
    } else {
      EXPECT_NEAR(static_cast<double>(ref.logprob[static_cast<std::size_t>(token)]), t.logprob, 1e-4);
    }
    ASSERT_EQ(t.top.size(), 20u);
    for (std::size_t k = 0; k < 20; ++k) {
      EXPECT_EQ(t.top[k].first, ref.order[k]) << "top " << k;  // ties: the lower id first, as the reference
      EXPECT_NEAR(static_cast<double>(ref.logprob[static_cast<std::size_t>(ref.order[k])]), t.top[k].second, 1e-4);
    }
    EXPECT_EQ(t.top[0].first, 7);
    EXPECT_EQ(t.top[1].first, 123);
    EXPECT_EQ(t.top[2].first, 40000);
  }
}

TEST(LlmEngineLogprobs, MatchAFloat64LogSoftmaxOfTheRawLogits) {
  const std::size_t V = static_cast<std::size_t>(llm::Engine(opts()).vocab());
  const std::vector<llm::Request> req{
      {.prompt = "hello", .max_tokens = 8, .logprobs = 5},
      {.prompt = "the tall cat sat", .max_tokens = 7, .seed = 4, .temperature = 1.5, .logprobs = 20},
      {.prompt = "ab", .max_tokens = 6, .seed = 2, .temperature = 0.7, .top_k = 10, .logprobs = 0,
       .frequency_penalty = 1.0, .logit_bias = {{5, 3.0}}},  // raw logprobs: before the adjustments
      {.prompt = "no logprobs", .max_tokens = 5}};
  std::vector<llm::Result> graph;
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    llm::Engine e(opts({.max_batch = 4, .mode = mode}));
    const std::vector<llm::Result> out = e.generate(req);
    for (std::size_t i = 0; i + 1 < req.size(); ++i)
      expect_logprobs_match(out[i], V, *req[i].logprobs, "request " + std::to_string(i));
    EXPECT_TRUE(out[3].logprobs.empty());
    if (mode == llm::StepMode::graph) {
      graph = out;
      continue;
    }
    for (std::size_t i = 0; i < req.size(); ++i) {
      EXPECT_EQ(out[i].tokens, graph[i].tokens) << "request " << i;
      ASSERT_EQ(out[i].logprobs.size(), graph[i].logprobs.size());
      for (std::size_t k = 0; k < out[i].logprobs.size(); ++k) {
        EXPECT_EQ(out[i].logprobs[k].logprob, graph[i].logprobs[k].logprob);
        EXPECT_EQ(out[i].logprobs[k].top, graph[i].logprobs[k].top);
      }
    }
  }
}

TEST(LlmEngineLogprobs, PromptLogprobsAreThoseOfEachPrefixsNextToken) {
  // One token per character (none of the tiny vocabulary's merges: ab, bc, aa, he, ll, ...):
  // prompt token p's logprob is the float64 log-softmax, at token p, of the logits a request
  // whose prompt is the first p characters samples its first token from. Prefilled in chunks of 8 (3 chunks), graph
  // and eager; the generated tokens are those without prompt logprobs.
  const std::string text = "adfgijkmnopqrstuvwxyzc";
  const std::size_t V = static_cast<std::size_t>(llm::Engine(opts()).vocab());
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    llm::Engine e(opts({.max_batch = 2, .prefill_chunk = 8, .mode = mode}));
    const llm::Request with{.prompt = text, .max_tokens = 4, .chat = false, .prompt_logprobs = 4};
    llm::Request without = with;
    without.prompt_logprobs.reset();
    const auto out = e.generate(std::vector<llm::Request>{with, without});
    const llm::Result& got = out[0];
    ASSERT_EQ(got.prompt_tokens.size(), text.size());
    EXPECT_EQ(got.tokens, out[1].tokens);
    EXPECT_EQ(got.logits, out[1].logits);
    EXPECT_TRUE(out[1].prompt_logprobs.empty());
    ASSERT_EQ(got.prompt_logprobs.size(), text.size());
    EXPECT_EQ(got.prompt_logprobs[0].token, got.prompt_tokens[0]);
    EXPECT_TRUE(std::isnan(got.prompt_logprobs[0].logprob));
    EXPECT_TRUE(got.prompt_logprobs[0].top.empty());
    for (std::size_t p = 1; p < text.size(); ++p) {
      llm::Engine prefix(opts({.max_batch = 1, .prefill_chunk = 8, .mode = mode}));
      const llm::Result r = prefix.generate(std::vector<llm::Request>{
          {.prompt = text.substr(0, p), .max_tokens = 1, .chat = false}})[0];
      ASSERT_EQ(r.logits.size(), V);
      const Reference ref = reference(r.logits.data(), V);
      const llm::TokenLogprob& t = got.prompt_logprobs[p];
      EXPECT_EQ(t.token, got.prompt_tokens[p]);
      EXPECT_NEAR(static_cast<double>(ref.logprob[static_cast<std::size_t>(t.token)]), t.logprob, 1e-4) << "token " << p;
      ASSERT_EQ(t.top.size(), 4u);
      for (std::size_t k = 0; k < 4; ++k) {
        const std::int32_t want = ref.order[k];
        EXPECT_NEAR(static_cast<double>(ref.logprob[static_cast<std::size_t>(want)]), t.top[k].second, 1e-4)
            << "token " << p << " top " << k;
        if (t.top[k].first != want) {  // only where the reference's logits (nearly) tie
          EXPECT_NEAR(ref.logprob[static_cast<std::size_t>(t.top[k].first)], ref.logprob[static_cast<std::size_t>(want)], 1e-4);
        }
      }
    }
  }
}

TEST(LlmEngineLogprobs, StepOutputsCarryTheirTokensLogprobs) {
  llm::Engine e(opts({.max_batch = 2}));
  const llm::RequestId id = e.submit({.prompt = "hello there", .max_tokens = 9, .logprobs = 3});
  std::vector<llm::TokenLogprob> streamed;
  std::vector<std::int32_t> tokens;
  std::optional<llm::Result> result;
  while (!e.idle())
    for (llm::StepOutput& o : e.step()) {
      ASSERT_EQ(o.id, id);
      EXPECT_EQ(o.logprobs.size(), o.tokens.size());
      streamed.insert(streamed.end(), o.logprobs.begin(), o.logprobs.end());
      tokens.insert(tokens.end(), o.tokens.begin(), o.tokens.end());
      if (o.result) result = std::move(o.result);
    }
  ASSERT_TRUE(result);
  ASSERT_EQ(streamed.size(), result->logprobs.size());
  for (std::size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i].token, tokens[i]);
    EXPECT_EQ(streamed[i].logprob, result->logprobs[i].logprob);
    EXPECT_EQ(streamed[i].top, result->logprobs[i].top);
  }
}

// The row a request samples from: the raw one adjusted as Request's comment says, in float, with
// the counts of the tokens generated before it.
std::vector<float> adjusted(const float* raw, std::size_t V, const llm::Request& r,
                            const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& before) {
  std::vector<float> z(raw, raw + V);
  std::map<std::int32_t, std::int64_t> count;
  for (std::int32_t t : before) count[t] += 1;
  std::set<std::int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(before.begin(), before.end());
  for (std::size_t t = 0; t < V; ++t) {
    const auto id = static_cast<std::int32_t>(t);
    if (r.repetition_penalty != 1 && seen.contains(id)) {
      const auto p = static_cast<float>(r.repetition_penalty);
      z[t] = z[t] > 0 ? z[t] / p : z[t] * p;
    }
    const std::int64_t c = count.contains(id) ? count[id] : 0;
    const double bias = r.logit_bias.contains(id) ? r.logit_bias.at(id) : 0.0;
    const auto add = static_cast<float>(bias - static_cast<double>(c) * r.frequency_penalty -
                                        (c > 0 ? r.presence_penalty : 0.0));
    if (add != 0.0f) z[t] += add;
  }
  return z;
}

std::int32_t argmax(const std::vector<float>& z) {
  return static_cast<std::int32_t>(std::max_element(z.begin(), z.end()) - z.begin());
}

TEST(LlmEngineLogprobs, PenaltiesAndBiasesChangeTheGreedyTokenAsTheFormulaSays) {
  const std::vector<llm::Request> req{
      {.prompt = "hello hello", .max_tokens = 12, .frequency_penalty = 1.5},
      {.prompt = "the tall cat", .max_tokens = 12, .presence_penalty = 2.0},
      {.prompt = "the tall cat sat on a mat", .max_tokens = 12, .repetition_penalty = 1.8},
      {.prompt = "ab", .max_tokens = 10, .presence_penalty = -0.5, .frequency_penalty = 0.8,
       .repetition_penalty = 0.7, .logit_bias = {{7, 4.0}, {9, -100.0}, {11, 1.25}}},
      {.prompt = "once upon", .max_tokens = 6, .logit_bias = {{12, 100.0}}},
  };
  // The test's own reading of the fields, field by field, not the engine's.
  std::vector<llm::Request> plain = req;
  for (llm::Request& r : plain) r = {.prompt = r.prompt, .max_tokens = r.max_tokens};
  std::vector<llm::Result> graph;
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager}) {
    llm::Engine e(opts({.max_batch = 8, .mode = mode}));
    std::vector<llm::Request> both = req;
    both.insert(both.end(), plain.begin(), plain.end());  // unadjusted rows beside adjusted ones
    const std::vector<llm::Result> out = e.generate(both);
    const std::size_t V = static_cast<std::size_t>(e.vocab());
    std::size_t changed = 0;
    for (std::size_t i = 0; i < req.size(); ++i) {
      const llm::Result& got = out[i];
      for (std::size_t k = 0; k < got.tokens.size(); ++k) {
        const std::vector<std::int32_t> before(got.tokens.begin(), got.tokens.begin() + static_cast<std::ptrdiff_t>(k));
        const std::vector<float> z = adjusted(got.logits.data() + k * V, V, req[i], got.prompt_tokens, before);
        EXPECT_EQ(got.tokens[k], argmax(z)) << "request " << i << " token " << k;
      }
      changed += got.tokens != out[req.size() + i].tokens ? 1 : 0;
    }
    EXPECT_GE(changed, 3u) << "the adjustments changed too few requests' tokens to tell anything";
    for (std::int32_t t : out[4].tokens) EXPECT_EQ(t, 12);  // a +100 bias wins every step
    for (std::int32_t t : out[3].tokens) EXPECT_NE(t, 9);   // a -100 one never
    if (mode == llm::StepMode::graph) {
      graph = out;
      continue;
    }
    for (std::size_t i = 0; i < both.size(); ++i) {
      EXPECT_EQ(out[i].tokens, graph[i].tokens) << "request " << i << ": graph != eager";
      EXPECT_EQ(out[i].logits, graph[i].logits) << "request " << i << ": graph != eager";
    }
  }
  // Alone, each gets what it got in the batch.
  for (std::size_t i = 0; i < req.size(); ++i) {
    llm::Engine e(opts({.max_batch = 1}));
    EXPECT_EQ(e.generate(std::vector<llm::Request>{req[i]})[0].tokens, graph[i].tokens) << "request " << i;
  }
}

TEST(LlmEngineLogprobs, SampledRequestsWithPenaltiesAreGraphEqualsEager) {
  std::vector<llm::Request> req;
  for (int i = 0; i < 6; ++i)
    req.push_back({.prompt = "once upon a time", .max_tokens = 10, .seed = static_cast<std::uint64_t>(i),
                   .temperature = 1.2, .top_k = i % 2 ? 0 : 30, .top_p = i % 3 ? 1.0 : 0.9,
                   .presence_penalty = 0.3 * i - 0.6, .frequency_penalty = 0.2 * i,
                   .repetition_penalty = 1.0 + 0.1 * i, .logit_bias = {{3 + i, 2.0 * i}}});
  llm::Engine g(opts({.max_batch = 4, .mode = llm::StepMode::graph}));
  llm::Engine e(opts({.max_batch = 4, .mode = llm::StepMode::eager}));
  const auto a = g.generate(req), b = e.generate(req);
  for (std::size_t i = 0; i < req.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
  EXPECT_LE(g.captured_graphs(), 3);
}

TEST(LlmEngineLogprobs, BadValuesNameTheField) {
  llm::Engine e(opts());
  const std::int64_t V = e.vocab();
  auto submit = [&](llm::Request r) { r.prompt = "hi"; return e.submit(r); };
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.logprobs = 21}); }, {"logprobs = 21", "[0, 20]"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.logprobs = -1}); }, {"logprobs = -1"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.presence_penalty = 2.5}); },
                                              {"presence_penalty = 2.5", "[-2, 2]"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.frequency_penalty = -3}); },
                                              {"frequency_penalty = -3", "[-2, 2]"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.repetition_penalty = 0}); },
                                              {"repetition_penalty = 0", "> 0"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.logit_bias = {{static_cast<std::int32_t>(V), 1.0}}}); },
                                              {"logit_bias[" + std::to_string(V) + "]", "outside the vocabulary"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.logit_bias = {{-1, 1.0}}}); }, {"logit_bias[-1]"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.logit_bias = {{1, 101.0}}}); },
                                              {"logit_bias[1] = 101", "[-100, 100]"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { submit({.logit_bias = {{1, NAN}}}); }, {"logit_bias[1]"}));
  EXPECT_TRUE(e.idle());
}

}  // namespace
