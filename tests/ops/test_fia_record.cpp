// Graph-owned updates in C++ (Note [Recorded updates] in npugraph/recorded_updates.hpp, Note [FIA
// record] in npugraph/ops/fia_record.hpp), the protocol under torch_npu's auto_dispatch_capture:
//   - a recorded call's replay after an update equals the eager call with the updated arguments,
//     bitwise; staged changes persist; a failed update installs nothing and restores the arguments;
//   - a replay without an update since the last one is refused at once, naming the graph;
//   - an update made while the previous replay is still held back lands after it (the next replay
//     gets its parameters and does not hang), and a replay that finds an update in flight waits for
//     it instead of being refused;
//   - a second update of one graph while one is in flight, and records or updates after reset(), are
//     StateErrors that say what is going on.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "npugraph/npugraph.hpp"
#include "npugraph/ops/fia_record.hpp"
#include "npugraph/recorded_updates.hpp"
#include "ops/fia_case.hpp"
#include "ops/fia_replan_cases.hpp"
#include "support/bitwise.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
using ng::RecordedUpdates;
using ng::ops::FiaCall;
using ng::ops::FiaOptions;

// Stages every host value of `next` into `call` (what Python's update dict does key by key).
void stage_host_values(FiaCall& call, const FiaOptions& next) {
  FiaOptions& s = call.staging();
  s.actual_seq_lengths_kv = next.actual_seq_lengths_kv;
  call.stage([](FiaOptions& a, FiaOptions& b) { std::swap(a.actual_seq_lengths_kv, b.actual_seq_lengths_kv); }, true);
  s.scale = next.scale;
  call.stage([](FiaOptions& a, FiaOptions& b) { std::swap(a.scale, b.scale); }, true);
  s.pre_tokens = next.pre_tokens;
  call.stage([](FiaOptions& a, FiaOptions& b) { std::swap(a.pre_tokens, b.pre_tokens); }, true);
  s.next_tokens = next.next_tokens;
  call.stage([](FiaOptions& a, FiaOptions& b) { std::swap(a.next_tokens, b.next_tokens); }, true);
}

// One decode-shaped FIA call recorded into a graph (the auto-dispatch capture of one layer).
struct Recorded {
  FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true});
  ng::Graph graph;
  std::shared_ptr<RecordedUpdates> records;
  ng::ops::FiaRecorder recorder;
  ng::Tensor out;

  Recorded() {
    ng::CaptureScope capture(graph);
    records = std::make_shared<RecordedUpdates>(graph, RecordedUpdates::update_stream_for(ng::Device::cpu()));
    const std::optional<ng::ops::FiaResult> r = recorder.record(*records, b.q, b.k, b.v, b.opt, 0);
    EXPECT_TRUE(r.has_value());
    out = r->attention_out;
    capture.end();
  }
  // An update that stages `next`'s host values (none: re-issue as they are).
  void update(const FiaOptions* next = nullptr) {
    RecordedUpdates::Update u(*records, graph, "test update");
    u.wait_for_replays();
    if (next) stage_host_values(static_cast<FiaCall&>(u.call(0)), *next);
    u.issue();
  }
  const FiaCall& call() {
    RecordedUpdates::Update u(*records, graph, "test");
    return static_cast<FiaCall&>(u.call(0));
  }
  // Replays on `s`, waits, and compares the output with the eager call with `o`.
  ::testing::AssertionResult replay_equals_eager(const ng::Stream& s, const FiaOptions& o) {
    records->replay(graph, s);
    s.synchronize();
    return ngtest::bitwise_equal(out, eager(o));
  }
  ng::Tensor eager(const FiaOptions& o) const {
    const ng::ops::FiaResult r = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, o);
    ng::current_stream().synchronize();
    return r.attention_out;
  }
};

TEST(FiaRecord, AnUpdatedReplayEqualsTheEagerCallWithTheNewArgumentsAndTheyPersist) {
  Recorded r;
  const FiaOptions next = next_host_values(r.b);
  const ng::Stream s = ng::Stream::create();
  r.update(&next);
  EXPECT_TRUE(r.replay_equals_eager(s, next));
  r.update();  // no change: the staged values stay
  EXPECT_TRUE(r.replay_equals_eager(s, next));
  EXPECT_TRUE(r.call().captured_inputs());  // host values only: still the host-value re-issue
  r.update(&r.b.opt);  // and back
  EXPECT_TRUE(r.replay_equals_eager(s, r.b.opt));
}

TEST(FiaRecord, AReplayWithoutAnUpdateSinceTheLastIsRefusedAtOnce) {
  Recorded r;
  const ng::Stream s = ng::Stream::create();
  const std::string graph = "graph " + std::to_string(r.graph.id());
  EXPECT_TRUE(ngtest::throws<ng::StateError>([&] { r.records->replay(r.graph, s); },
                                             {graph, "1 recorded call(s) wait for an update before every replay"}));
  r.update();
  r.update();  // two updates, no replay between: their records collapse harmlessly
  r.records->replay(r.graph, s);
  s.synchronize();
  EXPECT_TRUE(ngtest::throws<ng::StateError>([&] { r.records->replay(r.graph, s); }, {graph, "none was made"}));
  EXPECT_TRUE(ngtest::bitwise_equal(r.out, r.eager(r.b.opt)));
}

TEST(FiaRecord, AFailedUpdateInstallsNothingAndRestoresTheArguments) {
  Recorded r;
  const ng::Stream s = ng::Stream::create();
  const FiaOptions next = next_host_values(r.b);
  r.update(&next);
  r.records->replay(r.graph, s);
  s.synchronize();
  FiaOptions bad = next;
  bad.actual_seq_lengths_kv.assign(1, r.b.k.shape()[2] + 1);  // longer than the key
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { r.update(&bad); }, {"must be <= the key's S dimension"}));
  EXPECT_EQ(r.call().options().actual_seq_lengths_kv, next.actual_seq_lengths_kv);
  EXPECT_EQ(r.call().options().scale, next.scale);
  {  // an update abandoned before its issue (a bad update dict in Python) restores them too
    RecordedUpdates::Update u(*r.records, r.graph, "test update");
    stage_host_values(static_cast<FiaCall&>(u.call(0)), r.b.opt);
  }
  EXPECT_EQ(r.call().options().actual_seq_lengths_kv, next.actual_seq_lengths_kv);
  // The failed update left no mark: a replay still needs one, and then gives `next`'s result.
  EXPECT_TRUE(ngtest::throws<ng::StateError>([&] { r.records->replay(r.graph, s); }, {"none was made"}));
  r.update();
  EXPECT_TRUE(r.replay_equals_eager(s, next));
}

TEST(FiaRecord, AnUpdateMadeWhileThePreviousReplayIsHeldBackLandsAfterIt) {
  // Without the order, the second update's event records would collapse into the first replay's
  // unconsumed signals and the second replay would wait for them until the deadline.
  Recorded r;
  const ng::Stream s = ng::Stream::create();
  const FiaOptions next = next_host_values(r.b);
  const ngtest::Gate open;
  r.update();
  ng::launch_host_func(s, [open] { open.wait(); });  // holds the first replay back
  r.records->replay(r.graph, s);
  r.update(&next);                 // returns at once: its re-issue waits for the first replay
  r.records->replay(r.graph, s);   // consumes the second update
  open.open();
  s.synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(r.out, r.eager(next)));
}

TEST(FiaRecord, AReplayThatFindsAnUpdateInFlightWaitsForIt) {
  Recorded r;
  const ng::Stream s = ng::Stream::create();
  const FiaOptions next = next_host_values(r.b);
  std::optional<RecordedUpdates::Update> u(std::in_place, *r.records, r.graph, "test update");
  std::string replay_error = "not run";
  std::thread replayer([&] {
    try {
      r.records->replay(r.graph, s);  // no mark yet, but an update is in flight: waits for it
      replay_error.clear();
    } catch (const std::exception& e) {
      replay_error = e.what();
    }
  });
  u->wait_for_replays();
  stage_host_values(static_cast<FiaCall&>(u->call(0)), next);
  u->issue();
  u.reset();
  replayer.join();
  EXPECT_EQ(replay_error, "");
  s.synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(r.out, r.eager(next)));
}

TEST(FiaRecord, OneUpdateOfAGraphAtATimeAndNothingAfterReset) {
  Recorded r;
  const std::string graph = "graph " + std::to_string(r.graph.id());
  {
    RecordedUpdates::Update u(*r.records, r.graph, "test update");
    std::string loser;
    std::thread other([&] {  // try_lock from another thread: the holder is this one
      try {
        RecordedUpdates::Update v(*r.records, r.graph, "NPUGraph.update");
      } catch (const ng::StateError& e) {
        loser = e.what();
      }
    });
    other.join();
    EXPECT_NE(loser.find("NPUGraph.update: " + graph + ": another thread is updating it"), std::string::npos) << loser;
  }
  r.records->reset(r.graph);
  EXPECT_TRUE(ngtest::throws<ng::StateError>([&] { RecordedUpdates::Update u(*r.records, r.graph, "NPUGraph.update"); },
                                             {graph, "was reset by another thread"}));
  EXPECT_TRUE(ngtest::throws<ng::StateError>(
      [&] { r.recorder.record(*r.records, r.b.q, r.b.k, r.b.v, r.b.opt, 0); }, {graph, "was reset"}));
}

TEST(FiaRecord, AGraphWithNoRecordedCallAndAStreamThatDoesNotCaptureAreTold) {
  ng::Graph g;
  std::shared_ptr<RecordedUpdates> records;
  {
    ng::CaptureScope capture(g);
    records = std::make_shared<RecordedUpdates>(g, RecordedUpdates::update_stream_for(ng::Device::cpu()));
    const FiaBuilt b = build_case({.layout = "BNSD", .decode = true});
    ng::ops::FiaRecorder recorder;
    const ng::Stream other = ng::Stream::create();
    ng::StreamGuard on(other);  // not the capturing stream: nothing is recorded, the caller runs it eagerly
    EXPECT_FALSE(recorder.record(*records, b.q, b.k, b.v, b.opt, 0).has_value());
  }
  EXPECT_EQ(records->size(), 0u);
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { RecordedUpdates::Update u(*records, g, "NPUGraph.update"); },
                                                {"recorded no call during its capture: nothing to update"}));
}

TEST(FiaRecord, StreamOrderedRecordsWaitOnNoEventAndReplayOnTheirStreamOnly) {
  // Note [Stream-ordered records]: the decode engine's update_then_replay step.
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true});
  const ng::Stream s = ng::Stream::create();
  ng::Graph g;
  RecordedUpdates records(g, s, ng::UpdateOrdering::stream);
  ng::ops::FiaRecorder recorder;
  ng::Tensor out;
  {
    ng::CaptureScope capture(g, s);
    out = recorder.record(records, b.q, b.k, b.v, b.opt, 0)->attention_out;
  }
  EXPECT_EQ(g.dot().find("external_event"), std::string::npos) << g.dot();
  const FiaOptions next = next_host_values(b);
  {
    RecordedUpdates::Update u(records, g, "decode step update");
    u.wait_for_replays();
    stage_host_values(static_cast<FiaCall&>(u.call(0)), next);
    u.issue();
  }
  records.replay(g, s);
  records.replay(g, s);  // no update needed: the installed parameters again
  s.synchronize();
  const ng::ops::FiaResult eager = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, next);
  ng::current_stream().synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(out, eager.attention_out));
  const ng::Stream other = ng::Stream::create();
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { records.replay(g, other); },
                                                {"graph " + std::to_string(g.id()), "stream-ordered on", "replays there"}));
}

}  // namespace
}  // namespace fia_test
