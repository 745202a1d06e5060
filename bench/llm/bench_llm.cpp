// bench_llm: the decode engine (include/npugraph/llm/engine.hpp) on the real model, SmolLM2-135M-
// Instruct Q4_1, against this machine's roofline measured first in the same run. Its peer,
// llama.cpp on the same file and thread count, is bench/llm/llama_cpp_peer.py (same names).
//
//   roofline/dram_read           GBps      streaming read of 1 GiB on every core (best of 5)
//   engine/<graph|eager>/B:<b>   one generate() per iteration: b requests of the same raw ~128-token
//                                prompt (no chat template), 1 token from the prefill + 64 greedy
//                                decode steps; reported time = one decode step. Counters, each from
//                                the iteration with the fastest decode (the machine is shared:
//                                neighbours only ever slow a run down):
//     prefill_tps, decode_tps    prompt tokens / prefill seconds; generated tokens / decode seconds
//                                (only tokens actually generated count)
//     ms_per_step                decode seconds / steps
//     inputs_us, update_us, launch_us, wait_us   host time per step (RunStats::host / steps)
//     host_frac                  (inputs + update + launch) / decode seconds
//     step_s, host_s, update_s   per step in seconds (bench/tables.py's ratios)
//     bytes_per_step             weights read by a step + the KV it reads (mean over the 64 steps),
//                                from the GGUF file: every tensor's bytes (tied output: token_embd is
//                                read whole by the output projection) + b × layers × 2 × kv_dim ×
//                                the cache's element bytes × mean KV length
//     roof_tps, roof_frac        b × dram_read / bytes_per_step, and decode_tps / it
//     probe_GBps, roof_frac_probe   a 1 GiB read probe right before and after the case (mean) and
//                                the same fraction against it (this VM's bandwidth drifts with load)
//     load1                      the 1-minute load average when the case started
//     capture_ms                 (graph) capturing the bucket's decode step, once, in iteration 1
//   engine/interleaved/B:<b>     graph ÷ eager without the drift between two cases: a graph Engine and an
//                                eager Engine (loaded and warmed up first) generate in turn, the order
//                                alternating, $NPUGRAPH_BENCH_ROUNDS rounds (default 9) of the same
//                                requests as above; reported time = the graph's median decode step.
//     graph_tps, eager_tps       median decode tokens/s of each over the rounds
//     ratio, ratio_min, ratio_max   graph ÷ eager per round (the same round's pair): median and range
//     ratio_q1, ratio_q3         its quartiles (the spread the issue asks a conclusion to survive)
//   recapture/decode_step/B:<b>  the peer of the per-step update: a new Engine per iteration (not
//                                timed) whose first step captures + instantiates the decode step of
//                                bucket b (RunStats::capture_seconds; reported time), then 32
//                                steps; update_us = that engine's update per step, ratio = capture /
//                                update (medians over the iterations; capture_s, update_s in seconds).
//
// The model: $NPUGRAPH_MODEL, else the file tools/fetch_model.py fetches; every case fails with a
// message naming it when it is missing. The KV cache is float32, or $NPUGRAPH_BENCH_KV_DTYPE (f16
// or bf16: llama.cpp's default cache is f16; llm_models.hpp). Run one case with
//   ./build/bench_llm --benchmark_filter='roofline|engine/graph/B:1$'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "attention/roofline.hpp"
#include "llm_models.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/model.hpp"

namespace npugraph_bench {
namespace {

namespace llm = npugraph::llm;

// 131 tokens of plain prose (SmolLM2's tokenizer): a continuation that runs on without an end-of-generation token.
constexpr const char* kPrompt =
    "The history of the railway begins in the early nineteenth century, when engineers in the north of "
    "England first tried to move coal from the mines to the rivers with steam engines running on iron "
    "rails. Within a few decades the idea had spread across Europe and America, and new lines were built "
    "between the great cities. Towns grew around the stations, clocks were set to a common time, and "
    "people who had never left their villages could now travel hundreds of miles in a single day. The "
    "first passenger line opened in 1830, and by the end of the century trains carried millions of people "
    "and goods across every continent. In the years that followed,";
constexpr std::int64_t kDecodeTokens = 64;  // decode steps per request (the prefill gives one more)
constexpr std::size_t kProbeBytes = std::size_t{1} << 30;

std::filesystem::path model_path() {
  if (const char* m = std::getenv("NPUGRAPH_MODEL"); m && *m) return m;
  return model_dir() / kSmolLm2File;
}

bool model_or_skip(benchmark::State& state) {
  if (std::filesystem::is_regular_file(model_path())) return true;
  state.SkipWithError(("model not found: " + model_path().string() +
                       " (run /usr/bin/python3 tools/fetch_model.py or set NPUGRAPH_MODEL)").c_str());
  return false;
}

double load1() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// What one decode step reads, from the file (see the top).
struct StepBytes {
  double weights = 0;           // every weight a step reads once, whatever the batch
  double kv_per_token = 0;      // K and V of one cached token, all layers
};

StepBytes step_bytes(const llm::Model& m) {
  const llm::ModelConfig& c = m.config();
  StepBytes s;
  for (const llm::GgufTensorInfo& t : m.file().tensors()) {
    if (t.name == "token_embd.weight" && !c.tied_embeddings) {
      s.weights += static_cast<double>(t.row_bytes());  // the embedding reads one row per token
      continue;
    }
    s.weights += static_cast<double>(t.n_bytes);
  }
  s.kv_per_token = static_cast<double>(c.layers) * 2.0 * static_cast<double>(c.kv_dim()) *
                   static_cast<double>(npugraph::dtype_size(bench_kv_dtype()));
  return s;
}

void BM_dram_read(benchmark::State& state) {
  double best = 0;
  for (auto _ : state) best = best_read_bandwidth();
  note_read_bandwidth(best);
  state.counters["GBps"] = best / 1e9;
  state.counters["threads"] = roofline_threads();
  state.counters["load1"] = load1();
}

std::vector<llm::Request> requests(std::int64_t batch) {
  return std::vector<llm::Request>(static_cast<std::size_t>(batch),
                                   llm::Request{.prompt = kPrompt, .max_tokens = kDecodeTokens + 1, .chat = false});
}

void BM_engine(benchmark::State& state, llm::StepMode mode, std::int64_t batch) {
  if (!model_or_skip(state)) return;
  const double load = load1();
  const Roofline roof = roofline();
  const int threads = roofline_threads();
  llm::Engine engine({.model = model_path(), .threads = threads, .max_batch = batch, .max_context = 512,
                      .mode = mode, .kv_dtype = bench_kv_dtype()});
  const StepBytes sb = step_bytes(engine.model());
  const double probe0 = measure_read_bandwidth(kProbeBytes, threads, 2);
  llm::RunStats best;
  double best_prefill_tps = 0, capture = 0, stopped = 0;
  std::int64_t prompt_tokens = 0;
  bool first = true;
  for (auto _ : state) {
    const std::vector<llm::Result> results = engine.generate(requests(batch));
    const llm::RunStats& s = engine.stats();
    if (first) capture = s.capture_seconds;
    first = false;
    prompt_tokens = static_cast<std::int64_t>(results.front().prompt_tokens.size());
    for (const auto& r : results) stopped += r.stopped ? 1 : 0;
    state.SetIterationTime(s.decode_seconds / static_cast<double>(std::max<std::int64_t>(1, s.decode_steps)));
    best_prefill_tps = std::max(best_prefill_tps, s.prefill_tokens / s.prefill_seconds);
    const auto per_token = [](const llm::RunStats& r) { return r.decode_seconds / static_cast<double>(r.decode_tokens); };
    if (best.decode_tokens == 0 || per_token(s) < per_token(best)) best = s;
  }
  const double probe = (probe0 + measure_read_bandwidth(kProbeBytes, threads, 2)) / 2;
  const double steps = static_cast<double>(best.decode_steps);
  const double host = best.host.inputs + best.host.update + best.host.launch;
  // Step i reads KV lengths prompt + 1 + i (its token's KV included): the mean over the steps.
  const double mean_kv = static_cast<double>(prompt_tokens) + 1 + (steps - 1) / 2;
  const double bytes = sb.weights + static_cast<double>(batch) * sb.kv_per_token * mean_kv;
  const double decode_tps = best.decode_tokens / best.decode_seconds;
  const double tokens_per_step = best.decode_tokens / steps;
  auto& c = state.counters;
  c["prefill_tps"] = best_prefill_tps;
  c["decode_tps"] = decode_tps;
  c["ms_per_step"] = 1e3 * best.decode_seconds / steps;
  c["inputs_us"] = 1e6 * best.host.inputs / steps;
  c["update_us"] = 1e6 * best.host.update / steps;
  c["launch_us"] = 1e6 * best.host.launch / steps;
  c["wait_us"] = 1e6 * best.host.wait / steps;
  c["host_us"] = 1e6 * host / steps;
  c["host_frac"] = host / best.decode_seconds;
  c["step_s"] = best.decode_seconds / steps;  // the same in seconds, for bench/tables.py's ratios
  c["host_s"] = host / steps;
  c["update_s"] = best.host.update / steps;
  c["bytes_per_step"] = bytes;
  c["weight_bytes"] = sb.weights;
  c["roof_tps"] = tokens_per_step * roof.read_bytes_per_s / bytes;
  c["roof_frac"] = decode_tps / c["roof_tps"];
  c["probe_GBps"] = probe / 1e9;
  c["roof_frac_probe"] = decode_tps / (tokens_per_step * probe / bytes);
  c["prompt_tokens"] = static_cast<double>(prompt_tokens);
  c["decode_tokens"] = static_cast<double>(best.decode_tokens);
  c["stopped"] = stopped;
  c["threads"] = threads;
  c["load1"] = load;
  if (mode == llm::StepMode::graph) c["capture_ms"] = 1e3 * capture;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(at);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

int rounds() {
  const char* r = std::getenv("NPUGRAPH_BENCH_ROUNDS");
  const int n = r && *r ? std::atoi(r) : 9;
  return std::max(1, n);
}

void BM_interleaved(benchmark::State& state, std::int64_t batch) {
  if (!model_or_skip(state)) return;
  const double load = load1();
  const int threads = roofline_threads();
  auto make = [&](llm::StepMode mode) {
    return std::make_unique<llm::Engine>(llm::EngineOptions{.model = model_path(), .threads = threads,
                                                            .max_batch = batch, .max_context = 512, .mode = mode,
                                                            .kv_dtype = bench_kv_dtype()});
  };
  const auto graph = make(llm::StepMode::graph), eager = make(llm::StepMode::eager);
  const auto tps = [&](llm::Engine& e) {
    e.generate(requests(batch));
    const llm::RunStats& s = e.stats();
    return s.decode_tokens / s.decode_seconds;
  };
  tps(*graph), tps(*eager);  // warm-up: the capture, the caches, the pages
  std::vector<double> g, e, ratio;
  for (auto _ : state) {
    for (int r = 0; r < rounds(); ++r) {
      double gt, et;
      if (r % 2 == 0) {
        gt = tps(*graph), et = tps(*eager);
      } else {
        et = tps(*eager), gt = tps(*graph);
      }
      g.push_back(gt), e.push_back(et), ratio.push_back(gt / et);
    }
    state.SetIterationTime(static_cast<double>(batch) / median(g));
  }
  auto& c = state.counters;
  c["graph_tps"] = median(g);
  c["eager_tps"] = median(e);
  c["ratio"] = median(ratio);
  c["ratio_q1"] = quantile(ratio, 0.25);
  c["ratio_q3"] = quantile(ratio, 0.75);
  c["ratio_min"] = quantile(ratio, 0);
  c["ratio_max"] = quantile(ratio, 1);
  c["rounds"] = static_cast<double>(ratio.size());
  c["threads"] = threads;
  c["load1"] = load;
}

void BM_recapture(benchmark::State& state, std::int64_t batch) {
  if (!model_or_skip(state)) return;
  const double load = load1();
  std::vector<double> captures, updates;
  for (auto _ : state) {
    state.PauseTiming();
    llm::Engine engine({.model = model_path(), .threads = roofline_threads(), .max_batch = batch,
                        .max_context = 256, .mode = llm::StepMode::graph, .kv_dtype = bench_kv_dtype()});
    std::vector<llm::Request> r(static_cast<std::size_t>(batch),
                                llm::Request{.prompt = "Once upon a time", .max_tokens = 33, .chat = false});
    state.ResumeTiming();
    engine.generate(r);
    const llm::RunStats& s = engine.stats();
    state.SetIterationTime(s.capture_seconds);
    captures.push_back(s.capture_seconds);
    updates.push_back(s.host.update / static_cast<double>(std::max<std::int64_t>(1, s.decode_steps)));
  }
  state.counters["capture_ms"] = 1e3 * median(captures);
  state.counters["update_us"] = 1e6 * median(updates);
  state.counters["capture_s"] = median(captures);
  state.counters["update_s"] = median(updates);
  state.counters["ratio"] = median(captures) / median(updates);
  state.counters["load1"] = load;
}

const bool registered = [] {
  benchmark::RegisterBenchmark("roofline/dram_read", BM_dram_read)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager})
    for (std::int64_t b : {1, 8}) {
      const std::string name = std::string("engine/") + (mode == llm::StepMode::graph ? "graph" : "eager") +
                               "/B:" + std::to_string(b);
      benchmark::RegisterBenchmark(name.c_str(), [mode, b](benchmark::State& s) { BM_engine(s, mode, b); })
          ->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
    }
  for (std::int64_t b : {1, 8})
    benchmark::RegisterBenchmark(("engine/interleaved/B:" + std::to_string(b)).c_str(),
                                 [b](benchmark::State& s) { BM_interleaved(s, b); })
        ->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
  for (std::int64_t b : {1, 8})
    benchmark::RegisterBenchmark(("recapture/decode_step/B:" + std::to_string(b)).c_str(),
                                 [b](benchmark::State& s) { BM_recapture(s, b); })
        ->Iterations(5)->UseManualTime()->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace npugraph_bench
