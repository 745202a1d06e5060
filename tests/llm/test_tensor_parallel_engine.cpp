// The tensor-parallel engine without MPI: the ranks are threads of this process, each with its own
// Engine, and TensorParallel::all_reduce is a kernel that meets the other ranks' at a barrier and sums
// in rank order (what dist::all_reduce gives for 2 ranks, a + b). On the tiny model: graph (both
// orders) and eager logits bitwise equal under tensor parallelism (2 ranks: KV heads 1 + 1), every
// rank's logits the same, and the tokens and logits those of one process (logits to float32
// rounding). The MPI version
// on the real model is tests/dist/tp/.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/stream.hpp"

namespace {

namespace llm = npugraph::llm;
namespace ng = npugraph;

// The ranks' meeting point: a generation-counted barrier and each rank's buffer.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), buffers_(static_cast<std::size_t>(size)) {}
  int size() const { return size_; }
  // x = sum over the ranks (rank order), once every rank has called it with its own x of n floats.
  void all_reduce(int rank, float* x, std::int64_t n) {
    buffers_[static_cast<std::size_t>(rank)] = x;
    arrive_and_wait();
    std::vector<float> sum(x, x + n);
    for (std::int64_t i = 0; i < n; ++i) {
      float s = buffers_[0][i];
      for (int r = 1; r < size_; ++r) s += buffers_[static_cast<std::size_t>(r)][i];
      sum[static_cast<std::size_t>(i)] = s;
    }
    arrive_and_wait();  // every rank has read every buffer
    std::memcpy(x, sum.data(), static_cast<std::size_t>(n) * sizeof(float));
  }

 private:
  void arrive_and_wait() {
    std::unique_lock lock(mu_);
    const std::uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    // A rank that failed never arrives: fail this task rather than hang the test.
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return generation_ != gen; }))
      throw std::runtime_error("thread all_reduce: a rank did not arrive within 30 s");
  }
  int size_;
  std::vector<float*> buffers_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
};

struct ReduceParams {
  ThreadGroup* group;
  float* x;
  std::int64_t n;
  int rank;
};

void reduce_cpu(const void* params, std::size_t, const ng::ExecContext&) {
  const auto& p = *static_cast<const ReduceParams*>(params);
  p.group->all_reduce(p.rank, p.x, p.n);
}

const ng::KernelDef kThreadAllReduce{.name = "thread_all_reduce", .cpu = &reduce_cpu};

class ThreadTensorParallel final : public llm::TensorParallel {
 public:
  ThreadTensorParallel(std::shared_ptr<ThreadGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  void all_reduce(const ng::Tensor& x) override {
    const ReduceParams p{group_.get(), static_cast<float*>(x.data()), x.numel(), rank_};
    const ng::Tensor* uses[] = {&x};
    ng::launch(ng::current_stream(x.device()), kThreadAllReduce, p, uses);
  }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

const std::vector<llm::Request>& requests() {
  static const std::vector<llm::Request> r{{.prompt = "the tall cat sat on", .max_tokens = 20},
                                           {.prompt = "hello", .max_tokens = 12}};
  return r;
}

std::vector<llm::Result> generate(const std::filesystem::path& model, llm::StepMode mode,
                                  std::shared_ptr<llm::TensorParallel> tp,
                                  llm::GraphOrder order = llm::GraphOrder::update_then_replay,
                                  std::optional<ng::ops::Activations> activations = std::nullopt) {
  llm::Engine engine({.model = model, .threads = 1, .max_batch = 2, .mode = mode, .order = order,
                      .keep_full_logits = true, .tensor_parallel = std::move(tp), .activations = activations});
  return engine.generate(requests());
}

// Runs every rank of a group of `size` on its own thread.
std::vector<std::vector<llm::Result>> generate_parallel(const std::filesystem::path& model, llm::StepMode mode,
                                                        int size,
                                                        llm::GraphOrder order = llm::GraphOrder::update_then_replay,
                                                        std::optional<ng::ops::Activations> activations = std::nullopt) {
  auto group = std::make_shared<ThreadGroup>(size);
  std::vector<std::vector<llm::Result>> out(static_cast<std::size_t>(size));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      try {
        out[static_cast<std::size_t>(r)] =
            generate(model, mode, std::make_shared<ThreadTensorParallel>(group, r), order, activations);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : ranks) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

TEST(LlmTensorParallelEngine, TwoRanksGiveOneProcesssTokensAndGraphEqualsEagerBitwise) {
  const auto model = ngtest::write_tiny_llama("tiny_llama_tp_engine.gguf");
  const auto single = generate(model, llm::StepMode::graph, nullptr);
  const auto graph = generate_parallel(model, llm::StepMode::graph, 2);
  const auto eager = generate_parallel(model, llm::StepMode::eager, 2);
  // vllm-ascend's order: the replay starts, each layer's FIA waits for its update (the all-reduces
  // of the layers before it already running).
  const auto replay_first = generate_parallel(model, llm::StepMode::graph, 2, llm::GraphOrder::replay_then_update);
  for (std::size_t i = 0; i < requests().size(); ++i) {
    ASSERT_FALSE(single[i].tokens.empty());
    for (int r = 0; r < 2; ++r) {
      const auto rank = static_cast<std::size_t>(r);
      const llm::Result &g = graph[rank][i], &e = eager[rank][i];
      const std::string at = "request " + std::to_string(i) + ", rank " + std::to_string(r);
      EXPECT_EQ(g.tokens, single[i].tokens) << at;
      EXPECT_EQ(e.tokens, g.tokens) << at;
      EXPECT_EQ(e.logits, g.logits) << at << ": graph and eager logits differ";
      EXPECT_EQ(replay_first[rank][i].logits, g.logits) << at << ": the graph orders' logits differ";
      EXPECT_EQ(g.logits, graph[0][i].logits) << at << ": the ranks' logits differ";
      ASSERT_EQ(g.logits.size(), single[i].logits.size()) << at;
      for (std::size_t k = 0; k < g.logits.size(); ++k)
        ASSERT_NEAR(g.logits[k], single[i].logits[k], 1e-4f * (1.0f + std::fabs(single[i].logits[k])))
            << at << ", logit " << k;
    }
  }
}

// The other architectures' features under the split (Note [Tensor-parallel split]): qwen2's q/k/v
// biases sliced with their rows, qwen3's and gemma3's per-head q/k norms (whole on every rank),
// gemma3's post-sublayer norms after the reduction and its sliding-window layers (W = 8 < the
// context, so the windowed path runs): with float activations two ranks give one process's tokens
// and logits (to float32 rounding: the ranks' partial sums add in another order); with the default
// q8 activations graph == eager and the ranks agree, bitwise (against one process q8 is no
// comparison: a value rounding the other way in x's quantisation moves the logits by far more).
TEST(LlmTensorParallelEngine, QwenAndGemmaLayersSplitAcrossTwoRanks) {
  struct Case {
    const char* file;
    ngtest::TinyLlama options;
  };
  const Case cases[] = {{"tiny_qwen2_tp.gguf", {.architecture = "qwen2", .qkv_bias = true}},
                        {"tiny_qwen3_tp.gguf", {.architecture = "qwen3"}},
                        {"tiny_gemma3_tp.gguf", {.layers = 6, .architecture = "gemma3", .sliding_window = 8}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const auto model = ngtest::write_tiny_llama(c.file, c.options);
    constexpr auto f32 = ng::ops::Activations::f32;
    const auto single = generate(model, llm::StepMode::graph, nullptr, llm::GraphOrder::update_then_replay, f32);
    const auto graph = generate_parallel(model, llm::StepMode::graph, 2, llm::GraphOrder::update_then_replay, f32);
    const auto graph_q8 = generate_parallel(model, llm::StepMode::graph, 2);
    const auto eager_q8 = generate_parallel(model, llm::StepMode::eager, 2);
    for (std::size_t i = 0; i < requests().size(); ++i)
      for (std::size_t r = 0; r < 2; ++r) {
        ASSERT_FALSE(single[i].tokens.empty());
        EXPECT_EQ(graph[r][i].tokens, single[i].tokens) << "request " << i << " rank " << r;
        EXPECT_EQ(eager_q8[r][i].logits, graph_q8[r][i].logits) << "request " << i << " rank " << r;
        EXPECT_EQ(graph_q8[r][i].logits, graph_q8[0][i].logits) << "request " << i << " rank " << r;
        ASSERT_EQ(graph[r][i].logits.size(), single[i].logits.size());
        for (std::size_t k = 0; k < single[i].logits.size(); ++k)
          ASSERT_NEAR(graph[r][i].logits[k], single[i].logits[k], 1e-4f * (1.0f + std::fabs(single[i].logits[k])))
              << "request " << i << " rank " << r << " logit " << k;
      }
  }
}

TEST(LlmTensorParallelEngine, AHookThatDoesNotFitTheModelIsANamedError) {
  const auto model = ngtest::write_tiny_llama("tiny_llama_tp_engine.gguf");
  auto group = std::make_shared<ThreadGroup>(3);  // 3 ranks, 2 KV heads
  try {
    llm::Engine engine({.model = model, .tensor_parallel = std::make_shared<ThreadTensorParallel>(group, 0)});
    ADD_FAILURE() << "3 ranks over 2 KV heads were accepted";
  } catch (const ng::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor parallel size = 3: must be at most the 2 KV heads"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
