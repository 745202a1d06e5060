// fused_infer_attention_score (FIA): the attention operator of the seed example, with torch_npu's
// full argument set. The operator's specification (layouts, masks and sparse modes, paged KV,
// quantisation, lengths, limits, workspace, what an update may change) is docs/fia.md; how it is
// built (params -> plan -> launch -> kernel) is docs/adding_an_op.md.
//
//   auto [out, lse] = ng::ops::fused_infer_attention_score(q, k, v, {.num_heads = 32,
//                                                                  .input_layout = "BNSD"});
//
// All entry points are asynchronous on the current stream: they validate and plan on the host, then
// issue one kernel launch whose parameter block carries everything an update may change, so a
// captured FIA task can be re-parameterised by a task update (docs/semantics.md §5, §6).
//
// Math, per batch b, query head n, KV head n / (N / KV_N), valid query row i, visible KV column j:
//   s = scale * (q_i . k_j + q_rope_i . k_rope_j) + pse[i, j];   p = softmax over visible j;
//   out_i = sum_j p_j v_j;   lse_i = log(sum_j exp(s_j - max)) + max   (float32 throughout).
// With learnable_sink, sink[n] is one more logit in the softmax and the lse (it has no value).
//
// Update rules (docs/fia.md, "What an update may change"): an update may change the host values
// (actual lengths, actual_shared_prefix_len, scale, pre/next tokens) and point any tensor argument
// at other memory of the same shape and dtype. It may not change input_layout, num_heads,
// num_key_value_heads, sparse_mode, inner_precise, block_size, the antiquant modes,
// softmax_lse_flag, TND/NTD's batch count, or any tensor's presence, shape or dtype; the refusal
// reads "<argument> is not updatable (captured with X, updated with Y)".
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// Keyword arguments, with torch_npu's names, order and defaults. An undefined Tensor is None.
// Every field has a default member initialiser (`{}` for the tensors and lists): gcc's
// -Wmissing-field-initializers (-Wextra) skips those, so `FiaOptions{.num_heads = 4, .scale = 0.5}`
// in user code compiles without warnings (tests/consumer/ builds one with -Wall -Wextra -Werror).
struct FiaOptions {
  Tensor pse_shift{};
  Tensor atten_mask{};
  std::vector<std::int64_t> actual_seq_lengths{};     // query lengths (host values)
  std::vector<std::int64_t> actual_seq_lengths_kv{};  // key/value lengths (host values)
  Tensor dequant_scale1{};  // int8 query only: rejected
  Tensor quant_scale1{};    // int8 query only: rejected
  Tensor dequant_scale2{};  // int8 query only: rejected
  Tensor quant_scale2{};
  Tensor quant_offset2{};
  Tensor antiquant_scale{};
  Tensor antiquant_offset{};
  Tensor block_table{};
  Tensor query_padding_size{};
  Tensor kv_padding_size{};
  Tensor key_antiquant_scale{};
  Tensor key_antiquant_offset{};
  Tensor value_antiquant_scale{};
  Tensor value_antiquant_offset{};
  Tensor key_shared_prefix{};
  Tensor value_shared_prefix{};
  std::vector<std::int64_t> actual_shared_prefix_len{};  // host value: empty or 1 value
  Tensor query_rope{};
  Tensor key_rope{};
  Tensor key_rope_antiquant_scale{};  // reserved: must be undefined
  std::int64_t num_heads = 1;
  double scale = 1.0;
  std::int64_t pre_tokens = 2147483647;
  std::int64_t next_tokens = 2147483647;
  std::string input_layout = "BSH";
  std::int64_t num_key_value_heads = 0;  // 0: same as num_heads
  std::int64_t sparse_mode = 0;
  std::int64_t inner_precise = 0;
  std::int64_t block_size = 0;
  std::int64_t antiquant_mode = 0;
  bool softmax_lse_flag = false;
  std::int64_t key_antiquant_mode = 0;
  std::int64_t value_antiquant_mode = 0;
  // torch_npu v2's learnable_sink (attention sinks): float32, float16 or bfloat16 [N], one logit per
  // query head that joins every valid row's softmax unscaled and unmasked, with no value vector
  // (docs/fia.md, "Learnable sink"). Last, as v2 has it: v1 has no such keyword.
  Tensor learnable_sink{};
};

// The host values of a call (Update rules above): what an update may change without pointing a
// tensor elsewhere. The lists are views, read only during the call that takes them.
struct FiaHostValues {
  std::span<const std::int64_t> actual_seq_lengths{};
  std::span<const std::int64_t> actual_seq_lengths_kv{};
  std::span<const std::int64_t> actual_shared_prefix_len{};
  double scale = 1.0;
  std::int64_t pre_tokens = 2147483647;
  std::int64_t next_tokens = 2147483647;

  // The host values of `options` (views of its lists: keep it alive while they are used).
  static FiaHostValues of(const FiaOptions& options) {
    return {.actual_seq_lengths = options.actual_seq_lengths,
            .actual_seq_lengths_kv = options.actual_seq_lengths_kv,
            .actual_shared_prefix_len = options.actual_shared_prefix_len,
            .scale = options.scale,
            .pre_tokens = options.pre_tokens,
            .next_tokens = options.next_tokens};
  }
};

struct FiaResult {
  Tensor attention_out;  // the output layout; the query's dtype (int8 with quant_scale2)
  Tensor softmax_lse;    // float32 [B, N, Sq, 1] / [T, N, 1], or a 1-element float32 0
};

// Eager form: allocates the outputs and a workspace, launches on the current stream.
FiaResult fused_infer_attention_score(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const FiaOptions& options);

// `.out` form: writes `attention_out` and `softmax_lse` using the caller's `workspace`, which must
// hold at least fia_workspace_bytes() bytes.
//   attention_out: fia_output_shape() and fia_output_dtype(), contiguous;
//   softmax_lse:   with softmax_lse_flag, float32 fia_lse_shape() contiguous; without it, any
//                  defined tensor, whose first element is set to 0 (zero bytes; torch_npu's
//                  placeholder holds 0) and the rest left as it was;
//   workspace:     uint8, contiguous.
// No output may overlap an input or another output.
void fused_infer_attention_score_out(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const FiaOptions& options, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse);

// Inside an update of `stream` (task_update_begin ... task_update_end on this thread): re-issues the
// call that the group's next task was captured with — its tensors, workspace, outputs and static
// options — with new host values. The task gets the block, and the call the checks and messages,
// that fused_infer_attention_score_out gives for the captured arguments with these host values; no
// tensor is read or compared, which makes it the cheap update of a decode step whose tensors stay
// put (only the lengths change). Throws StateError when `stream` is not updating on this thread, or
// when the next task is not a fused_infer_attention_score task captured with the `.out` form; any
// error abandons the update (nothing is installed), as in every update.
void fused_infer_attention_score_update(const Stream& stream, const FiaHostValues& values);

// The plan of one call: every check the shapes, dtypes, layout and flags decide, run once, and
// what they decide. For callers that allocate from it and then launch (the Python auto-dispatch
// recording): fia_plan() once, the outputs and the workspace from it, then the `.out` overload
// below, which checks only what the plan cannot know (the outputs, the workspace, the host
// values). The plan keeps copies of the arguments (tensors share their storage).
class FiaPlan {
 public:
  const Shape& out_shape() const;  // attention_out
  DType out_dtype() const;         // the query's dtype, int8 with quant_scale2
  const Shape& lse_shape() const;  // softmax_lse with softmax_lse_flag
  std::int64_t workspace_bytes() const;

  FiaPlan(FiaPlan&&) noexcept;
  FiaPlan& operator=(FiaPlan&&) noexcept;
  ~FiaPlan();

  struct State;  // opaque (the op's own)

 private:
  explicit FiaPlan(std::shared_ptr<const State> state);
  friend FiaPlan fia_plan(const Tensor&, const Tensor&, const Tensor&, const FiaOptions&);
  friend void fused_infer_attention_score_out(const FiaPlan&, const Tensor&, const Tensor&,
                                              const Tensor&);
  std::shared_ptr<const State> state_;  // shared with the tasks captured from it
};

FiaPlan fia_plan(const Tensor& query, const Tensor& key, const Tensor& value,
                 const FiaOptions& options);
// The `.out` form of the planned call (the same contract as above).
void fused_infer_attention_score_out(const FiaPlan& plan, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse);

// Workspace for the worst case of these shapes (any host values the shapes allow): a uint8 tensor.
// Inside a capture it comes from the graph's pool, like any allocation.
Tensor fia_max_workspace(const Tensor& query, const Tensor& key, const Tensor& value,
                         const FiaOptions& options);
// The bytes fia_max_workspace allocates. It depends only on the shapes, dtypes, layout and head
// counts (never on host values), so an update within the captured shapes never needs more.
std::int64_t fia_workspace_bytes(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const FiaOptions& options);

// attention_out's shape and dtype, and softmax_lse's shape (with softmax_lse_flag), for these
// arguments (each plans the call; fia_plan() gives all of them from one plan).
Shape fia_output_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                       const FiaOptions& options);
DType fia_output_dtype(const Tensor& query, const Tensor& key, const Tensor& value,
                       const FiaOptions& options);
Shape fia_lse_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                    const FiaOptions& options);

// The kernel identity, for tests and explicit graph building.
const KernelDef& fia_kernel();

}  // namespace npugraph::ops
