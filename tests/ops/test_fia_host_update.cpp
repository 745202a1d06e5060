// fused_infer_attention_score_update: an update that re-issues the captured call with new host values
// only (Note [FIA host-value update] in ops/attention/fia_plan.hpp).
//   - over the re-plan spread of cases (layouts, decode, paged KV, masks, padding, pse, shared prefix,
//     rope, antiquant, int8 output), its replay equals the eager call with those host values, bitwise,
//     and equals the replay after the `.out` re-issue of the same arguments;
//   - bad host values fail with the `.out` path's messages, and nothing is installed;
//   - misuse (no update, no captured `.out` task left, an allocating-form capture) is a StateError
//     that says what to do and abandons the update; from a thread that does not own the update it is
//     refused there and the owner's update goes on.
#include <string>
#include <thread>
#include <vector>

#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"
#include "ops/fia_replan_cases.hpp"
#include "support/captured_fia.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using ng::ops::FiaHostValues;
using ng::ops::FiaOptions;

void host_update(ngtest::CapturedFia& f, const FiaOptions& next) {
  ng::task_update_begin(f.updates, f.handle);
  ng::ops::fused_infer_attention_score_update(f.updates, FiaHostValues::of(next));
  ng::task_update_end(f.updates);
  f.updates.synchronize();
}

TEST(FiaHostUpdate, ReplayEqualsEagerAndTheOutFormsUpdateOverTheCaseSpread) {
  for (const FiaCase& c : replan_cases()) {
    SCOPED_TRACE(c.name());
    const FiaBuilt b = build_case(c);
    ngtest::CapturedFia f(b.q, b.k, b.v, b.opt);
    const FiaOptions next = next_host_values(b);
    const att::FiaReplanCounts before = att::fia_replan_counts();
    host_update(f, next);
    EXPECT_EQ(att::fia_replan_counts().outputs, before.outputs + 1);
    ng::ops::FiaResult eager;
    ASSERT_TRUE(f.replay_equals_eager(next, &eager));
    // The same arguments through the `.out` form give the same replay.
    f.update(b.opt);
    ASSERT_TRUE(f.replay_equals_eager(b.opt));
    f.update(next);
    f.replay();
    EXPECT_TRUE(bitwise_equal(f.out, eager.attention_out));
    // And back to the captured values.
    host_update(f, b.opt);
    EXPECT_TRUE(f.replay_equals_eager(b.opt));
  }
}

TEST(FiaHostUpdate, BadHostValuesFailWithTheOutFormsMessagesAndInstallNothing) {
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true});
  ngtest::CapturedFia f(b.q, b.k, b.v, b.opt);
  const std::int64_t kv_seq = b.k.shape()[2];
  std::vector<FiaOptions> bad(4, b.opt);  // the case has B = 3
  bad[0].actual_seq_lengths_kv = {kv_seq + 1};
  bad[1].actual_seq_lengths_kv = {-1};
  bad[2].scale = 1e300;
  bad[3].actual_seq_lengths_kv = {1, 1};
  const std::vector<std::string> rule = {"must be <= the key's S dimension", "must be >= 0",
                                         "must be finite in float32",
                                         "must hold 1 value or at least B = 3 values"};
  for (std::size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    std::string out_message;
    try {
      ng::StreamGuard on(f.updates);
      ng::task_update_begin(f.updates, f.handle);
      ng::ops::fused_infer_attention_score_out(f.q, f.k, f.v, bad[i], f.ws, f.out, f.lse);
    } catch (const ng::ArgumentError& e) {
      out_message = e.what();
    }
    ASSERT_NE(out_message.find(rule[i]), std::string::npos) << out_message;
    EXPECT_FALSE(f.updates.is_updating());  // the `.out` error abandoned its update
    EXPECT_TRUE(f.refuses_update(
        [&] { ng::ops::fused_infer_attention_score_update(f.updates, FiaHostValues::of(bad[i])); },
        {out_message}));
    EXPECT_TRUE(f.replay_equals_eager(b.opt));  // nothing was installed
  }
}

TEST(FiaHostUpdate, MisuseIsAStateErrorThatAbandonsTheUpdate) {
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true});
  ngtest::CapturedFia f(b.q, b.k, b.v, b.opt);
  const FiaHostValues values = FiaHostValues::of(b.opt);
  // Not updating.
  try {
    ng::ops::fused_infer_attention_score_update(f.updates, values);
    ADD_FAILURE() << "accepted outside an update";
  } catch (const ng::StateError& e) {
    EXPECT_NE(std::string(e.what()).find("is not updating on this thread: call it between "
                                         "task_update_begin and task_update_end"),
              std::string::npos)
        << e.what();
  }
  // More re-issues than the group has tasks.
  EXPECT_TRUE(f.refuses_update(
      [&] {
        ng::ops::fused_infer_attention_score_update(f.updates, values);
        ng::ops::fused_infer_attention_score_update(f.updates, values);
      },
      {"no captured call to re-issue", "re-issue it with fused_infer_attention_score_out"}));
  EXPECT_FALSE(f.updates.is_updating());
  EXPECT_TRUE(f.replay_equals_eager(b.opt));
  // Another thread re-issuing into this thread's update: refused there, and the owner's update
  // stays open and installs.
  ng::task_update_begin(f.updates, f.handle);
  std::string other;
  std::thread intruder([&] {
    try {
      ng::ops::fused_infer_attention_score_update(f.updates, values);
    } catch (const ng::StateError& e) {
      other = e.what();
    }
  });
  intruder.join();
  EXPECT_NE(other.find("another thread began the update"), std::string::npos) << other;
  EXPECT_TRUE(f.updates.is_updating());
  const FiaOptions next = next_host_values(b);
  ng::ops::fused_infer_attention_score_update(f.updates, FiaHostValues::of(next));
  ng::task_update_end(f.updates);
  f.updates.synchronize();
  EXPECT_TRUE(f.replay_equals_eager(next));
  // A task captured from the allocating form keeps no call to re-issue.
  ng::Graph g;
  ng::TaskGroupHandle h;
  {
    ng::CaptureScope scope(g);
    const ng::Stream s = ng::current_stream();
    ng::task_group_begin(s);
    (void)ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    h = ng::task_group_end(s);
  }
  const ng::Stream u = ng::Stream::create();
  ng::task_update_begin(u, h);
  EXPECT_THROW(ng::ops::fused_infer_attention_score_update(u, values), ng::StateError);
  EXPECT_FALSE(u.is_updating());  // abandoned: a new update can begin
  ng::task_update_begin(u, h);
  ng::task_update_abort(u);
}

}  // namespace
}  // namespace fia_test
