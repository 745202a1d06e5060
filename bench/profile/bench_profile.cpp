// bench_profile (issue 45, item 1): where a decode step's time goes, from npugraph's own trace
// (npugraph/trace.hpp; Note [Pool events in the trace] in src/runtime/trace.hpp), beside the
// int8 dot-product peak measured in the same run.
//
//   roofline/int8_vnni                 GOPS     register-resident vpdpbusd chains on every core (the
//                                               peak the q8 GEMVs' integer work is measured against)
//   profile/<model>/<graph|eager>/B:<b>   b requests of the same ~130-token raw prompt, prefilled,
//                                      then kSteps decode steps of b rows timed untraced, then kSteps
//                                      traced; reported time = one untraced decode step. Per decode
//                                      step, in microseconds:
//     step_us, step_traced_us          wall time of step() (untraced; traced: what the trace costs)
//     step_cpu_us                      the process's CPU time per untraced step (every thread: the
//                                      caller, the streams' workers, the pool's helpers, spinning
//                                      included), which neighbours on a shared machine lower less
//     host_us, wait_us                 RunStats::host: inputs + update + launch; waiting for results
//     kernels_us                       the kernels' events summed (a kernel's join included)
//     busy_us, idle_us                 the union of kernel events over the streams' lanes; the traced
//                                      step minus it (host work, launches, waits between kernels)
//     join_us                          owners waiting in the compute pool for helpers to finish
//                                      their last chunk (the "join" events)
//     helper_frac                      the pool helpers' time inside jobs / (helpers × traced wall)
//     k:<kernel>_us, j:<kernel>_us     each kernel kind's time, and its joins; `head` is the
//                                      output projection (the last linear before sampling),
//                                      apart from the layers' linears
//     gemv_GOPS, gemv_int8_frac        the layers' linears: 2 × weights × b int8 ops per step (x
//                                      quantised to int8) / their time, and that / int8_vnni
//     gemv_GOPS_nojoin, ..._frac_nojoin   the same over their time minus their joins
//     head_GOPS, head_int8_frac        the output projection likewise
//     rows                             mean decode rows per traced step (b unless a request ended)
//     weight_MB, kv_MB, kv_length      what a step reads: the weights (the embedding table one row),
//                                      and rows × kv_length × layers × 2 × kv_dim elements of KV
//                                      (kv_length: the rows' mean over the traced steps)
//     prefill_tps                      prompt tokens / prefill seconds (RunStats) of this iteration's
//                                      prompts, on the engine warmed up (prefill runs the same ops
//                                      in both modes: eager, in chunks; only decode steps replay)
//
// The KV cache: float32, or $NPUGRAPH_BENCH_KV_DTYPE (f16, bf16; llm_models.hpp).
// Models: $NPUGRAPH_MODEL_DIR (else ~/.cache/npugraph/models): SmolLM2-135M-Instruct Q4_1 and
// Gemma 3 270M Q4_K_M, as tools/fetch_model.py fetches them; a missing file is a skipped case
// naming it. One case:
//   ./build/bench_profile --benchmark_filter='roofline|profile/smollm2/graph/B:8'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <time.h>

#include "attention/roofline.hpp"
#include "llm_models.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/model.hpp"
#include "npugraph/trace.hpp"

namespace npugraph_bench {
namespace {

namespace llm = npugraph::llm;
using Json = nlohmann::json;

constexpr std::int64_t kSteps = 48;  // decode steps timed untraced, then as many traced

// The prompt of bench_llm: plain prose that runs on without an end-of-generation token.
constexpr const char* kPrompt =
    "The history of the railway begins in the early nineteenth century, when engineers in the north of "
    "England first tried to move coal from the mines to the rivers with steam engines running on iron "
    "rails. Within a few decades the idea had spread across Europe and America, and new lines were built "
    "between the great cities. Towns grew around the stations, clocks were set to a common time, and "
    "people who had never left their villages could now travel hundreds of miles in a single day. The "
    "first passenger line opened in 1830, and by the end of the century trains carried millions of people "
    "and goods across every continent. In the years that followed,";

// int8 multiply-adds per token: the layers' weight matrices, and the output projection.
struct LinearWork {
  double layers = 0, head = 0;
  double bytes = 0;  // every weight a step reads (the embedding table: one row per token)
};

LinearWork linear_work(const llm::Model& m) {
  LinearWork w;
  const llm::ModelConfig& c = m.config();
  for (const llm::GgufTensorInfo& t : m.file().tensors()) {
    const bool embedding_only = t.name == "token_embd.weight" && !c.tied_embeddings;
    w.bytes += embedding_only ? static_cast<double>(t.row_bytes()) : static_cast<double>(t.n_bytes);
    if (t.dims.size() != 2) continue;  // norms and biases
    const auto n = static_cast<double>(t.n_elements);
    if (t.name.rfind("blk.", 0) == 0) w.layers += n;
    else if (t.name == "output.weight" || (t.name == "token_embd.weight" && c.tied_embeddings)) w.head += n;
  }
  return w;
}

struct Event {
  std::string name, cat;
  std::uint64_t lane;
  double start, end;  // microseconds
};

// What the trace says, summed over its steps.
struct Profile {
  std::map<std::string, double> kernel_us, join_us;  // by kernel kind ("head": the output projection)
  double kernels = 0, busy = 0, joins = 0, helpers = 0;
  int helper_lanes = 0;
};

bool is_linear(const std::string& name) { return name.find("linear") != std::string::npos; }
bool is_sampling(const std::string& name) { return name == "argmax" || name == "sample"; }

Profile profile_of(const std::string& trace_json) {
  const Json trace = Json::parse(trace_json);
  std::vector<Event> kernels, joins;
  std::map<std::uint64_t, bool> helper_lanes;
  Profile p;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"].get<double>();
    Event ev{e["name"].get<std::string>(), e["cat"].get<std::string>(), e["tid"].get<std::uint64_t>(), ts,
             ts + e["dur"].get<double>()};
    if (ev.cat == "kernel") kernels.push_back(std::move(ev));
    else if (ev.cat == "join") joins.push_back(std::move(ev));
    else if (ev.cat == "helper") p.helpers += ev.end - ev.start, helper_lanes[ev.lane] = true;
  }
  p.helper_lanes = static_cast<int>(helper_lanes.size());
  std::sort(kernels.begin(), kernels.end(), [](const Event& a, const Event& b) { return a.start < b.start; });
  // The output projection: on each lane, the last linear before a sampling kernel.
  std::map<std::uint64_t, std::size_t> last_linear;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (is_linear(kernels[i].name)) last_linear[kernels[i].lane] = i;
    if (is_sampling(kernels[i].name))
      if (auto it = last_linear.find(kernels[i].lane); it != last_linear.end()) {
        kernels[it->second].name = "head";
        last_linear.erase(it);
      }
  }
  double covered_to = -1e300;
  for (const Event& k : kernels) {
    p.kernel_us[k.name] += k.end - k.start;
    p.kernels += k.end - k.start;
    // The union of kernel intervals (sorted by start).
    if (k.end > covered_to) p.busy += k.end - std::max(k.start, covered_to), covered_to = k.end;
  }
  // Each join, to the kernel on its lane that holds it.
  for (const Event& j : joins) {
    p.joins += j.end - j.start;
    const Event* holder = nullptr;
    auto it = std::upper_bound(kernels.begin(), kernels.end(), j.start + 1e-3,
                               [](double t, const Event& k) { return t < k.start; });
    for (int back = 0; it != kernels.begin() && back < 64 && !holder; ++back) {
      --it;
      if (it->lane == j.lane && j.end <= it->end + 1e-3) holder = &*it;
    }
    p.join_us[holder ? holder->name : "(none)"] += j.end - j.start;
  }
  return p;
}

std::filesystem::path model_file(const std::string& model) {
  return model_dir() / (model == "gemma3" ? kGemma3File : kSmolLm2File);
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_profile(benchmark::State& state, const std::string& model, llm::StepMode mode, std::int64_t batch) {
  const std::filesystem::path path = model_file(model);
  if (!std::filesystem::is_regular_file(path)) {
    state.SkipWithError(("model not found: " + path.string() + " (run /usr/bin/python3 tools/fetch_model.py all)").c_str());
    return;
  }
  const int threads = roofline_threads();
  const double int8 = int8_peak();
  llm::Engine engine({.model = path, .threads = threads, .max_batch = batch, .max_context = 512, .mode = mode,
                      .kv_dtype = bench_kv_dtype()});
  const LinearWork work = linear_work(engine.model());
  // Warm-up: the bucket's capture, the caches, the pages.
  engine.generate(std::vector<llm::Request>(static_cast<std::size_t>(batch),
                                            llm::Request{.prompt = kPrompt, .max_tokens = 8, .chat = false}));
  Profile p;
  double untraced = 0, untraced_cpu = 0, traced = 0, rows = 0, prefill_tps = 0, kv_length = 0;
  llm::RunStats stats;
  for (auto _ : state) {
    engine.reset_stats();
    for (std::int64_t i = 0; i < batch; ++i)
      engine.submit({.prompt = kPrompt, .max_tokens = 2 * kSteps + 96, .chat = false});  // outlasts the prefill steps
    std::map<llm::RequestId, std::int64_t> length;  // each request's tokens so far (its KV length)
    auto note = [&](const std::vector<llm::StepOutput>& outs) {
      for (const llm::StepOutput& o : outs)
        if (o.completion_tokens > 0) length[o.id] = o.prompt_tokens + o.completion_tokens;
    };
    while (static_cast<std::int64_t>(length.size()) < batch) note(engine.step());  // every prompt prefilled
    prefill_tps = engine.stats().prefill_tokens / engine.stats().prefill_seconds;
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    for (std::int64_t s = 0; s < kSteps; ++s) note(engine.step());
    untraced = seconds_since(t0) / kSteps;
    untraced_cpu = (process_cpu_seconds() - cpu0) / kSteps;
    kv_length = 0;
    for (const auto& [id, n] : length) kv_length += static_cast<double>(n) / static_cast<double>(length.size());
    kv_length += kSteps / 2.0;  // the traced steps' mean
    engine.reset_stats();
    npugraph::start_trace();
    const auto t1 = std::chrono::steady_clock::now();
    for (std::int64_t s = 0; s < kSteps; ++s) engine.step();
    traced = seconds_since(t1) / kSteps;
    p = profile_of(npugraph::stop_trace());
    stats = engine.stats();
    for (std::int64_t r : stats.batch_per_step) rows += static_cast<double>(r);
    rows /= static_cast<double>(std::max<std::size_t>(1, stats.batch_per_step.size()));
    while (!engine.idle()) engine.step();
    state.SetIterationTime(untraced);
  }
  const double n = kSteps;
  auto& c = state.counters;
  c["step_us"] = 1e6 * untraced;
  c["step_traced_us"] = 1e6 * traced;
  c["step_cpu_us"] = 1e6 * untraced_cpu;
  c["host_us"] = 1e6 * (stats.host.inputs + stats.host.update + stats.host.launch) / n;
  c["wait_us"] = 1e6 * stats.host.wait / n;
  c["kernels_us"] = p.kernels / n;
  c["busy_us"] = p.busy / n;
  c["idle_us"] = 1e6 * traced - p.busy / n;
  c["join_us"] = p.joins / n;
  c["helper_frac"] = p.helper_lanes ? p.helpers / (1e6 * traced * n * p.helper_lanes) : 0;
  for (const auto& [name, us] : p.kernel_us) c["k:" + name + "_us"] = us / n;
  for (const auto& [name, us] : p.join_us) c["j:" + name + "_us"] = us / n;
  // What a step reads: every weight once, and each row's K and V (float32) in every layer.
  const llm::ModelConfig& mc = engine.model().config();
  c["weight_MB"] = work.bytes / 1e6;
  c["kv_MB"] = rows * kv_length * static_cast<double>(mc.layers * 2 * mc.kv_dim()) *
                static_cast<double>(npugraph::dtype_size(bench_kv_dtype())) / 1e6;
  c["kv_length"] = kv_length;
  c["rows"] = rows;
  c["prefill_tps"] = prefill_tps;
  c["threads"] = threads;
  // The GEMVs' int8 work against the peak (x is quantised to int8 on the cpu: Note [Q8 activations]).
  double layer_us = 0, layer_join = 0;
  for (const auto& [name, us] : p.kernel_us)
    if (is_linear(name)) layer_us += us;
  for (const auto& [name, us] : p.join_us)
    if (is_linear(name)) layer_join += us;
  const double layer_ops = 2 * work.layers * rows * n, head_ops = 2 * work.head * rows * n;
  if (layer_us > 0) {
    c["gemv_GOPS"] = layer_ops / layer_us / 1e3;
    c["gemv_GOPS_nojoin"] = layer_ops / (layer_us - layer_join) / 1e3;
    if (int8 > 0) {
      c["gemv_int8_frac"] = c["gemv_GOPS"] * 1e9 / int8;
      c["gemv_int8_frac_nojoin"] = c["gemv_GOPS_nojoin"] * 1e9 / int8;
    }
  }
  if (const auto h = p.kernel_us.find("head"); h != p.kernel_us.end() && h->second > 0) {
    c["head_GOPS"] = head_ops / h->second / 1e3;
    if (int8 > 0) c["head_int8_frac"] = c["head_GOPS"] * 1e9 / int8;
  }
}

const bool registered = [] {
  benchmark::RegisterBenchmark("roofline/int8_vnni", int8_peak_benchmark)->Iterations(1)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (const char* model : {"smollm2", "gemma3"})
    for (llm::StepMode mode : {llm::StepMode::graph, llm::StepMode::eager})
      for (std::int64_t b : {1, 8}) {
        const std::string name = std::string("profile/") + model + "/" +
                                 (mode == llm::StepMode::graph ? "graph" : "eager") + "/B:" + std::to_string(b);
        benchmark::RegisterBenchmark(name.c_str(), [m = std::string(model), mode, b](benchmark::State& s) {
          BM_profile(s, m, mode, b);
        })->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
      }
  return true;
}();

}  // namespace
}  // namespace npugraph_bench
