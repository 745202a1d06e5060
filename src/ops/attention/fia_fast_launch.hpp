// The host side of the fast FIA kernels (fia_fast_decode.cpp, fia_fast_prefill.cpp): everything
// about one launch that is not SIMD — the resolved lengths, where a query row sits and which KV
// columns it sees, where a run of KV columns lives (contiguous, shared prefix, paged blocks), how
// a finished row is written — and the entry point that picks decode or prefill.
//
// Note [FIA fast kernels]
// `fast` mode (fia_kernel_mode.hpp) runs these kernels; fia_fast_kernel() returns false for the
// few launches they do not cover, which the simple kernel then runs (fia_fast_covers()):
//   - int8 key/value with a key rope, or with an antiquant parameter that varies along both the
//     token and the channel (no torch_npu mode does; only hand-made views could);
//   - a key/value/rope/prefix tensor whose D stride is not 1 (every layout has D innermost; only
//     hand-made strided views hit this).
// int8 key/value is dequantised in registers as it is loaded, (x + offset) * scale as the simple
// kernel does: a per-channel parameter (modes 0, 2: constant along the tokens) is read once per
// run into float32 vectors, a per-token one (modes 1, 3-5: constant along D) as one float per row
// (DqRun).
// Both kernels compute query rows against runs of at most kFastChunk KV columns: the run's keys
// are converted to float32 once into a tile (keys and key rope side by side, so q·k + q_r·k_r is
// one dot) while the next run is prefetched, Q·K is register-blocked (4 rows x 4 columns with 32
// vector registers, 4 x 2 otherwise; four horizontal sums folded into one), masked/out-of-band/pse
// handled per row, exp is Highway's vectorised Exp, and P·V is register-blocked (4 rows x 4 or 2
// vectors). A run that no row of the unit can see is never read (causal, band, sparse modes 2-4,
// ragged lengths). Units of at most kDirectRows query rows (decode at GQA groups up to 4, with no
// rope and D a multiple of the vector) skip the tiles: they load and convert K and V in
// registers inside the Q·K and P·V loops (4 columns x up to 4 rows; P·V 4 vectors x up to 4 rows)
// and prefetch the next run's keys while scoring and its values while accumulating, so that the
// prefetches are spread over the whole chunk rather than issued in bursts during conversions.
// (Decode f16 group 1, 32 heads, 4,096 tokens: 1.6x the tile path's speed on the loaded 2-core
// machine, where the tile path left the bus idle between bursts.) With more rows, each converted
// tile serves enough rows that converting once wins.
//   - Decode (query S <= kDecodeMaxSeq, not TND/NTD): a unit is (batch, KV head, KV split) and
//     serves every query row of that KV head's GQA group (group x S rows) from one read of its
//     K/V slice; its partial states go to the workspace and a merge pass combines the splits of
//     each row in split order (flash-decoding).
//   - Prefill: a unit is (batch, KV head, a tile of query positions) x the group's heads; it
//     streams the columns its rows can see and writes its rows directly.
// Determinism: the units, the splits and every unit's operation order are functions of the shape
// key, the lengths and ctx.num_threads() only; units are handed to threads dynamically, but a
// unit's result does not depend on which thread runs it (Note [FIA workspace]).
#pragma once

#include <cstdint>

#include "npugraph/dtype.hpp"
#include "npugraph/kernel.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention::fast {

// A query row: batch b, head n, S index s (TND/NTD: the token), logical row i, and the visible
// KV columns [lo, hi) (empty when the row is not valid).
struct Row {
  std::int64_t b = 0, n = 0, s = 0, i = 0, lo = 0, hi = 0;
  bool active() const { return lo < hi; }
};

// A run of consecutive KV columns stored at a fixed row stride (elements) for key, key rope and
// value of one KV head.
struct KvRun {
  const std::byte* k = nullptr;
  const std::byte* kr = nullptr;
  const std::byte* v = nullptr;
  std::int64_t k_stride = 0, kr_stride = 0, v_stride = 0;
  std::int64_t len = 0;
  // int8 KV: the antiquant parameters' (b, s) coordinates of the run's first row and the s step
  // per row (the simple kernel's rule: (block, row) in the paged modes 4/5, else (batch, token)).
  std::int64_t dq_o = 0, dq_s = 0, dq_step = 0;
};

// An antiquant parameter pair (scale, optional offset) of key or value.
struct Dequant {
  FiaView scale, offset;
  DType scale_t = DType::f32, offset_t = DType::f32;
  // True when the parameters are constant along the tokens (one value per channel), false when
  // they are constant along D (one value per token); fia_fast_covers() refuses the rest.
  bool per_channel() const { return scale.stride[3] != 0 || offset.stride[3] != 0; }
};

// The antiquant parameters of one run as float32 (kFastChunk rows x D channels at most):
// per-channel, scale[d] and offset[d]; per-token, scale[c] and offset[c] of row c.
struct DqRun {
  alignas(64) float scale[kMaxHeadDim + kFastPad];
  alignas(64) float offset[kMaxHeadDim + kFastPad];
  const std::byte* loaded = nullptr;  // per-channel: the scale element the arrays were read from
};

struct Launch {
  const FiaParams& p;
  const FiaShapeKey& key;
  const std::int64_t* aq;
  const std::int64_t* akv;
  const std::int64_t* q_start;
  const std::int64_t* kv_start;
  std::int64_t group = 1;    // query heads per KV head
  std::int64_t q_pad = -1;   // effective left padding, or -1
  std::int64_t kv_pad = -1;
  bool token = false;        // TND/NTD
  DType q_t = DType::f32, kv_t = DType::f32, pse_t = DType::f32, out_scale_t = DType::f32;
  Dequant kdq, vdq;        // int8 KV only
  bool dq_paged = false;   // antiquant modes 4/5: parameters indexed by (block, row)
  std::byte* base = nullptr;  // the workspace, aligned to kWorkspaceAlign

  Launch(const FiaParams& params, const std::int64_t* tail);

  std::int64_t lkv(std::int64_t b) const { return p.prefix_len + akv[b]; }
  // The first query S index of batch b's valid rows (non-token layouts).
  std::int64_t q_first(std::int64_t b) const {
    return q_pad >= 0 ? key.q_seq - q_pad - aq[b] : 0;
  }
  Row row(std::int64_t b, std::int64_t n, std::int64_t s) const;
  // The run holding KV column j of batch b, KV head h, cut to at most `max_len` columns.
  KvRun run_at(std::int64_t b, std::int64_t h, std::int64_t j, std::int64_t max_len) const;

  // Query row (b, n, s) as float32: q (Dk) then q_rope (Dr), zero-padded to `padded` floats.
  void load_q(const Row& r, float* dst, std::int64_t padded) const;
  // Adds pse and applies the full mask to the scores of columns [j0, j0 + n) of row r.
  void bias(const Row& r, std::int64_t j0, std::int64_t n, float* score) const;
  // Reads the antiquant parameters of `cols` rows of run `r` (KV head h, D channels) into `out`.
  void dequant(const Dequant& q, const KvRun& r, std::int64_t h, std::int64_t cols,
               std::int64_t D, DqRun& out) const;
  // Writes a finished row: out = acc / sum, lse = max + log(sum); an empty state (max = -inf)
  // writes zeros and lse = +inf.
  void finish(const Row& r, const float* acc, float max, float sum) const;

 private:
  std::int64_t block_id(std::int64_t b, std::int64_t index) const;
};

// True when the fast kernels cover this launch (Note [FIA fast kernels]).
bool fia_fast_covers(const FiaParams& p);

// Runs the launch on the fast kernels; false (nothing written) when they do not cover it.
bool fia_fast_kernel(const FiaParams& p, const std::int64_t* tail, const ExecContext& ctx);

// The per-target entry points (fia_fast_decode.cpp, fia_fast_prefill.cpp).
void run_fast_decode(const Launch& l, const ExecContext& ctx);
void run_fast_prefill(const Launch& l, const ExecContext& ctx);

}  // namespace npugraph::ops::attention::fast
