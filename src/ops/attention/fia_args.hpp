// FIA host-side checking, shared by fia_layout.cpp (layouts, query/key/value, rope, prefix, paged
// caches), fia_mask.cpp (sparse modes, atten_mask, pse_shift, padding), fia_quant.cpp (antiquant,
// quantised output) and fia_plan.cpp (host values, outputs, the block).
//
// Every message reads "fused_infer_attention_score: <argument> = <value>: <rule>". Message parts are
// only formatted when a check fails, and nothing here allocates for batches up to
// FiaParamBuffer::kInlineBatch, so re-planning a task for an update stays cheap.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "npugraph/error.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention {

inline constexpr const char* kOp = "fused_infer_attention_score: ";

// "[1, 2, 3]" for messages (at most 16 values).
struct ListText {
  const std::vector<std::int64_t>& values;
};
std::ostream& operator<<(std::ostream& os, const ListText& l);

// "float16[1, 32, 1, 128]", or "undefined".
struct TensorText {
  const Tensor& t;
};
std::ostream& operator<<(std::ostream& os, const TensorText& x);

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t align_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Writes t's signature into key.sig[a] (undefined tensors keep the default, rank -1).
void set_sig(FiaShapeKey& key, FiaArg a, const Tensor& t);

// A call under validation: the arguments, and what the checks found so far.
struct FiaCall {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const FiaOptions& o;
  FiaShapeKey& key;  // written in place: the launch's block header (or a scratch one)
  FiaLayout in = FiaLayout::bsh, out = FiaLayout::bsh;
  bool token = false;    // TND/NTD
  bool decode = false;   // query S == 1, not TND/NTD
  bool paged = false;
  bool int8_kv = false;
  bool prefix = false;
  bool rope = false;
  bool q_padding = false, kv_padding = false;  // the tensors are given (effective or not)
  DType q_dtype = DType::f32, kv_dtype = DType::f32;
  std::int64_t key_s = 0;  // the key's S (or T) dimension; 0 when paged
};

// fia_layout.cpp: layout, heads, dtypes and the shapes of query, key, value, query_rope, key_rope,
// the shared prefix and the paged caches (block_table's shape and block_size included).
void check_core_shapes(FiaCall& c);
// attention_out's and softmax_lse's shapes (after check_core_shapes).
Shape output_shape(const FiaCall& c);
Shape lse_shape(const FiaCall& c);
// The views of query, key, value, rope, prefix and attention_out (Note [FIA views]).
void make_core_views(const FiaCall& c, const Tensor& attention_out, FiaParams& p);

// The band of sparse_mode for these options (before clamping): pre', next' and whether they are
// anchored bottom right. Decode: unbounded.
struct FiaBand {
  std::int64_t pre = kBandLimit, next = kBandLimit;
  bool anchor = false;
};
FiaBand resolve_band(const FiaCall& c);

// fia_mask.cpp: sparse_mode, inner_precise, atten_mask, pse_shift and the padding tensors' shapes.
void check_mask_shapes(FiaCall& c);
// Checks what depends on host values too (mask/pse extents against the lengths, the padding
// tensors' contents), writes the band, the mask/pse views and the padding pointers, and returns
// the band (before clamping).
FiaBand finish_mask(const FiaCall& c, const std::int64_t* actual_q, const std::int64_t* actual_kv,
                 std::int64_t prefix_len, FiaParams& p);

// fia_quant.cpp: antiquant parameters and the quantised output (dtypes and shapes); writes their
// views into p.
void check_quant_shapes(FiaCall& c, FiaParams& p);
// Host-value checks of the quantised output (rows a band would leave empty).
void finish_quant(const FiaCall& c, const FiaBand& band, const std::int64_t* actual_q,
                  const std::int64_t* actual_kv, std::int64_t prefix_len);

// Shared checks.
void check_defined(const Tensor& t, const char* name);
void check_same_device(const Tensor& t, const char* name, const Tensor& q);

}  // namespace npugraph::ops::attention
