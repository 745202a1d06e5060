#include "npugraph/llm/engine.hpp"

#include <chrono>
#include <cstring>
#include <algorithm>
#include <deque>

#include "llm/scheduler.hpp"
#include "llm/runner.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "npugraph/stream.hpp"

namespace npugraph::llm {
namespace {

void check_options(const EngineOptions& o) {
  NG_CHECK_ARG(o.max_batch >= 1 && o.max_batch <= 16, "max_batch = ", o.max_batch, ": must be in [1, 16]");
  NG_CHECK_ARG(o.block_size >= 128 && o.block_size <= 512 && o.block_size % 128 == 0, "block_size = ",
               o.block_size, ": must be 128, 256, 384 or 512 (FIA's paged prefill)");
  NG_CHECK_ARG(o.max_context == 0 || o.max_context >= 2, "max_context = ", o.max_context,
               ": must be at least 2 tokens (0: the model's context, at most 2048)");
  NG_CHECK_ARG(o.prefill_chunk >= 1 && o.prefill_chunk <= 2048, "prefill_chunk = ", o.prefill_chunk,
               ": must be in [1, 2048]");
  NG_CHECK_ARG(o.threads >= 0, "threads = ", o.threads, ": must be >= 0 (0: every core)");
  NG_CHECK_ARG(o.temperature >= 0 && o.temperature == o.temperature, "temperature = ", o.temperature,
               ": must be >= 0 (0: greedy)");
  NG_CHECK_ARG(o.top_p > 0 && o.top_p <= 1, "top_p = ", o.top_p, ": must be in (0, 1]");
  NG_CHECK_ARG(o.top_k >= 0, "top_k = ", o.top_k, ": must be >= 0 (0: no top-k)");
  NG_CHECK_ARG(!o.activations || *o.activations == ops::Activations::f32 ||
                   *o.activations == ops::Activations::q8,
               "activations = ", static_cast<int>(*o.activations), ": must be Activations::f32 or Activations::q8");
  NG_CHECK_ARG(o.kv_dtype == DType::f32 || o.kv_dtype == DType::f16 || o.kv_dtype == DType::bf16,
               "kv_dtype = ", dtype_name(o.kv_dtype), ": must be float32, float16 or bfloat16");
  if (!o.device.is_cpu()) {
    NG_CHECK_AS(UnsupportedError, o.kv_dtype == DType::f32, "device = ", o.device.str(), ": kv_dtype = ",
                dtype_name(o.kv_dtype), " runs on the cpu only (the cuda attention reads a cache of the "
                "query's dtype, float32)");
    NG_CHECK_AS(UnsupportedError, o.activations != ops::Activations::q8, "device = ", o.device.str(),
                ": activations = q8 runs on the cpu only (leave activations unset, or Activations::f32)");
    NG_CHECK_AS(UnsupportedError, !o.tensor_parallel || o.tensor_parallel->size() == 1, "device = ",
                o.device.str(), ": tensor parallelism (", o.tensor_parallel->size(),
                " ranks) runs on the cpu only (its collectives are MPI on host memory)");
    (void)Stream::default_stream(o.device);  // no such device: UnsupportedError naming it and why
  }
}

}  // namespace

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  check_options(options_);
  TensorSplit split;
  if (const auto& tp = options_.tensor_parallel) split = {.rank = tp->rank(), .size = tp->size()};
  model_ = Model::load(options_.model, split);
  const ModelConfig& mc = model_->config();
  if (options_.max_context == 0) options_.max_context = std::min<std::int64_t>(mc.context, 2048);
  NG_CHECK_ARG(options_.max_context <= model_->config().context, "max_context = ", options_.max_context,
               ": the model was trained for ", model_->config().context, " tokens");
  runner_ = std::make_unique<ModelRunner>(model_, options_);
  sched_ = std::make_unique<Scheduler>(runner_->max_batch(), options_.prefill_chunk);
}


const Model& Engine::model() const { return *model_; }
std::int64_t Engine::vocab() const { return model_->config().vocab; }

std::vector<Result> Engine::generate(std::span<const Request> requests,
                                     const std::function<void(std::size_t, std::string_view)>& on_text) {
  NG_CHECK_ARG(idle(), "generate: the engine is serving ", load().running + load().waiting,
               " submitted requests: step() them to the end (or cancel them) before generate(), which "
               "drives step() itself");
  std::vector<RequestId> ids;
  {  // every request checked before any runs
    std::vector<std::unique_ptr<RequestState>> prepared;
    for (std::size_t i = 0; i < requests.size(); ++i)
      prepared.push_back(make_state(requests[i], npugraph::detail::cat("requests[", i, "]")));
    for (auto& p : prepared) ids.push_back(enqueue(std::move(p)));
  }
  stats_ = {};
  std::vector<Result> results(requests.size());
  std::map<RequestId, std::size_t> index;
  for (std::size_t i = 0; i < ids.size(); ++i) index[ids[i]] = i;
  std::size_t left = ids.size();
  try {
    while (left > 0) {
      for (StepOutput& out : step()) {
        const std::size_t i = index.at(out.id);
        if (on_text && !out.text.empty()) on_text(i, out.text);
        if (out.result) {
          results[i] = std::move(*out.result);
          left -= 1;
        }
      }
    }
  } catch (...) {  // a failed step (or on_text) ends the call: its requests are cancelled, the engine left idle
    for (RequestId id : ids) cancel(id);
    try {
      while (!idle()) (void)step();
    } catch (...) {  // keep the first error
    }
    throw;
  }
  return results;
}

}  // namespace npugraph::llm
