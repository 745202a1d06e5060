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

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "%s%snpugraph-generate [--model PATH] --prompt TEXT [--max-tokens N] [--batch B]\n"
               "                  [--mode graph|eager|both] [--order update-first|replay-first]\n"
               "                  [--threads T] [--temperature X] [--top-k K] [--top-p P] [--seed S]\n"
               "                  [--max-context N] [--raw] [--separate-projections] [--tp N]\n"
               "                  [--device cpu|cuda:N] [--activations q8|f32] [--kv-dtype f32|f16|bf16]\n"
               "  --device: where the model runs (default cpu); cuda:N needs the CUDA backend and GPU N\n"
               "  --activations: x of the quantised projections quantised to int8 as llama.cpp does (q8,\n"
               "          the cpu's default) or kept float32 (f32, the only choice on cuda)\n"
               "  --kv-dtype: the KV cache's elements: f32 (default, exact), f16 or bf16 (half the bytes\n"
               "          attention reads, as llama.cpp's default f16 cache; cpu only)\n"
               "  --tp N: tensor-parallel decode over N MPI processes (mpirun -np N; N must be the\n"
               "          number of processes and split the model's KV heads and FFN width)\n"
               "  --model: a GGUF path, or smollm2 / gemma3 for the files tools/fetch_model.py fetches\n"
               "          (smollm2, SmolLM2-135M-Instruct Q4_1, is the default and what `make setup` fetches)\n"
               "  A model whose file has no chat template (Gemma 3 270M, a base model) takes the prompt\n"
               "  as it is, as --raw does.\n",
               error.c_str(), error.empty() ? "" : "\n\n");
  std::exit(2);
}

using npugraph::apps::default_model;
using npugraph::apps::model_named;

template <class T>
T number(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    T v;
    if constexpr (std::is_floating_point_v<T>) v = static_cast<T>(std::stod(text, &used));
    else v = static_cast<T>(std::stoll(text, &used));
    if (used != text.size()) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    usage(flag + " " + text + ": not a number");
  }
}

// --device: cpu or cuda:N (Device::parse also takes npu[:N], an alias of the cpu: not offered here).
npugraph::Device device(const std::string& flag, const std::string& text) {
  const std::string rule = ": must be cpu or cuda:N (N the index of a CUDA device, 0 for the first)";
  if (text != "cpu" && text.rfind("cuda", 0) != 0) usage(flag + " " + text + rule);
  try {
    return npugraph::Device::parse(text);
  } catch (const npugraph::Error&) {
    usage(flag + " " + text + rule);
  }
}

Args parse(int argc, char** argv) {
  Args a;
  a.model = default_model();
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") usage("");
    if (f == "--raw") {
      a.raw = true;
      continue;
    }
    if (f == "--separate-projections") {
      a.separate = true;
      continue;
    }
    if (i + 1 >= argc) usage(f + ": needs a value");
    const std::string v = argv[++i];
    if (f == "--model") a.model = model_named(v);
    else if (f == "--prompt") a.prompt = v;
    else if (f == "--max-tokens") a.max_tokens = number<std::int64_t>(f, v);
    else if (f == "--batch") a.batch = number<std::int64_t>(f, v);
    else if (f == "--mode") a.mode = v;
    else if (f == "--order") a.order = v;
    else if (f == "--threads") a.threads = number<int>(f, v);
    else if (f == "--temperature") a.temperature = number<double>(f, v);
    else if (f == "--top-k") a.top_k = number<std::int64_t>(f, v);
    else if (f == "--top-p") a.top_p = number<double>(f, v);
    else if (f == "--seed") a.seed = number<std::uint64_t>(f, v);
    else if (f == "--max-context") a.max_context = number<std::int64_t>(f, v);
    else if (f == "--tp") a.tp = number<std::int64_t>(f, v);
    else if (f == "--device") a.device = device(f, v);
    else if (f == "--activations") {
      if (v != "q8" && v != "f32") usage("--activations " + v + ": q8 or f32");
      a.activations = v == "q8" ? npugraph::ops::Activations::q8 : npugraph::ops::Activations::f32;
    } else if (f == "--kv-dtype") {
      const auto dt = npugraph::apps::kv_dtype_named(v);
      if (!dt) usage("--kv-dtype " + v + ": " + npugraph::apps::kKvDtypeNames);
      a.kv_dtype = *dt;
    }
    else usage("unknown option " + f);
  }
  if (a.prompt.empty()) usage("--prompt is required (and must not be empty)");
  if (a.batch < 1 || a.batch > 64) usage("--batch " + std::to_string(a.batch) + ": must be in [1, 64]");
  if (a.mode != "graph" && a.mode != "eager" && a.mode != "both") usage("--mode " + a.mode + ": graph, eager or both");
  if (a.order != "update-first" && a.order != "replay-first") usage("--order " + a.order + ": update-first or replay-first");
  if (a.tp && *a.tp < 1)
    usage("--tp " + std::to_string(*a.tp) + ": must be >= 1 (the number of MPI processes to split the model over)");
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
