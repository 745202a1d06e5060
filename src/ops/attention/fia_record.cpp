// fused_infer_attention_score recorded for graph-owned updates (Note [FIA record] in
// npugraph/ops/fia_record.hpp).
#include "npugraph/ops/fia_record.hpp"

#include <algorithm>

#include "npugraph/memory.hpp"
#include "npugraph/tasks.hpp"

namespace npugraph::ops {

void FiaCall::launch(const Stream& stream) {
  StreamGuard on(stream);
  if (plan_) {
    const FiaPlan plan = std::move(*plan_);
    plan_.reset();
    fused_infer_attention_score_out(plan, workspace_, attention_out_, softmax_lse_);
  } else {
    fused_infer_attention_score_out(query_, key_, value_, options_, workspace_, attention_out_, softmax_lse_);
  }
}

void FiaCall::reissue(const Stream& update_stream) {  // the current stream (Update::issue)
  if (captured_inputs_ && host_only_)
    fused_infer_attention_score_update(update_stream, FiaHostValues::of(options_));
  else
    fused_infer_attention_score_out(query_, key_, value_, options_, workspace_, attention_out_, softmax_lse_);
}

void FiaCall::commit() noexcept {
  if (!host_only_) captured_inputs_ = false;
  undo_.clear();
  host_only_ = true;
}

void FiaCall::rollback() noexcept {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)(options_, staging_);
  undo_.clear();
  host_only_ = true;
}

std::optional<FiaResult> FiaRecorder::record(RecordedUpdates& records, const Tensor& query, const Tensor& key,
                                             const Tensor& value, const FiaOptions& options, std::uint8_t tag,
                                             const FiaOutBuffers* given, const char* what) {
  const Stream s = current_stream(query.device());
  auto prepare = [&](const Stream& stream) -> std::unique_ptr<RecordedCall> {
    FiaPlan plan = fia_plan(query, key, value, options);  // one plan: workspace, outputs, launch
    Tensor workspace;
    if (given && given->workspace.defined()) {
      workspace = given->workspace;
    } else {  // the graph's shared one for this stream, grown to the largest need
      const std::int64_t need = plan.workspace_bytes();
      auto it = std::find_if(workspaces_.begin(), workspaces_.end(),
                             [&](const auto& w) { return w.first == stream.id(); });
      if (it == workspaces_.end()) it = workspaces_.emplace(workspaces_.end(), stream.id(), Tensor());
      if (!it->second.defined() || it->second.numel() < need)  // earlier calls keep their smaller one
        it->second = empty({need}, DType::u8, query.device());
      workspace = it->second;
    }
    Tensor out, lse;
    if (given) {  // a .out call: it writes the caller's outputs
      out = given->attention_out;
      lse = given->softmax_lse;
    } else {
      out = empty(plan.out_shape(), plan.out_dtype(), query.device());
      lse = options.softmax_lse_flag ? empty(plan.lse_shape(), DType::f32, query.device())
                                     : zeros({1}, DType::f32, query.device());
    }
    return std::make_unique<FiaCall>(query, key, value, options, std::move(workspace), std::move(out),
                                     std::move(lse), tag, std::move(plan));
  };
  auto* call = static_cast<FiaCall*>(records.record(s, what, prepare));
  if (!call) return std::nullopt;
  return FiaResult{call->attention_out(), call->softmax_lse()};
}

}  // namespace npugraph::ops
