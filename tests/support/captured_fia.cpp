#include "support/captured_fia.hpp"

#include <utility>

#include "support/bitwise.hpp"

namespace ngtest {

namespace ng = npugraph;

CapturedFia::CapturedFia(ng::Tensor query, ng::Tensor key, ng::Tensor value,
                         ng::ops::FiaOptions options, Setup setup)
    : q(std::move(query)), k(std::move(key)), v(std::move(value)), captured(std::move(options)),
      gate_(setup.gate) {
  ng::CaptureScope capture(graph);
  const ng::Stream s = ng::current_stream();
  const ng::ops::FiaPlan plan = ng::ops::fia_plan(q, k, v, captured);
  ws = ng::ops::fia_max_workspace(q, k, v, captured);
  out = ng::empty(plan.out_shape(), plan.out_dtype());
  lse = ng::empty(captured.softmax_lse_flag ? plan.lse_shape() : ng::Shape{1}, ng::f32);
  if (gate_) {
    gate_->wait(s);
    if (setup.reset_gate) gate_->reset(s);
  }
  if (setup.group) ng::task_group_begin(s);
  ng::ops::fused_infer_attention_score_out(q, k, v, captured, ws, out, lse);
  if (setup.group) handle = ng::task_group_end(s);
  if (setup.after) setup.after(s, *this);
}

void CapturedFia::update(const ng::ops::FiaOptions& options, const ng::Stream& stream) {
  ng::StreamGuard on(stream);
  ng::task_update_begin(stream, handle);
  ng::ops::fused_infer_attention_score_out(q, k, v, options, ws, out, lse);
  ng::task_update_end(stream);
  if (gate_) gate_->record(stream);
}

void CapturedFia::update(const ng::ops::FiaOptions& options) {
  update(options, updates);
  updates.synchronize();
}

::testing::AssertionResult CapturedFia::refuses_update(const std::function<void()>& reissue,
                                                       std::initializer_list<std::string> parts) {
  ng::StreamGuard on(updates);
  ng::task_update_begin(updates, handle);
  ::testing::AssertionResult r = ::testing::AssertionFailure() << "the update was accepted";
  try {
    reissue();
    ng::task_update_end(updates);
  } catch (const ng::Error& e) {
    const std::string what = e.what();
    r = ::testing::AssertionSuccess() << what;
    for (const std::string& p : parts)
      if (what.find(p) == std::string::npos) {
        r = ::testing::AssertionFailure() << "message \"" << what << "\" lacks \"" << p << "\"";
        break;
      }
  }
  if (updates.is_updating()) ng::task_update_abort(updates);
  return r;
}

void CapturedFia::replay() {
  graph.replay();
  ng::device_synchronize();
}

ng::ops::FiaResult CapturedFia::eager(const ng::ops::FiaOptions& options) const {
  ng::ops::FiaResult r = ng::ops::fused_infer_attention_score(q, k, v, options);
  ng::current_stream().synchronize();
  return r;
}

::testing::AssertionResult CapturedFia::equals_eager(const ng::ops::FiaOptions& options,
                                                     ng::ops::FiaResult* eager_result) const {
  ng::ops::FiaResult e = eager(options);
  ::testing::AssertionResult r = bitwise_equal(out, e.attention_out);
  if (!r) r = ::testing::AssertionFailure() << "attention_out: " << r.message();
  if (r && options.softmax_lse_flag) {
    r = bitwise_equal(lse, e.softmax_lse);
    if (!r) r = ::testing::AssertionFailure() << "softmax_lse: " << r.message();
  }
  if (eager_result) *eager_result = std::move(e);
  return r;
}

::testing::AssertionResult CapturedFia::replay_equals_eager(const ng::ops::FiaOptions& options,
                                                            ng::ops::FiaResult* eager_result) {
  replay();
  return equals_eager(options, eager_result);
}

}  // namespace ngtest
