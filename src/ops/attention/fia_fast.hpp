// The fast FIA kernels (fia_fast_decode.cpp, fia_fast_prefill.cpp, their SIMD core
// fia_simd-inl.h): the runs of KV columns they stream, the launch's inputs as float32, and which
// launches they cover. They read the launch through FiaLaunch (Note [FIA launch view]).
//
// Note [FIA fast kernels]
// `fast` mode (fia_kernel_mode.hpp) runs these kernels; fia_fast_covers() is false for the few
// launches they do not cover, which the simple kernel then runs (counted as FiaPath::fallback):
//   - int8 key/value with a key rope, or with an antiquant parameter that varies along both the
//     token and the channel (no torch_npu mode does; only hand-made views could);
//   - a key/value/rope/prefix tensor whose D stride is not 1 (every layout has D innermost; only
//     hand-made strided views hit this).
// int8 key/value is dequantised in registers as it is loaded, (x + offset) * scale as the simple
// kernel does: a per-channel parameter (modes 0, 2: constant along the tokens) is read once per
// run into float32 vectors, a per-token one (modes 1, 3-5: constant along D) as one float per row
// (DqRun).
// Both kernels compute a unit's query rows against runs of at most kFastChunk KV columns with one
// run walker (WalkRuns in fia_simd-inl.h), which prefetches the next run while this one is
// computed and never reads a run that no row of the unit can see (causal, band, sparse modes 2-4,
// ragged lengths). Per run it scores, updates the softmax states and accumulates P·V by one of two
// paths:
//   - tiles: the run's keys are converted to float32 once into a tile (keys and key rope side by
//     side, so q·k + q_r·k_r is one dot), Q·K is register-blocked (4 rows x 4 columns with 32
//     vector registers, 4 x 2 otherwise; four horizontal sums folded into one), exp is
//     Highway's vectorised Exp, and P·V is register-blocked (4 rows x 4 or 2 vectors). With many
//     rows per unit each converted tile serves enough rows that converting once wins.
//   - direct (units of at most kDirectRows query rows, no rope, D a multiple of the vector: decode
//     at GQA groups up to 4): K and V are loaded and converted in registers inside the Q·K and
//     P·V loops (Q·K 1 row x 8 columns or 4 x 4; P·V 1 row x 8 vectors or 4 x 4; 3 rows, GQA 3,
//     as 3 x 4 rather than 4 x 4 with a spare row, on 16 vector registers too: a key column or a
//     value vector at a time), and the next run's
//     keys are prefetched while scoring and its values while accumulating (into L2), so that the
//     loads are spread over the whole run rather than issued in bursts during conversions, which
//     leaves the memory bus idle between bursts; each worker also prefetches the first run of the
//     unit it computes next.
//   - Decode (query S <= kDecodeMaxSeq, not TND/NTD): a unit is (batch, KV head, KV split) and
//     serves every query row of that KV head's GQA group (group x S rows) from one read of its
//     K/V slice; its partial states go to the workspace, and the unit that completes a (batch,
//     KV head)'s last split combines the splits of each of its rows in split order and writes
//     them (flash-decoding, without a second parallel pass; Note [FIA decode splits]). Its path
//     (FiaPath::decode_tiles or decode_direct) is the same for every unit of a launch.
//   - Prefill: a unit is (batch, KV head, a tile of query positions) x the group's heads; it
//     streams the columns its rows can see and writes its rows directly (tiles; a last unit of at
//     most kDirectRows rows takes the direct path).
// Decode is bound by the K/V loads (and the prefetches' share of the core's miss queue), not by
// FMAs, exp or the horizontal sums; prefill by Q·K and P·V, then the softmax.
// Determinism: the units, the splits and every unit's operation order are functions of the shape
// key, the lengths and ctx.num_threads() only; units are handed to threads dynamically, but a
// unit's result does not depend on which thread runs it (Note [FIA workspace]).
#pragma once

#include <cstdint>

#include "npugraph/dtype.hpp"
#include "npugraph/kernel.hpp"
#include "ops/attention/fia_launch.hpp"

namespace npugraph::ops::attention::fast {

// A run of consecutive KV columns stored at a fixed row stride (elements) for key, key rope and
// value of one KV head: FiaLaunch::kv_at's run as addresses.
struct KvRun {
  const std::byte* k = nullptr;
  const std::byte* kr = nullptr;
  const std::byte* v = nullptr;
  std::int64_t k_stride = 0, kr_stride = 0, v_stride = 0;
  std::int64_t len = 0;
  std::int64_t dq_o = 0, dq_s = 0;  // int8 KV: KvPos's antiquant coordinates of the first row
};

// The antiquant parameters of one run as float32 (kFastChunk rows x D channels at most):
// per-channel, scale[d] and offset[d]; per-token, scale[c] and offset[c] of row c.
struct DqRun {
  alignas(64) float scale[kMaxHeadDim + kFastPad];
  alignas(64) float offset[kMaxHeadDim + kFastPad];
  const std::byte* loaded = nullptr;  // per-channel: the scale element the arrays were read from
};

// The run holding KV column j of batch b, KV head h, cut to at most `max_len` columns (inline: the
// run walker calls it for every run).
inline KvRun run_at(const FiaLaunch& l, std::int64_t b, std::int64_t h, std::int64_t j,
                    std::int64_t max_len) {
  const FiaParams& p = l.p;
  const KvPos pos = l.kv_at(b, j, max_len);
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(l.kv_t));
  auto at = [&](const FiaView& v) {
    return static_cast<const std::byte*>(v.data) +
           (pos.outer * v.stride[0] + h * v.stride[1] + pos.row * v.stride[2]) * es;
  };
  const FiaView& kv = pos.prefix ? p.k_prefix : p.k;
  const FiaView& vv = pos.prefix ? p.v_prefix : p.v;
  KvRun r;
  r.len = pos.len;
  r.dq_o = pos.dq_o;
  r.dq_s = pos.dq_s;
  r.k = at(kv);
  r.v = at(vv);
  r.k_stride = kv.stride[2];
  r.v_stride = vv.stride[2];
  if (l.key.dr) {
    r.kr = at(p.k_rope);
    r.kr_stride = p.k_rope.stride[2];
  }
  return r;
}

// Query row r as float32: q (Dk) then q_rope (Dr), zero-padded to `padded` floats.
void load_q(const FiaLaunch& l, const Row& r, float* dst, std::int64_t padded);
// Adds pse and applies the full mask to the scores of columns [j0, j0 + n) of row r.
void bias(const FiaLaunch& l, const Row& r, std::int64_t j0, std::int64_t n, float* score);
// Reads the antiquant parameters of `cols` rows of run `r` (KV head h, D channels) into `out`.
void dequant(const Dequant& q, const KvRun& r, std::int64_t h, std::int64_t cols, std::int64_t D,
             DqRun& out);

// True when the fast kernels cover this launch (Note [FIA fast kernels]).
bool fia_fast_covers(const FiaParams& p);

// The per-target entry points (fia_fast_decode.cpp, fia_fast_prefill.cpp).
void run_fast_decode(const FiaLaunch& l, const ExecContext& ctx);
void run_fast_prefill(const FiaLaunch& l, const ExecContext& ctx);

}  // namespace npugraph::ops::attention::fast
