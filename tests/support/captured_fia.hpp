// ngtest::CapturedFia: one fused_infer_attention_score call captured the way the seed example
// captures it, and the update -> replay -> compare cycle the update tests run on it (replays and
// updated replays are bitwise the eager call with the same arguments: docs/semantics.md §5, §6).
//
//   ngtest::CapturedFia c(q, k, v, captured);        // the `.out` form in a task group
//   EXPECT_TRUE(c.replay_equals_eager(captured));    // replay == eager, bitwise
//   c.update(updated);                               // stream-ordered update, synchronized
//   EXPECT_TRUE(c.replay_equals_eager(updated));
//
// The workspace is fia_max_workspace of the captured arguments and the outputs come from the
// graph's pool (fia_plan's shapes and dtype; softmax_lse is [1] without softmax_lse_flag).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "npugraph/npugraph.hpp"

namespace ngtest {

class CapturedFia;

// How CapturedFia captures its call.
struct CaptureSetup {
  // Captured before the call as gate.wait(s) (the seed's ExternalEvent), and gate.reset(s) with
  // reset_gate; update(options, stream) records it on the stream after the update.
  npugraph::ExternalEvent* gate = nullptr;
  bool reset_gate = false;
  bool group = true;  // inside a task group (false: a plain captured launch, no handle)
  // Captured after the call, on the capture stream (e.g. a host function that checks `out`).
  std::function<void(const npugraph::Stream&, const CapturedFia&)> after;
};

class CapturedFia {
 public:
  using Setup = CaptureSetup;

  CapturedFia(npugraph::Tensor query, npugraph::Tensor key, npugraph::Tensor value,
              npugraph::ops::FiaOptions options, Setup setup = {});
  CapturedFia(const CapturedFia&) = delete;
  CapturedFia& operator=(const CapturedFia&) = delete;

  // Re-issues the call with `options` (same query, key, value, workspace and outputs) in a
  // stream-ordered update on `stream`, then records the gate there when there is one. Does not
  // wait for the stream.
  void update(const npugraph::ops::FiaOptions& options, const npugraph::Stream& stream);
  // The same on `updates`, then waits for it.
  void update(const npugraph::ops::FiaOptions& options);
  // An update of the group that issues `reissue` (the `.out` form with any arguments) on
  // `updates` must fail with an npugraph::Error whose message contains every part; the update is
  // left (aborted if still open), so nothing is installed.
  ::testing::AssertionResult refuses_update(const std::function<void()>& reissue,
                                            std::initializer_list<std::string> parts);

  // Replays the graph on the current stream and synchronizes the device.
  void replay();
  // The eager call with `options` on the current stream, synchronized.
  npugraph::ops::FiaResult eager(const npugraph::ops::FiaOptions& options) const;
  // out (and lse, with softmax_lse_flag) bitwise equal to eager(options); `eager_result` (if
  // given) receives the eager outputs. replay_equals_eager replays first.
  ::testing::AssertionResult equals_eager(const npugraph::ops::FiaOptions& options,
                                          npugraph::ops::FiaResult* eager_result = nullptr) const;
  ::testing::AssertionResult replay_equals_eager(const npugraph::ops::FiaOptions& options,
                                                 npugraph::ops::FiaResult* eager_result = nullptr);

  npugraph::Tensor q, k, v;
  npugraph::ops::FiaOptions captured;
  npugraph::Graph graph;
  npugraph::TaskGroupHandle handle;  // with Setup::group
  npugraph::Tensor ws, out, lse;
  npugraph::Stream updates = npugraph::Stream::create();

 private:
  npugraph::ExternalEvent* gate_ = nullptr;
};

}  // namespace ngtest
