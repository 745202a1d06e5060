// A deliberately simple reference for fused_infer_attention_score: straight loops, fp64 everywhere,
// its own index formulas per layout and per parameter shape, decided column by column. It shares no
// code with the kernel (it does not even use npugraph's tensors), so the parity tests compare two
// independent implementations of the semantics written down in npugraph/ops/fia.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fia_test {

// An optional tensor argument: its values (row-major) and shape; empty shape = None.
struct RefTensor {
  std::vector<double> values;
  std::vector<std::int64_t> shape;
  bool given() const { return !shape.empty(); }
};

struct RefArgs {
  std::string layout = "BSH";  // input_layout, including the "_Y" output forms
  std::int64_t B = 1, N = 1, KVN = 1;
  std::int64_t Sq = 1, Skv = 1;  // S dims; TND/NTD: the T dims of query and key
  std::int64_t Dk = 1, Dv = 0, Dr = 0;  // Dv 0: Dk
  double scale = 1.0;
  std::int64_t pre_tokens = 2147483647, next_tokens = 2147483647, sparse_mode = 0;
  std::vector<std::int64_t> actual_seq_lengths, actual_seq_lengths_kv;
  RefTensor atten_mask, pse_shift;  // compressed masks: any given tensor (contents unused)
  // Paged KV: block_table [B, max_blocks] row-major; caches [blocks, bs, KVN*D] or
  // [blocks, KVN, bs, D].
  std::vector<std::int64_t> block_table;
  std::int64_t max_blocks = 0, block_size = 0, num_blocks = 0;
  bool cache_4d = false;
  std::optional<std::int64_t> query_padding_size, kv_padding_size;
  // Antiquant (int8 key/value values given as integers).
  RefTensor antiquant_scale, antiquant_offset;
  std::int64_t antiquant_mode = 0;
  RefTensor key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
      value_antiquant_offset;
  std::int64_t key_antiquant_mode = 0, value_antiquant_mode = 0;
  // Quantised output.
  RefTensor quant_scale2, quant_offset2;
  // Shared prefix, layout as the key with B = 1.
  std::vector<double> key_shared_prefix, value_shared_prefix;
  std::int64_t prefix_seq = 0;
  std::vector<std::int64_t> actual_shared_prefix_len;
  // learnable_sink: one logit per query head [N], unscaled, unmasked, without a value; empty = None.
  std::vector<double> learnable_sink;
};

struct RefInputs {
  std::vector<double> q, k, v, q_rope, k_rope;
};

struct RefResult {
  std::vector<double> out;  // the output layout, contiguous (int8 values when quantised)
  std::vector<double> lse;  // (B, N, Sq) or (T, N); +inf for empty rows (the sink with a sink)
};

RefResult fia_reference(const RefArgs& a, const RefInputs& in);

// Index of element (b, n, s, d) in a contiguous tensor of `layout` (BSH, BSND, BNSD, NSD, TND,
// NTD, NBSD) with B batches, `heads` heads, `seq` rows (TND/NTD: tokens) and D.
std::int64_t ref_index(const std::string& layout, std::int64_t B, std::int64_t heads,
                       std::int64_t seq, std::int64_t D, std::int64_t b, std::int64_t n,
                       std::int64_t s, std::int64_t d);

}  // namespace fia_test
