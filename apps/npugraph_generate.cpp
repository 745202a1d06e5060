// npugraph-generate: text from a GGUF model (llama, qwen2, qwen3, gemma3) on npugraph, eager and/or graph mode.
//
//   npugraph-generate [--model PATH] --prompt TEXT [--max-tokens N] [--batch B] [--mode graph|eager|both]
//                     [--order update-first|replay-first] [--threads T] [--temperature X] [--top-k K]
//                     [--top-p P] [--seed S] [--max-context N] [--raw] [--separate-projections]
//                     [--device cpu|cuda:N] [--activations q8|f32] [--kv-dtype f32|f16|bf16]
//   mpirun -np N npugraph-generate --tp N ...   (built with NPUGRAPH_MPI: tensor-parallel decode)
//
// Streams request 0's text as it is generated (a progress bar for --batch > 1), then prints a
// summary per mode: prefill and decode tokens/s, ms per step, the host time per step split into input
// writes, update and launch, and with --mode both whether graph and eager logits were bitwise equal.
// With --tp N every one of the N MPI processes holds 1/N of the attention heads and MLP columns
// (Note [Tensor-parallel split], docs/dist.md) and computes the same tokens; rank 0 prints, the
// others are quiet, and rank 0 reports whether every rank's tokens were the same.
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_flags.hpp"
#include "kv_dtype_flag.hpp"
#include "model_names.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/model.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#ifdef NPUGRAPH_HAVE_DIST
#include "tensor_parallel_mpi.hpp"
#endif

namespace {

namespace llm = npugraph::llm;

struct Args {
  std::string model, prompt;
  std::int64_t max_tokens = 64, batch = 1, max_context = 0, top_k = 0;
  std::string mode = "both", order = "update-first";
  int threads = 0;
  double temperature = 0.0, top_p = 1.0;
  std::uint64_t seed = 0;
  bool raw = false;
  bool separate = false;  // EngineOptions::fuse_projections off (for comparisons)
  std::optional<std::int64_t> tp;  // --tp N: tensor-parallel over N MPI processes
  npugraph::Device device;         // --device cpu|cuda:N (EngineOptions::device)
  std::optional<npugraph::ops::Activations> activations;  // --activations (EngineOptions::activations)
  npugraph::DType kv_dtype = npugraph::DType::f32;        // --kv-dtype (EngineOptions::kv_dtype)
};

using npugraph::apps::default_model;
using npugraph::apps::integer_flag;
using npugraph::apps::model_named;
using npugraph::apps::number_flag;
using npugraph::apps::UsageError;
using Flag = npugraph::apps::Flag<Args>;

constexpr const char* kAbout =
    "  Answers --prompt op by op (eager), then with each decode step captured once and updated in\n"
    "  place (graph), and compares them. A model whose file has no chat template (Gemma 3 270M, a\n"
    "  base model) takes the prompt as it is, as --raw does.\n";

// --device: cpu or cuda:N (Device::parse also takes npu[:N], an alias of the cpu: not offered here).
npugraph::Device device(const std::string& flag, const std::string& text) {
  const std::string rule = "': must be cpu or cuda:N (N the index of a CUDA device, 0 for the first)";
  if (text != "cpu" && text.rfind("cuda", 0) != 0) throw UsageError(flag + " = '" + text + rule);
  try {
    return npugraph::Device::parse(text);
  } catch (const npugraph::Error&) {
    throw UsageError(flag + " = '" + text + rule);
  }
}

std::vector<Flag> flags() {
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  using npugraph::apps::choice_flag;
  return {
      {"--model", "PATH|smollm2|gemma3", "a GGUF path, or a file tools/fetch_model.py fetches (default smollm2, "
                                         "SmolLM2-135M-Instruct Q4_1: what `make setup` fetches)",
       [](Args& a, const std::string& v) { a.model = model_named(v); }},
      {"--prompt", "TEXT", "what to answer (required)", [](Args& a, const std::string& v) { a.prompt = v; }},
      {"--max-tokens", "N", "tokens to generate (default 64)",
       [](Args& a, const std::string& v) { a.max_tokens = integer_flag("--max-tokens", v, 1, kBig); }},
      {"--batch", "B", "requests of the same prompt decoded together (default 1)",
       [](Args& a, const std::string& v) { a.batch = integer_flag("--batch", v, 1, 64); }},
      {"--mode", "graph|eager|both", "how the decode step runs (default both, compared)",
       [](Args& a, const std::string& v) { a.mode = choice_flag("--mode", v, "graph|eager|both"); }},
      {"--order", "update-first|replay-first", "a step's task update before or after its replay is launched",
       [](Args& a, const std::string& v) { a.order = choice_flag("--order", v, "update-first|replay-first"); }},
      {"--threads", "T", "compute threads (default: the machine's cores)",
       [](Args& a, const std::string& v) { a.threads = static_cast<int>(integer_flag("--threads", v, 0, 4096)); }},
      {"--temperature", "X", "0: greedy (default)", [](Args& a, const std::string& v) { a.temperature = number_flag("--temperature", v); }},
      {"--top-k", "K", "0: no top-k (default)", [](Args& a, const std::string& v) { a.top_k = integer_flag("--top-k", v, 0, kBig); }},
      {"--top-p", "P", "1: no top-p (default)", [](Args& a, const std::string& v) { a.top_p = number_flag("--top-p", v); }},
      {"--seed", "S", "the sampling seed (default 0)",
       [](Args& a, const std::string& v) { a.seed = static_cast<std::uint64_t>(integer_flag("--seed", v, 0, INT64_MAX)); }},
      {"--max-context", "N", "tokens per request (default: the model's context)",
       [](Args& a, const std::string& v) { a.max_context = integer_flag("--max-context", v, 0, kBig); }},
      {"--raw", "", "the prompt as it is, without the chat template", [](Args& a, const std::string&) { a.raw = true; }},
      {"--separate-projections", "", "q/k/v and gate/up as separate products (for comparisons)",
       [](Args& a, const std::string&) { a.separate = true; }},
      {"--tp", "N", "tensor-parallel decode over N MPI processes (mpirun -np N; N must be the number of "
                    "processes and split the model's KV heads and FFN width)",
       [](Args& a, const std::string& v) { a.tp = integer_flag("--tp", v, 1, 4096); }},
      {"--device", "cpu|cuda:N", "where the model runs (default cpu); cuda:N needs the CUDA backend and GPU N",
       [](Args& a, const std::string& v) { a.device = device("--device", v); }},
      {"--activations", "q8|f32", "x of the quantised projections quantised to int8 as llama.cpp does (q8, the "
                                  "cpu's default) or kept float32 (f32, the only choice on cuda)",
       [](Args& a, const std::string& v) {
         a.activations = choice_flag("--activations", v, "q8|f32") == "q8" ? npugraph::ops::Activations::q8
                                                                           : npugraph::ops::Activations::f32;
       }},
      {"--kv-dtype", "f32|f16|bf16", "the KV cache's elements: f32 (default, exact), f16 or bf16 (half the bytes "
                                     "attention reads, as llama.cpp's default f16 cache; cpu only)",
       [](Args& a, const std::string& v) {
         const auto dt = npugraph::apps::kv_dtype_named(v);
         if (!dt) throw UsageError("--kv-dtype = '" + v + "': must be " + npugraph::apps::kKvDtypeNames);
         a.kv_dtype = *dt;
       }},
  };
}

[[noreturn]] void usage(const std::string& error) { npugraph::apps::usage("npugraph-generate", kAbout, flags(), error); }

Args parse(int argc, char** argv) {
  Args a;
  a.model = default_model();
  npugraph::apps::parse_flags(argc, argv, "npugraph-generate", kAbout, flags(), a);
  if (a.prompt.empty()) usage("--prompt is required (and must not be empty)");
  return a;
}

struct Run {
  std::string name;
  llm::RunStats stats;
  std::vector<llm::Result> results;
};

Run run(const Args& a, llm::StepMode mode, bool show, const std::shared_ptr<llm::TensorParallel>& tp) {
  llm::Engine engine({.model = a.model, .threads = a.threads, .max_batch = std::min<std::int64_t>(a.batch, 16),
                      .max_context = a.max_context, .mode = mode,
                      .order = a.order == "update-first" ? llm::GraphOrder::update_then_replay
                                                         : llm::GraphOrder::replay_then_update,
                      .temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p, .keep_logits = true,
                      .fuse_projections = !a.separate, .tensor_parallel = tp, .device = a.device,
                      .activations = a.activations, .kv_dtype = a.kv_dtype});
  bool chat = !a.raw;
  if (chat) {
    try {
      (void)engine.model().tokenizer().chat_template();
    } catch (const npugraph::ArgumentError& e) {  // no template, or one npugraph does not render
      chat = false;
      if (show) std::cerr << "npugraph-generate: " << e.what() << ": the prompt is used as it is (--raw)\n";
    }
  }
  std::vector<llm::Request> requests;
  for (std::int64_t i = 0; i < a.batch; ++i)
    requests.push_back({.prompt = a.prompt, .max_tokens = a.max_tokens, .chat = chat,
                        .seed = a.seed + static_cast<std::uint64_t>(i)});
  std::int64_t done = 0;
  const std::int64_t total = a.batch * a.max_tokens;
  auto on_text = [&](std::size_t i, std::string_view text) {
    if (!show) return;
    if (a.batch == 1) {
      std::cout << text << std::flush;
    } else if (i == 0 || ++done % 8 == 0) {
      const int width = 40, filled = static_cast<int>(width * std::min<std::int64_t>(done, total) / total);
      std::fprintf(stderr, "\r[%s%s] %lld/%lld tokens", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), static_cast<long long>(done),
                   static_cast<long long>(total));
    }
  };
  Run r{mode == llm::StepMode::graph ? "graph" : "eager", {}, engine.generate(requests, on_text)};
  r.stats = engine.stats();
  if (show && a.batch > 1) {
    std::fprintf(stderr, "\n");
    for (std::size_t i = 0; i < r.results.size(); ++i) std::cout << "[" << i << "] " << r.results[i].text << "\n";
  }
  if (show) std::cout << "\n";
  return r;
}

void summary(const std::vector<Run>& runs) {
  std::printf("\n%-6s %12s %12s %10s %10s %10s %10s %10s\n", "mode", "prefill t/s", "decode t/s", "ms/step",
              "inputs us", "update us", "launch us", "host %");
  for (const Run& r : runs) {
    const auto& s = r.stats;
    const double steps = s.decode_steps ? static_cast<double>(s.decode_steps) : 1.0;
    const double host = s.host.inputs + s.host.update + s.host.launch;
    std::printf("%-6s %12.1f %12.1f %10.2f %10.1f %10.1f %10.1f %9.2f%%\n", r.name.c_str(),
                s.prefill_seconds > 0 ? s.prefill_tokens / s.prefill_seconds : 0.0,
                s.decode_seconds > 0 ? s.decode_tokens / s.decode_seconds : 0.0, 1e3 * s.decode_seconds / steps,
                1e6 * s.host.inputs / steps, 1e6 * s.host.update / steps, 1e6 * s.host.launch / steps,
                s.decode_seconds > 0 ? 100.0 * host / s.decode_seconds : 0.0);
  }
  if (runs.size() == 2) {
    std::size_t steps = 0, equal = 0, first_diff = 0;
    bool tokens_equal = true;
    for (std::size_t i = 0; i < runs[0].results.size(); ++i) {
      const auto &e = runs[0].results[i], &g = runs[1].results[i];
      tokens_equal = tokens_equal && e.tokens == g.tokens;
      for (std::size_t k = 0; k < std::min(e.logits_hashes.size(), g.logits_hashes.size()); ++k) {
        ++steps;
        if (e.logits_hashes[k] == g.logits_hashes[k]) ++equal;
        else if (!first_diff) first_diff = k + 1;
      }
    }
    std::printf("graph vs eager: %s logits at %zu of %zu steps%s; tokens %s\n",
                equal == steps ? "bitwise-identical" : "DIFFERENT", equal, steps,
                first_diff ? (" (first difference at token " + std::to_string(first_diff) + ")").c_str() : "",
                tokens_equal ? "identical" : "DIFFERENT");
  }
}

// A 64-bit hash of every run's tokens, to compare across ranks.
std::uint64_t token_hash(const std::vector<Run>& runs) {
  std::uint64_t h = 1469598103934665603ull;
  for (const Run& r : runs)
    for (const llm::Result& res : r.results)
      for (std::int32_t t : res.tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 1099511628211ull;
  return h;
}

#ifdef NPUGRAPH_HAVE_DIST
namespace dist = npugraph::dist;

// --tp N: MPI up, the group checked (N must be the process count), rank 0 printing, and at the end
// whether every rank computed the same tokens.
int main_tensor_parallel(int argc, char** argv, const Args& a) {
  dist::init(&argc, &argv);
  std::shared_ptr<npugraph::apps::MpiTensorParallel> tp;
  int rank = 0, rc = 0;
  try {
    tp = std::make_shared<npugraph::apps::MpiTensorParallel>(dist::Communicator::world());
    rank = tp->rank();
    if (const std::string bad = npugraph::apps::check_tp_size(*a.tp, tp->size()); !bad.empty()) {
      if (rank == 0) std::fprintf(stderr, "npugraph-generate: %s\n", bad.c_str());
      tp.reset();
      dist::finalize();
      return 2;
    }
    std::vector<Run> runs;
    if (a.mode != "graph") runs.push_back(run(a, llm::StepMode::eager, rank == 0, tp));
    if (a.mode != "eager") runs.push_back(run(a, llm::StepMode::graph, rank == 0 && a.mode == "graph", tp));
    // Every rank must have sampled the same tokens (replicated logits): the hashes' min and max agree.
    const std::uint64_t mine = token_hash(runs);
    std::uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, tp->comm().mpi_comm());
    MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, tp->comm().mpi_comm());
    if (rank == 0) {
      summary(runs);
      std::printf("tensor parallel: %d ranks, tokens %s on every rank\n", tp->size(),
                  lo == hi ? "identical" : "DIFFERENT");
    }
    if (lo != hi) rc = 1;
  } catch (const npugraph::Error& e) {
    std::fprintf(stderr, "npugraph-generate (rank %d): %s\n", rank, e.what());
    // A rank whose collective timed out leaves MPI unable to finalize (docs/dist.md, "Deadline").
    if (tp && tp->comm().broken()) std::_Exit(1);
    rc = 1;
  }
  tp.reset();
  dist::finalize();
  return rc;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.tp) {
#ifdef NPUGRAPH_HAVE_DIST
    return main_tensor_parallel(argc, argv, a);
#else
    if (*a.tp != 1)
      usage("--tp " + std::to_string(*a.tp) + ": this npugraph-generate was built without MPI (configure with "
            "-DNPUGRAPH_MPI=ON and Open MPI installed)");
#endif
  }
  try {
    std::vector<Run> runs;
    if (a.mode != "graph") runs.push_back(run(a, llm::StepMode::eager, true, nullptr));
    if (a.mode != "eager") runs.push_back(run(a, llm::StepMode::graph, a.mode == "graph", nullptr));
    summary(runs);
  } catch (const npugraph::Error& e) {
    std::fprintf(stderr, "npugraph-generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
