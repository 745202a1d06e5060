// fused_infer_attention_score recorded for graph-owned updates (Note [Recorded updates] in
// npugraph/recorded_updates.hpp): the call captured into its own group, and its re-issue by an
// update with changed arguments.
//
// Note [FIA record]
// A recorded call keeps its tensors, its options, its workspace and its outputs. Calls captured on one
// stream share a workspace (the largest they need): the capture orders them, so they never run at
// once, and a decode step's 80 calls touch one workspace, not 80. An update changes a call's options
// field by field without copying them: the new value is written into staging() and swapped in
// (stage()); the same swaps, undone in reverse, restore every field when the update fails. Only the
// values the op re-plans are updatable (Update rules in npugraph/ops/fia.hpp): a caller checks that
// before staging. While no update has changed a tensor or a static option (only host values), the
// re-issue passes the host values only (Note [FIA host-value update] in
// src/ops/attention/fia_plan.hpp), never comparing the ~25 tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "npugraph/ops/fia.hpp"
#include "npugraph/recorded_updates.hpp"

namespace npugraph::ops {

// Swaps one field of two FiaOptions (swapping again restores both).
using FieldSwap = void (*)(FiaOptions&, FiaOptions&);

class FiaCall final : public RecordedCall {
 public:
  // `plan`: the call's plan (fia_plan of these arguments), used by the capture's launch and dropped;
  // without it, the launch plans again.
  FiaCall(Tensor query, Tensor key, Tensor value, FiaOptions options, Tensor workspace,
          Tensor attention_out, Tensor softmax_lse, std::uint8_t tag, std::optional<FiaPlan> plan = {})
      : query_(std::move(query)), key_(std::move(key)), value_(std::move(value)), options_(std::move(options)),
        workspace_(std::move(workspace)), attention_out_(std::move(attention_out)),
        softmax_lse_(std::move(softmax_lse)), plan_(std::move(plan)), tag_(tag) {}

  const FiaOptions& options() const { return options_; }
  // Scratch options to write a new value into before stage(): after it, the old value.
  FiaOptions& staging() { return staging_; }
  // Stages one field: swap(options, staging) now, undone by rollback(). `host_value`: the field is
  // one of FiaHostValues' (not a tensor, not a static option).
  void stage(FieldSwap swap, bool host_value) {
    undo_.reserve(undo_.size() + 1);
    swap(options_, staging_);
    undo_.push_back(swap);
    host_only_ = host_only_ && host_value;
  }
  const Tensor& attention_out() const { return attention_out_; }
  const Tensor& softmax_lse() const { return softmax_lse_; }
  // The recorder's tag (the Python bindings: which op's keyword names its updates use).
  std::uint8_t tag() const { return tag_; }
  // Its tensors and static options are still the captured call's.
  bool captured_inputs() const { return captured_inputs_; }

  void launch(const Stream& stream) override;
  void reissue(const Stream& update_stream) override;
  void commit() noexcept override;
  void rollback() noexcept override;

 private:
  Tensor query_, key_, value_;
  FiaOptions options_, staging_;
  Tensor workspace_, attention_out_, softmax_lse_;
  std::optional<FiaPlan> plan_;  // until the capture's launch
  std::vector<FieldSwap> undo_;  // the swaps staged by the update in progress
  std::uint8_t tag_;
  bool host_only_ = true;        // the update in progress staged host values only
  bool captured_inputs_ = true;
};

// The caller's buffers of a `.out` call: its outputs, and its workspace when one is given.
struct FiaOutBuffers {
  Tensor workspace;  // undefined: the graph's shared workspace
  Tensor attention_out, softmax_lse;
};

// Records FIA calls into one graph's records; keeps the graph's shared workspaces (one per capture
// stream). Use one per RecordedUpdates.
class FiaRecorder {
 public:
  // Captures the call into its own group on the current stream of query's device and records it
  // (planned once: the workspace, the outputs and the launch come from one FiaPlan). Returns its
  // outputs (`given`'s for a `.out` call), or nothing when the stream does not capture (the caller
  // runs the call eagerly). `what` names the op in errors.
  std::optional<FiaResult> record(RecordedUpdates& records, const Tensor& query, const Tensor& key,
                                  const Tensor& value, const FiaOptions& options, std::uint8_t tag,
                                  const FiaOutBuffers* given = nullptr,
                                  const char* what = "npu_fused_infer_attention_score");

 private:
  std::vector<std::pair<std::uint64_t, Tensor>> workspaces_;  // per capture stream id (records' lock)
};

}  // namespace npugraph::ops
