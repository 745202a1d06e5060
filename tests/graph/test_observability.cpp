// Seeing a graph: the DOT dump's task parameters (current after an update), group labels and
// ExternalEvent names; Graph::groups(); the Chrome-trace timeline; the log switch.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "npugraph/npugraph.hpp"
#include "support/captured_fia.hpp"
#include "support/diagnostics.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

namespace {

namespace ng = npugraph;
using ngtest::throws;

struct SeedLike {
  std::vector<double> qv, kv, vv;
  ng::Tensor q = ngtest::random_tensor(qv, {1, 4, 1, 16}, ng::DType::f16, 1);
  ng::Tensor k = ngtest::random_tensor(kv, {1, 4, 128, 16}, ng::DType::f16, 2);
  ng::Tensor v = ngtest::random_tensor(vv, {1, 4, 128, 16}, ng::DType::f16, 3);
  ng::ops::FiaOptions opts(std::vector<std::int64_t> kv_len) const {
    ng::ops::FiaOptions o;
    o.num_heads = 4;
    o.input_layout = "BNSD";
    o.scale = 0.25;
    o.actual_seq_lengths_kv = std::move(kv_len);
    return o;
  }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Observability, TheDotDumpShowsTensorsCurrentValuesGroupsAndEventNames) {
  SeedLike s;
  ng::ExternalEvent gate("step gate");
  ngtest::CapturedFia c(s.q, s.k, s.v, s.opts({29}), {.gate = &gate, .reset_gate = true});
  const std::string before = c.graph.dot();
  EXPECT_TRUE(contains(before, "query float16[1, 4, 1, 16]")) << before;
  EXPECT_TRUE(contains(before, "key float16[1, 4, 128, 16]")) << before;
  EXPECT_TRUE(contains(before, "input_layout BNSD, num_heads 4, num_key_value_heads 4")) << before;
  EXPECT_TRUE(contains(before, "actual_seq_lengths_kv [29]")) << before;
  EXPECT_TRUE(contains(before, "scale 0.25")) << before;
  EXPECT_TRUE(contains(before, "task group 0 (handle index 0)")) << before;
  EXPECT_TRUE(contains(before, "ExternalEvent 'step gate'")) << before;
  c.update(s.opts({100}));
  const std::string after = c.graph.dot();
  EXPECT_NE(before, after);
  EXPECT_TRUE(contains(after, "actual_seq_lengths_kv [100]")) << after;
  EXPECT_FALSE(contains(after, "actual_seq_lengths_kv [29]")) << after;
  // The update was re-planned from the captured plan, whose block leaves the tensors' dimensions
  // out (Note [FIA parameter block]): the dump takes them from the captured block.
  EXPECT_TRUE(contains(after, "query float16[1, 4, 1, 16]")) << after;
  EXPECT_TRUE(contains(after, "key float16[1, 4, 128, 16]")) << after;
  // A launch-ordered update shows at once (the published table is newer than the installed set).
  {
    ng::StreamGuard on(c.updates);
    ng::UpdateScope u(c.updates, c.handle, ng::UpdateOrder::launch);
    ng::ops::fused_infer_attention_score_out(s.q, s.k, s.v, s.opts({64}), c.ws, c.out, c.lse);
  }
  EXPECT_TRUE(contains(c.graph.dot(), "actual_seq_lengths_kv [64]")) << c.graph.dot();
  gate.record(c.updates);
  c.updates.synchronize();
}

TEST(Observability, GroupsListsTheHandlesTaskGroupEndReturned) {
  SeedLike s;
  ngtest::CapturedFia c(s.q, s.k, s.v, s.opts({29}));
  const std::vector<ng::TaskGroupHandle> groups = c.graph.groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_TRUE(groups[0] == c.handle);
  EXPECT_EQ(groups[0].index(), 0u);
  EXPECT_EQ(groups[0].num_tasks(), c.handle.num_tasks());
  c.graph.reset();
  EXPECT_TRUE(c.graph.groups().empty());
  EXPECT_FALSE(groups[0].valid());
}

TEST(Observability, TheTraceRecordsEagerTasksReplayedTasksUpdatesAndWaits) {
  SeedLike s;
  ng::ExternalEvent gate("trace gate");
  ngtest::CapturedFia c(s.q, s.k, s.v, s.opts({29}), {.gate = &gate, .reset_gate = true});
  EXPECT_TRUE(throws<ng::StateError>([] { (void)ng::stop_trace(); }, {"stop_trace: no trace is being recorded"}));
  ng::start_trace();
  EXPECT_TRUE(ng::tracing());
  EXPECT_TRUE(throws<ng::StateError>([] { ng::start_trace(); }, {"start_trace: a trace is already being recorded"}));
  (void)c.eager(s.opts({29}));
  c.update(s.opts({100}));
  c.replay();
  const std::string json = ng::stop_trace();
  EXPECT_FALSE(ng::tracing());
  for (const char* part : {"\"traceEvents\"", "\"cat\":\"kernel\"", "\"cat\":\"graph\"",
                           "\"name\":\"fused_infer_attention_score\"", "\"task_group\":0",
                           "\"name\":\"replay (host)\"", "\"name\":\"task_update_end (host)\"",
                           "ExternalEvent 'trace gate'", "\"thread_name\""})
    EXPECT_TRUE(contains(json, part)) << part << "\n" << json.substr(0, 4000);
  // Nothing is recorded after the stop.
  c.update(s.opts({29}));
  c.replay();
  ng::start_trace();
  EXPECT_FALSE(contains(ng::stop_trace(), "fused_infer_attention_score"));
}

// Two chunks that each wait (with a deadline) until both have started: the kernel's owner and a
// helper of the compute pool run one each, whatever the machine's load.
std::atomic<int> g_entered{0};
void two_threads(const void*, std::size_t, const ng::ExecContext& ctx) {
  ctx.parallel_for(2, 1, [](std::int64_t, std::int64_t) {
    g_entered.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (g_entered.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
}
const ng::KernelDef kTwoThreads{.name = "two_threads", .cpu = &two_threads};

// Note [Pool events in the trace]: a parallel kernel's join nests in the kernel's event on its
// stream's lane; the helper's chunk is a "help" event on the helper's lane.
TEST(Observability, TheTraceShowsAParallelKernelsJoinAndItsHelper) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: the compute pool has no helper";
  const ng::Stream s = ng::Stream::create(ng::Device::cpu(), {.num_threads = 2});
  g_entered = 0;
  ng::start_trace();
  ng::launch(s, kTwoThreads, {});
  s.synchronize();
  const nlohmann::json trace = nlohmann::json::parse(ng::stop_trace());
  ASSERT_EQ(g_entered.load(), 2);
  const nlohmann::json* kernel = nullptr;
  std::vector<const nlohmann::json*> joins, helps;
  std::set<std::string> lane_names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") lane_names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    if (e["name"] == "two_threads") kernel = &e;
    if (e["cat"] == "join") joins.push_back(&e);
    if (e["cat"] == "helper") helps.push_back(&e);
  }
  ASSERT_NE(kernel, nullptr) << trace.dump();
  ASSERT_EQ(joins.size(), 1u) << trace.dump();
  const auto& join = *joins.front();
  EXPECT_EQ(join["name"], "join");
  EXPECT_EQ(join["tid"], (*kernel)["tid"]);  // the kernel's lane
  const double k0 = (*kernel)["ts"], k1 = k0 + (*kernel)["dur"].get<double>();
  const double j0 = join["ts"], j1 = j0 + join["dur"].get<double>();
  EXPECT_LE(k0, j0 + 1e-3);  // nested (the JSON keeps nanoseconds to 3 decimals of a microsecond)
  EXPECT_LE(j1, k1 + 1e-3);
  ASSERT_GE(helps.size(), 1u) << trace.dump();
  EXPECT_EQ((*helps.front())["name"], "help");
  EXPECT_NE((*helps.front())["tid"], (*kernel)["tid"]);
  EXPECT_TRUE(lane_names.count("cpu compute helper 0")) << trace.dump();
}

TEST(Observability, TheLogSwitchReportsCapturesAndUpdates) {
  SeedLike s;
  ngtest::DiagnosticLog log;
  ng::set_log_level(ng::LogLevel::info);
  {
    ngtest::CapturedFia c(s.q, s.k, s.v, s.opts({29}));
    c.update(s.opts({100}));
  }
  ng::set_log_level(ng::LogLevel::off);
  std::string all;
  for (const auto& line : log.lines()) all += line + "\n";
  EXPECT_TRUE(contains(all, "npugraph[info]: graph ")) << all;
  EXPECT_TRUE(contains(all, ": capture began on cpu stream")) << all;
  EXPECT_TRUE(contains(all, "task group(s), instantiated")) << all;
  EXPECT_TRUE(contains(all, "1 task group(s) of graph ")) << all;
  EXPECT_TRUE(contains(all, "stream order (queued)")) << all;
  const std::size_t n = log.lines().size();
  { ngtest::CapturedFia quiet(s.q, s.k, s.v, s.opts({29})); }
  EXPECT_EQ(log.lines().size(), n);  // off again
}

}  // namespace
