// fused_infer_attention_score (FIA): the attention operator of the seed example (DESIGN §4), with
// torch_npu's full argument set.
//
//   auto [out, lse] = ng::ops::fused_infer_attention_score(q, k, v, {.num_heads = 32,
//                                                                  .input_layout = "BNSD"});
//
// All entry points are asynchronous on the current stream: they validate and plan on the host, then
// issue one kernel launch whose parameter block carries everything an update may change, so a
// captured FIA task can be re-parameterised by a task update (DESIGN §3.5, §3.6).
//
// Math, per batch b, query head n, KV head n / (N / KV_N), valid query row i, visible KV column j:
//   s = scale * (q_i . k_j + q_rope_i . k_rope_j) + pse[i, j];   p = softmax over visible j;
//   out_i = sum_j p_j v_j;   lse_i = log(sum_j exp(s_j - max)) + max   (float32 throughout).
//
// Layouts (input_layout; "X_Y" reads query/key/value in X and writes attention_out in Y):
//   BSH [B, S, H] (D = H / num_heads; key/value H = num_key_value_heads * D), BSND [B, S, N, D],
//   BNSD [B, N, S, D], NSD [N, S, D] (one batch), TND [T, N, D], NTD [N, T, D];
//   outputs BNSD_BSND, BSH_BNSD, BSND_BNSD, NTD_TND, TND_NTD, BSH_NBSD, BSND_NBSD, BNSD_NBSD
//   (NBSD = [N, B, S, D]). key and value share the layout; value's D may differ from query/key's D,
//   attention_out's D is value's. TND/NTD: B = the number of actual_seq_lengths values, which are
//   cumulative (batch b owns tokens [len[b-1], len[b]) of T), and so are actual_seq_lengths_kv
//   (tokens of key's T) unless the KV is paged (then they are per-batch lengths).
//   Choices: NSD is [N, S, D] with B = 1 (torch_npu does not document it); the output forms are
//   accepted for every query S (torch_npu restricts some of them to S > 1 or S <= 16); softmax_lse
//   is [T, N, 1] for every TND/NTD input form.
//
// Rows and columns:
//   - actual_seq_lengths / actual_seq_lengths_kv (BSH/BSND/BNSD/NSD): empty = the S dimension,
//     1 value broadcasts, >= B values use the first B; others are errors; values <= S (kv: <= the
//     paged capacity block_table.size(1) * block_size instead).
//   - decode (query S == 1, not TND/NTD) ignores actual_seq_lengths (count and sign still checked),
//     pre_tokens, next_tokens, sparse_mode and query_padding_size.
//   - left padding: with query_padding_size (int64, 1 element, < 0 read as 0) and
//     actual_seq_lengths given, batch b's valid rows are [S - pad - len[b], S - pad); the same for
//     kv_padding_size with actual_seq_lengths_kv. Without the lengths the padding is ignored, as in
//     torch_npu. A start < 0 is an error (torch_npu: "undefined result"), raised by the op and again
//     by the kernel, which reads the padding tensors when it runs.
//   - row i and column j are logical (0 = the first valid row / column) for the band, atten_mask
//     and pse_shift. With a shared prefix of P tokens the columns are the P prefix tokens followed
//     by the key's tokens.
//   - rows past the actual query length are zero-filled (lse +inf); a row with nothing visible
//     (KV length 0, a band or mask that hides every column, every score -inf) gets out = 0 and
//     lse = +inf. NaN inputs give NaN rows.
//
// Masking (sparse_mode; "pre'/next'" is the band j - i <= next', i - j <= pre'):
//   0: no atten_mask: nothing masked, pre/next ignored (torch_npu: "ignored, set to INT_MAX").
//      With a full atten_mask: the band pre/next plus the mask (pre/next ignored under left padding).
//   1: a full atten_mask is required; pre/next ignored.
//   2: top-left causal (j <= i). 3: bottom-right causal (j <= i + Lkv - Lq). 4: band anchored
//      bottom right: pre' = pre - (Lkv - Lq), next' = next + (Lkv - Lq) (sliding window W: pre = W,
//      next = 0). Lq, Lkv are batch b's actual lengths (Lkv includes the shared prefix). Modes 2-4
//      require the compressed mask [2048, 2048] / [1, 2048, 2048] / [1, 1, 2048, 2048], which must be
//      torch_npu's upper-triangular mask: its contents are not read (choice: reading 4 MiB per
//      update would dominate the host path). Other modes are errors.
//   atten_mask: bool, int8 or uint8; nonzero = masked out. Full shapes: query S > 1: [Sq, Skv],
//   [B|1, Sq, Skv], [B|1, 1, Sq, Skv]; decode: [B|1, Skv], [B|1, 1, Skv], [B|1, 1, 1, Skv]; each
//   Sq/Skv may exceed the need (torch_npu pads them to 16/32); Skv must cover the shared prefix plus
//   the key (paged: the blocks the actual lengths use). TND/NTD take no full mask (modes 0 without
//   a mask, 2, 3, 4 only) and no pse_shift.
//   pse_shift: the query's dtype, [B|1, N, Sq, Skv] (decode: [B|1, N, 1, Skv]), added after scaling
//   and before masking.
//   inner_precise: 0-3 (0-1 for decode); computation is always float32 and fully masked rows always
//   give 0 (torch_npu's "row invalid" correction), so the value only gets validated.
//
// Paged KV (block_table, block_size): block_table int32 [B, max_blocks]; key/value are caches
// [blocks, block_size, KV_N * D] or [blocks, KV_N, block_size, D] (any input layout); token t of
// batch b is row t % block_size of block block_table[b][t / block_size]. actual_seq_lengths_kv is
// required. block_size: decode (or with rope) a positive multiple of 16 (32 for int8 KV), otherwise
// a multiple of 128 in [128, 512]. The ids a call uses must lie in [0, blocks): the op reads the
// table on the host and the kernel checks every id it reads (a bad id in a replay is a task error,
// never a wild read). Not with left padding, a shared prefix, or int8 KV when query S > 1.
//
// Antiquant (int8 key and value, dequantised as (x + offset) * scale in float32):
//   - combined antiquant_scale / antiquant_offset (index 0 = key, 1 = value), antiquant_mode
//     0: per-tensor [2] or per-channel [2, KV_N, 1, D] / [2, KV_N, D] / [2, H] in the query's dtype
//     (needs D of key == D of value); 1: per-token [2, B, Skv] float32.
//   - separate key_/value_antiquant_scale/_offset (they win over the combined ones, as in
//     torch_npu), key_/value_antiquant_mode equal except key 0 with value 1:
//     0 per-tensor [1] or per-channel [KV_N, 1, D] / [KV_N, D] / [H] / [1, KV_N, 1, D] / [1, KV_N, D]
//       / [1, H] (query's dtype or float32); 1 per-token [B, Skv] / [1, B, Skv] float32;
//     2 per-tensor per-head [KV_N]; 3 per-token per-head [B, KV_N, Skv] float32; 4 per-token in
//     pages [blocks, block_size] float32; 5 per-token per-head in pages [blocks, KV_N, block_size]
//     float32 (4 and 5 need paged KV; modes 2-5 need query S == 1, as in torch_npu).
//   - an offset is optional (symmetric), needs its scale, and has its scale's shape and dtype.
//   Per-token modes index the key's S position (paged modes 1/3: the token's position t).
//   Not with TND/NTD, rope, or per-token parameters together with a shared prefix.
//
// Quantised output: quant_scale2 (float32; bfloat16 too when the query is bfloat16) and the
// optional quant_offset2 (its shape and dtype), per-tensor (1 element) or per-channel (N * Dv
// elements, contiguous, channel n * Dv + d) make attention_out int8:
// saturate(round_half_even(out * scale2 + offset2)), from the float32 result; rows that are empty
// (zero-filled or nothing visible) are 0. Rejected as in torch_npu: per-channel with left padding;
// sparse_mode 4 with negative pre/next; quant_offset2 when a band leaves a valid row empty.
// dequant_scale1 / quant_scale1 / dequant_scale2 belong to an int8 query (full quantisation),
// which has no CPU implementation: passing them (or an int8 query) is an error.
//
// Shared prefix: key_shared_prefix / value_shared_prefix (both or neither; the key's layout with
// B = 1 and the key's dtype; value's D) are prepended to every batch's KV; actual_shared_prefix_len
// (empty = the prefix S, else 1 value in [0, S]). Not with paged KV, left padding, TND/NTD or rope.
//
// Rope (MLA): query_rope and key_rope, both or neither: the query's / key's shape (paged form too)
// with their own D, the query's / key's dtype (float KV only). key_rope_antiquant_scale is reserved
// by torch_npu and must be undefined.
//
// softmax_lse: float32 [B, N, Sq, 1] ([T, N, 1] for TND/NTD) when softmax_lse_flag; the eager form
// returns a 1-element float32 0 otherwise, and the `.out` form leaves the caller's tensor untouched.
//
// Update rules (task update, DESIGN §3.5): an update may change the host values (actual lengths,
// actual_shared_prefix_len, scale, pre/next tokens) and point any tensor argument at other memory of
// the same shape and dtype (e.g. another block_table). It may not change input_layout, num_heads,
// num_key_value_heads, sparse_mode, inner_precise, block_size, the antiquant modes,
// softmax_lse_flag, TND/NTD's batch count, or any tensor's presence, shape or dtype. Tensors are
// read when the kernel runs (a replay sees the block_table's and padding's current contents).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// Keyword arguments, with torch_npu's names, order and defaults. An undefined Tensor is None.
struct FiaOptions {
  Tensor pse_shift;
  Tensor atten_mask;
  std::vector<std::int64_t> actual_seq_lengths;     // query lengths (host values)
  std::vector<std::int64_t> actual_seq_lengths_kv;  // key/value lengths (host values)
  Tensor dequant_scale1;  // int8 query only: rejected
  Tensor quant_scale1;    // int8 query only: rejected
  Tensor dequant_scale2;  // int8 query only: rejected
  Tensor quant_scale2;
  Tensor quant_offset2;
  Tensor antiquant_scale;
  Tensor antiquant_offset;
  Tensor block_table;
  Tensor query_padding_size;
  Tensor kv_padding_size;
  Tensor key_antiquant_scale;
  Tensor key_antiquant_offset;
  Tensor value_antiquant_scale;
  Tensor value_antiquant_offset;
  Tensor key_shared_prefix;
  Tensor value_shared_prefix;
  std::vector<std::int64_t> actual_shared_prefix_len;  // host value: empty or 1 value
  Tensor query_rope;
  Tensor key_rope;
  Tensor key_rope_antiquant_scale;  // reserved: must be undefined
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
};

struct FiaResult {
  Tensor attention_out;  // the output layout; the query's dtype (int8 with quant_scale2)
  Tensor softmax_lse;    // float32 (see the header comment), or a 1-element float32 0
};

// Eager form: allocates the outputs and a workspace, launches on the current stream.
FiaResult fused_infer_attention_score(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const FiaOptions& options);

// `.out` form: writes `attention_out` (and `softmax_lse` when softmax_lse_flag; it is left untouched
// otherwise) using the caller's `workspace`, which must hold at least fia_workspace_bytes() bytes.
//   attention_out: fia_output_shape() and the output dtype, contiguous;
//   softmax_lse:   with softmax_lse_flag, float32 fia_lse_shape() contiguous; without it, any
//                  defined tensor (it is not touched);
//   workspace:     uint8, contiguous.
// No output may overlap an input or another output.
void fused_infer_attention_score_out(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const FiaOptions& options, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse);

// Workspace for the worst case of these shapes (any host values the shapes allow): a uint8 tensor.
// Inside a capture it comes from the graph's pool, like any allocation.
Tensor fia_max_workspace(const Tensor& query, const Tensor& key, const Tensor& value,
                         const FiaOptions& options);
// The bytes fia_max_workspace allocates. It depends only on the shapes, dtypes, layout and head
// counts (never on host values), so an update within the captured shapes never needs more.
std::int64_t fia_workspace_bytes(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const FiaOptions& options);

// attention_out's shape and softmax_lse's shape (with softmax_lse_flag) for these arguments.
Shape fia_output_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                       const FiaOptions& options);
Shape fia_lse_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                    const FiaOptions& options);

// The kernel identity, for tests and explicit graph building.
const KernelDef& fia_kernel();

}  // namespace npugraph::ops
