// fused_infer_attention_score (FIA): the attention operator of the seed example (DESIGN §4).
//
//   auto [out, lse] = ng::ops::fused_infer_attention_score(q, k, v, {.num_heads = 32,
//                                                                  .input_layout = "BNSD"});
//
// All entry points are asynchronous on the current stream: they validate and plan on the host, then
// issue one kernel launch whose parameter block carries everything an update may change (the actual
// lengths, the scale, pre/next tokens), so a captured FIA task can be re-parameterised by a task update.
//
// What this version supports (later issues add the rest of DESIGN §4):
//   - layouts BSH, BSND, BNSD (for BSH, D = H / num_heads; key/value H = num_key_value_heads * D);
//   - query, key and value all float32, all float16 or all bfloat16; accumulation in float32;
//   - GQA: num_key_value_heads divides num_heads, ratio <= 64; num_heads <= 256; D <= 512;
//   - sparse_mode 0 without a mask: column j is visible from row i iff j - i <= next_tokens and
//     i - j <= pre_tokens; sparse_mode 1..4, inner_precise != 0 and block_size != 0 (paged KV) are
//     rejected as not supported yet;
//   - decode (query S == 1) ignores actual_seq_lengths (their count and sign are still checked),
//     pre_tokens, next_tokens and sparse_mode (any of 0..4).
//
// Rows and softmax_lse:
//   - a valid row (i < actual query length) with at least one visible column gets
//     out = softmax(scale * q k^T) v and lse = log(sum(exp(s - max))) + max;
//   - a valid row with nothing visible (actual KV length 0, or a pre/next band that misses every
//     column, or every visible score -inf) gets out = 0 and lse = +inf;
//   - rows past the actual query length are zero-filled, and their lse is +inf as well.
//
// Update rules (task update, DESIGN §3.5): an update may change the actual lengths, the scale, pre/next
// tokens and the tensors' addresses and strides; it may not change a tensor shape, the dtype, the
// layout, num_heads, num_key_value_heads or softmax_lse_flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// Keyword arguments, with torch_npu's names and defaults.
struct FiaOptions {
  std::vector<std::int64_t> actual_seq_lengths;     // query lengths: 1 value broadcasts, else >= B
  std::vector<std::int64_t> actual_seq_lengths_kv;  // key/value lengths: same rule
  std::int64_t num_heads = 1;
  double scale = 1.0;
  std::int64_t pre_tokens = 2147483647;
  std::int64_t next_tokens = 2147483647;
  std::string input_layout = "BSH";  // BSH, BSND, BNSD
  std::int64_t num_key_value_heads = 0;  // 0: same as num_heads
  std::int64_t sparse_mode = 0;
  std::int64_t inner_precise = 0;
  std::int64_t block_size = 0;
  bool softmax_lse_flag = false;
};

struct FiaResult {
  Tensor attention_out;  // the query's layout and dtype
  Tensor softmax_lse;    // float32 (B, N, Sq, 1) when softmax_lse_flag, else a 1-element float32 0
};

// Eager form: allocates the outputs and a workspace, launches on the current stream.
FiaResult fused_infer_attention_score(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const FiaOptions& options);

// `.out` form: writes `attention_out` (and `softmax_lse` when softmax_lse_flag; it is left untouched
// otherwise) using the caller's `workspace`, which must hold at least fia_workspace_bytes() bytes.
//   attention_out: the query's shape and dtype, contiguous;
//   softmax_lse:   with softmax_lse_flag, float32 (B, N, Sq, 1) contiguous; without it, any defined
//                  tensor (it is not touched);
//   workspace:     uint8, contiguous.
// No output may overlap an input or another output.
void fused_infer_attention_score_out(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const FiaOptions& options, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse);

// Workspace for the worst case of these shapes (any actual lengths the shapes allow): a uint8 tensor.
// Inside a capture it comes from the graph's pool, like any allocation.
Tensor fia_max_workspace(const Tensor& query, const Tensor& key, const Tensor& value,
                         const FiaOptions& options);
// The bytes fia_max_workspace allocates. It depends only on the shapes, dtypes, layout and head
// counts (never on actual lengths, scale or pre/next), so an update never needs more than a capture.
std::int64_t fia_workspace_bytes(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const FiaOptions& options);

// The kernel identity, for tests and explicit graph building.
const KernelDef& fia_kernel();

}  // namespace npugraph::ops
