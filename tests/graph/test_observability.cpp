// Seeing a graph: the DOT dump's task parameters (current after an update), group labels and
// ExternalEvent names; Graph::groups(); the Chrome-trace timeline; the log switch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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
