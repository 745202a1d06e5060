// FiaLaunch: one FIA launch as both CPU kernels see it (the simple kernel in fia_kernel_simple.cpp,
// the fast kernels behind fia_fast.hpp).
//
// Note [FIA launch view]
// The kernel entry (fia_cpu_kernel, fia_launch.cpp) decodes the parameter block once into a FiaLaunch, and every
// kernel reads the launch through it only: the resolved lengths and starts (the tail), where a
// query row's valid rows start and which KV columns it sees (its band), where a KV column lives
// (shared prefix, contiguous key with its left padding or TND/NTD start, a paged block checked
// against the cache), the antiquant parameters of int8 key/value and their coordinates, and how a
// finished row is written. So each of these rules exists once, and the simple kernel cross-checks
// the fast ones on the same decoded launch.
//
// Note [FIA learnable sink]
// learnable_sink (torch_npu v2; gpt-oss style attention sinks) adds, to every valid row of query
// head n, one logit sink[n] that is neither scaled nor masked and has no value vector:
//   p_j = exp(s_j - m) / (exp(sink - m) + sum_j exp(s_j - m)),  m = max(sink, max_j s_j),
//   out = sum_j p_j v_j,  lse = m + log(exp(sink - m) + sum_j exp(s_j - m)).
// Every kernel path (simple, fast decode direct/tiles with their split merge, fast prefill) ends a
// row in FiaLaunch::finish with the row's online-softmax state over its columns, after the splits
// are merged; finish merges that state with the one-column state {max = sink, sum = 1} (acc gets the
// merge's factor, the sink adds nothing to it). So the sink is counted exactly once per row, in
// one place, whatever path ran, and the kernels' loops are untouched. A valid row with no visible
// column (an empty state) gets out = 0 and lse = sink; rows past the actual query length are not
// rows at all and keep out = 0, lse = +inf; a -inf sink is no sink; a NaN sink makes its rows NaN.
//
// Safety: the tensors the block points at are read when the task runs, so the launch re-checks
// what their contents decide: every block id read from block_table and the left-padding starts. A
// violation is a TaskError, never an out-of-bounds read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention {

// A query row: batch b, head n, S index s (TND/NTD: the token), logical row i, and the visible
// KV columns [lo, hi) (empty when the row is not valid). No member initializers: the fast kernels
// keep kMaxUnitRows of them on the stack per unit, and zeroing those 12 KB cost more than the
// whole unit for short KV (write `Row r{}` for a zeroed one).
struct Row {
  std::int64_t b, n, s, i, lo, hi;
  bool active() const { return lo < hi; }
};

// Where logical KV column j of a batch lives, and how many columns from j on live there at a
// fixed row stride (a run: it never crosses the shared prefix's end, a paged block or the batch's
// KV length).
struct KvPos {
  bool prefix = false;     // in key_shared_prefix / value_shared_prefix
  std::int64_t outer = 0;  // batch (contiguous KV, 0 for the prefix) or block id (paged)
  std::int64_t row = 0;    // the S index in the prefix / key tensor, or the row in the block
  std::int64_t len = 0;    // columns of the run, at most the max_len asked for
  // int8 KV: the antiquant parameters' (b, s) coordinates of column j (the next column of the run
  // is s + 1): (block, row) in the paged modes 4/5, else (batch, token position), where the
  // position is the tensor row for a contiguous cache and the logical token for a paged one.
  std::int64_t dq_o = 0, dq_s = 0;
};

// An antiquant parameter pair (scale, optional offset) of key or value.
struct Dequant {
  FiaView scale, offset;
  DType scale_t = DType::f32, offset_t = DType::f32;
  // True when the parameters are constant along the tokens (one value per channel), false when
  // they are constant along D (one value per token).
  bool per_channel() const { return scale.stride[3] != 0 || offset.stride[3] != 0; }
};

class FiaLaunch {
 public:
  // Decodes a parameter block (any alignment); throws TaskError when it is not an FIA block, or
  // when a padding tensor's current value makes a batch's valid rows start before 0.
  FiaLaunch(const void* params, std::size_t size);
  FiaLaunch(const FiaLaunch&) = delete;
  FiaLaunch& operator=(const FiaLaunch&) = delete;

  const FiaParams& p;     // the header
  const FiaShapeKey& key;
  const std::int64_t* aq = nullptr;        // actual query lengths [B]
  const std::int64_t* akv = nullptr;       // actual KV lengths [B] (without the prefix)
  const std::int64_t* q_start = nullptr;   // TND/NTD: first query token of batch b, else 0
  const std::int64_t* kv_start = nullptr;  // TND/NTD: first KV token of batch b, else 0
  std::int64_t group = 1;    // query heads per KV head
  std::int64_t q_pad = -1;   // effective left padding (>= 0), or -1
  std::int64_t kv_pad = -1;
  bool token = false;        // TND/NTD
  bool paged = false;        // paged KV cache
  DType q_t = DType::f32, kv_t = DType::f32, pse_t = DType::f32, out_scale_t = DType::f32,
        sink_t = DType::f32;
  Dequant kdq, vdq;          // int8 KV only
  bool dq_paged = false;     // antiquant modes 4/5: parameters indexed by (block, row)
  std::byte* base = nullptr;  // the workspace, aligned to kWorkspaceAlign

  // Batch b's KV columns: the shared prefix's actual length plus its actual KV length.
  std::int64_t lkv(std::int64_t b) const { return p.prefix_len + akv[b]; }
  // The first query S index of batch b's valid rows (TND/NTD: its first token).
  std::int64_t q_first(std::int64_t b) const {
    if (token) return q_start[b];
    return q_pad >= 0 ? key.q_seq - q_pad - aq[b] : 0;
  }
  // The key tensor row holding batch b's first key token (contiguous KV: its left padding or
  // TND/NTD start).
  std::int64_t kv_first(std::int64_t b) const {
    if (token) return kv_start[b];
    return kv_pad >= 0 ? key.kv_seq - kv_pad - akv[b] : 0;
  }

  // Query row (b, n, s) and its band: columns j with i - pre <= j - shift <= i + next, where
  // shift = lkv - lq when the band is anchored bottom right, within [0, lkv).
  Row row(std::int64_t b, std::int64_t n, std::int64_t s) const {
    Row r{};
    r.b = b;
    r.n = n;
    r.s = s;
    const std::int64_t i = s - q_first(b);
    r.i = i;
    if (i < 0 || i >= aq[b]) return r;  // lo = hi = 0: inactive
    const std::int64_t l = lkv(b);
    const std::int64_t shift = key.anchor ? l - aq[b] : 0;
    r.lo = std::max<std::int64_t>(0, i + shift - p.pre_tokens);
    r.hi = std::min<std::int64_t>(l, i + shift + p.next_tokens + 1);
    if (r.lo >= r.hi) r.lo = r.hi = 0;
    return r;
  }

  // KV column j (< lkv(b)) of batch b and the run from it, at most max_len columns.
  KvPos kv_at(std::int64_t b, std::int64_t j, std::int64_t max_len) const {
    KvPos r;
    if (j < p.prefix_len) {
      r.prefix = true;
      r.row = j;
      r.len = std::min(max_len, p.prefix_len - j);
      r.dq_o = b;
      r.dq_s = j;
    } else {
      const std::int64_t t = j - p.prefix_len;
      if (paged) {
        r.outer = block_id(b, t / key.block_size);
        r.row = t % key.block_size;
        r.len = std::min(max_len, key.block_size - r.row);
        r.dq_o = dq_paged ? r.outer : b;
        r.dq_s = dq_paged ? r.row : t;
      } else {
        r.outer = b;
        r.row = kv_first(b) + t;
        r.len = max_len;
        r.dq_o = b;
        r.dq_s = r.row;
      }
    }
    r.len = std::min(r.len, lkv(b) - j);
    return r;
  }

  // Writes a finished row: out = acc / sum, lse = max + log(sum) (int8 output: quantised with
  // quant_scale2/quant_offset2); an empty state (max = -inf, or acc null) writes zeros and
  // lse = +inf. With learnable_sink, a valid row's state first takes in the sink (Note [FIA
  // learnable sink]).
  void finish(const Row& r, const float* acc, float max, float sum) const;

  // Whether (b, s) is one of batch b's valid query rows (s: the S index, or the token of TND/NTD).
  bool valid_row(std::int64_t b, std::int64_t s) const {
    const std::int64_t i = s - q_first(b);
    return i >= 0 && i < aq[b];
  }

 private:
  // The block id of batch b's block `index`, checked against the cache.
  std::int64_t block_id(std::int64_t b, std::int64_t index) const {
    const auto* table = static_cast<const std::int32_t*>(p.block_table.data);
    const std::int64_t id = table[b * p.block_table.stride[0] + index * p.block_table.stride[2]];
    if (id < 0 || id >= key.num_blocks) [[unlikely]]
      bad_block_id(b, index, id);
    return id;
  }
  [[noreturn]] void bad_block_id(std::int64_t b, std::int64_t index, std::int64_t id) const;

  FiaParams header_;  // copied out: the block's storage need not be aligned
  std::int64_t local_[kFiaTailArrays * FiaParamBuffer::kInlineBatch];
  std::vector<std::int64_t> heap_;  // the tail of larger batches
};

// The simple kernel (fia_kernel_simple.cpp); the fast ones are declared in fia_fast.hpp.
void run_simple_kernel(const FiaLaunch& l, const ExecContext& ctx);

}  // namespace npugraph::ops::attention
