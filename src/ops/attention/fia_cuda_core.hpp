// The math of FIA's CUDA kernels (fia_cuda.cu), written once as __host__ __device__ code so that a
// host loop can run it exactly as the GPU grid does (tests/ops/test_fia_cuda_emulation.cpp) on a
// machine without a GPU. Plain C++ when not compiled by nvcc (the qualifiers are macro'd away).
//
// Note [FIA CUDA kernels]
// One attention kernel serves decode and prefill; a second one combines decode splits.
//   - A thread block owns up to `rows` query rows of one batch b that share one KV head kvh (GQA:
//     the block reads each key/value row once for all of them), in the order r = s * group + g
//     (consecutive query positions stay in one block, so causal bands stay narrow), and the KV
//     columns of one split. It walks the union of its rows' bands in tiles of `cols` columns,
//     skips a tile that no row sees (the fully-masked tiles of a causal or banded mask), and runs
//     the online softmax of softmax_state.hpp per row: scores, the tile maximum, the rescale
//     factor, the weights, then the accumulators (float32 throughout).
//   - Decode plans (the workspace plan has fast_splits > 0: query S <= kDecodeMaxSeq) split batch
//     b's KV columns into split_count() ranges (at least kMinSplit columns each, at most
//     fast_splits) and write one partial (acc, max, sum) per (query row, split) into the
//     workspace's partial records (Note [FIA workspace]); combine_row() merges them in split order
//     and writes the row. Prefill plans have one split and write their rows directly.
//   - The grid is a function of the FiaShapeKey and the workspace plan only (geometry()), which
//     fia_check_update keeps fixed: x = kv_heads * row_chunks, y = fast_splits (decode) or 1, z =
//     batch. Everything else — pointers, strides, actual lengths, scale, the band, the mask and pse
//     — is read from the device copy of the block, so an updated block (new lengths) changes a
//     replayed graph's result with no change to the launch; blocks whose split starts past the
//     batch's actual KV length exit at once.
//   - Between two phases a block synchronises (Exec::phase). Inside a phase each thread writes
//     only its own elements, so running the threads of a phase one after another (the host
//     emulation) computes exactly what the GPU computes, operation for operation; only the libm
//     exp/log may differ from the device's in the last bit.
//   - A block id outside the key cache (block_table changed after the op checked it) cannot throw
//     on the device: its key row reads as NaN, so the rows that see it come out NaN (never a wild
//     read, never a silently finite row).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/attention/fia_cuda_float.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention::cuda_core {

inline constexpr int kThreads = 128;             // threads per block
inline constexpr int kQFloats = 4096;            // query rows of a block, float32 (rows * Dk)
inline constexpr int kMaxCols = 32;              // KV columns per tile at most
inline constexpr int kTileFloats = 4096 + kMaxCols;  // one tile, float32: cols * (Dk + 1) or cols * Dv
inline constexpr int kMaxRows = 64;              // query rows per block at most
inline constexpr int kAcc = kQFloats / kThreads; // accumulators per thread (rows * Dv <= kQFloats)
inline constexpr std::int64_t kMaxGridZ = 65535; // the batch is the grid's z

// The element conversions and small helpers (bits_of ... cdiv): fia_cuda_float.hpp.

// ---- the launch geometry: a function of the shape key and the workspace plan only ----

struct Geometry {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, group = 0, q_seq = 0, dk = 0, dv = 0;
  std::int64_t rows = 0;        // query rows per block
  std::int64_t cols = 0;        // KV columns per tile
  std::int64_t head_rows = 0;   // query rows sharing one (batch, KV head): group * q_seq
  std::int64_t row_chunks = 0;  // blocks per (batch, KV head) and split
  std::int64_t splits = 1;      // the grid's y: fast_splits (decode) or 1
  bool split = false;           // decode: partial records + combine_row
  std::int64_t grid_x() const { return kv_heads * row_chunks; }
};

NG_FIA_HD inline Geometry geometry(const FiaShapeKey& key, const FiaWorkspacePlan& plan) {
  Geometry g;
  g.batch = key.batch;
  g.heads = key.heads;
  g.kv_heads = key.kv_heads;
  g.group = key.heads / key.kv_heads;
  g.q_seq = key.q_seq;
  g.dk = key.dk;
  g.dv = key.dv;
  const std::int64_t wide = max64(1, max64(key.dk, key.dv));
  g.rows = min64(kMaxRows, kQFloats / wide);     // D <= kMaxHeadDim = 512: at least 8
  g.cols = min64(kMaxCols, kTileFloats / (wide + 1));  // at least 8
  g.head_rows = g.group * g.q_seq;
  g.row_chunks = max64(1, cdiv(g.head_rows, g.rows));
  g.split = plan.fast_splits > 0;
  g.splits = g.split ? plan.fast_splits : 1;
  return g;
}

// Decode: the splits batch b's `kv_len` columns get (0 when there is none); prefill: 1.
NG_FIA_HD inline std::int64_t split_count(const Geometry& g, std::int64_t kv_len) {
  if (!g.split) return 1;
  if (kv_len <= 0) return 0;
  return min64(g.splits, cdiv(kv_len, kMinSplit));
}

// Split `split` of `count` over [0, kv_len): [lo, hi).
NG_FIA_HD inline void split_range(const Geometry& g, std::int64_t kv_len, std::int64_t count,
                                  std::int64_t split, std::int64_t& lo, std::int64_t& hi) {
  if (!g.split) {
    lo = 0;
    hi = kv_len;
    return;
  }
  const std::int64_t width = cdiv(kv_len, count);
  lo = min64(kv_len, split * width);
  hi = min64(kv_len, lo + width);
}

// ---- what the kernels read of the (device) block ----

struct Block {
  const FiaParams* p = nullptr;
  const std::int64_t* aq = nullptr;   // actual query lengths [B]
  const std::int64_t* akv = nullptr;  // actual KV lengths [B]
};

// `block` must be 8-byte aligned (the backend's device copies are; FiaParamBuffer's are).
NG_FIA_HD inline Block block_of(const void* block) {
  Block k;
  k.p = static_cast<const FiaParams*>(block);
  const auto* tail = reinterpret_cast<const std::int64_t*>(static_cast<const char*>(block) +
                                                           sizeof(FiaParams));
  k.aq = tail;
  k.akv = tail + k.p->key.batch;
  return k;
}

// Batch b's KV columns (the shared prefix is refused on CUDA, so prefix_len is 0 there).
NG_FIA_HD inline std::int64_t kv_len(const Block& k, std::int64_t b) {
  return k.p->prefix_len + k.akv[b];
}

// Query row (b, s)'s visible KV columns [lo, hi) (FiaLaunch::row without left padding and token
// layouts, which the CUDA backend refuses): empty when s is past the actual query length.
NG_FIA_HD inline void row_band(const Block& k, std::int64_t b, std::int64_t s, std::int64_t& lo,
                               std::int64_t& hi) {
  const FiaParams& p = *k.p;
  lo = hi = 0;
  if (s >= k.aq[b]) return;
  const std::int64_t l = kv_len(k, b);
  const std::int64_t shift = p.key.anchor ? l - k.aq[b] : 0;
  lo = max64(0, s + shift - p.pre_tokens);
  hi = min64(l, s + shift + p.next_tokens + 1);
  if (lo >= hi) lo = hi = 0;
}

// The element offset of KV column j's row (batch b, KV head kvh) in view v: contiguous KV (no
// left padding) or a paged cache through block_table; -1 for a block id outside the cache.
NG_FIA_HD inline std::int64_t kv_row_offset(const FiaParams& p, const FiaView& v, std::int64_t b,
                                            std::int64_t kvh, std::int64_t j) {
  if (p.key.kv_store == static_cast<std::int64_t>(FiaKvStore::contiguous))
    return b * v.stride[0] + kvh * v.stride[1] + j * v.stride[2];
  const auto* table = static_cast<const std::int32_t*>(p.block_table.data);
  const std::int64_t bs = p.key.block_size;
  const std::int64_t id = table[b * p.block_table.stride[0] + (j / bs) * p.block_table.stride[2]];
  if (id < 0 || id >= p.key.num_blocks) return -1;
  return id * v.stride[0] + kvh * v.stride[1] + (j % bs) * v.stride[2];
}

// The workspace's partial record of query row `row` ((b * N + n) * Sq + s) and split `split`:
// acc[fast_dv], then max, sum (Note [FIA workspace]).
NG_FIA_HD inline float* partial_record(const FiaParams& p, std::int64_t row, std::int64_t split) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p.workspace);
  std::byte* base = p.workspace + ((kWorkspaceAlign - addr % kWorkspaceAlign) % kWorkspaceAlign);
  return reinterpret_cast<float*>(base + p.plan.fast_partial_offset +
                                  (row * p.plan.fast_splits + split) * p.plan.fast_partial_bytes);
}

// ---- the attention block (Note [FIA CUDA kernels]) ----

// A block's shared memory (about 45 KB: under the 48 KB of static shared memory).
struct Shared {
  float q[kQFloats];                   // rows x Dk
  // Keys at row stride Dk + 1 and scores at row stride cols + 1: the threads of a warp read
  // different columns of one row in the score phase, and different rows in the softmax phase, so
  // the padding spreads them over the shared-memory banks.
  float tile[kTileFloats];                   // cols x (Dk + 1) (keys), then cols x Dv (values)
  float score[kMaxRows * (kMaxCols + 1)];    // rows x (cols + 1): scores, then weights
  float m[kMaxRows], l[kMaxRows], alpha[kMaxRows];  // running max, sum; this tile's factor
  std::int64_t lo[kMaxRows], hi[kMaxRows];          // the row's columns within this split
  std::int64_t head[kMaxRows], pos[kMaxRows];       // query head n and S index s
  std::int64_t koff[kMaxCols], voff[kMaxCols];      // the tile's key / value rows
};

struct Coord {
  std::int64_t x = 0, y = 0, z = 0;  // blockIdx
};

// The block at `c` of the grid geometry() gives. Exec::phase(f) runs f(tid, acc) for every
// thread of the block (acc: that thread's kAcc accumulators, kept across phases), then
// synchronises the block.
template <class Exec>
NG_FIA_HD void attention_block(const void* block, Coord c, Shared& sh, Exec& ex) {
  const Block k = block_of(block);
  const FiaParams& p = *k.p;
  const Geometry g = geometry(p.key, p.plan);
  const std::int64_t b = c.z, split = c.y, kvh = c.x / g.row_chunks, chunk = c.x % g.row_chunks;
  const std::int64_t L = kv_len(k, b);
  const std::int64_t nsplit = split_count(g, L);
  if (p.lse_zero && c.x == 0 && c.y == 0 && c.z == 0)
    ex.phase([&](int tid, float*) {
      if (tid == 0)
        for (std::int64_t i = 0; i < p.lse_zero_bytes; ++i) p.lse_zero[i] = 0;
    });
  if (split >= nsplit) return;  // past the batch's actual KV length (the whole block)
  std::int64_t split_lo = 0, split_hi = 0;
  split_range(g, L, nsplit, split, split_lo, split_hi);
  const std::int64_t nrows = min64(g.rows, g.head_rows - chunk * g.rows);
  const std::int64_t dk = g.dk, dv = g.dv, cols = g.cols, ks = dk + 1, cs = cols + 1;
  // Element indices inside a block fit 32 bits (rows * D <= kQFloats, cols * D <= kTileFloats):
  // 32-bit division is much cheaper than 64-bit on the device.
  const int dk32 = static_cast<int>(dk), dv32 = static_cast<int>(dv), cols32 = static_cast<int>(cols),
            nrows32 = static_cast<int>(nrows);
  const DType q_t = static_cast<DType>(p.key.sig[static_cast<int>(FiaArg::query)].dtype);
  const DType kv_t = static_cast<DType>(p.key.sig[static_cast<int>(FiaArg::key)].dtype);
  const DType pse_t = static_cast<DType>(p.key.sig[static_cast<int>(FiaArg::pse_shift)].dtype);
  const bool full_mask = p.key.mask_kind == static_cast<std::int64_t>(FiaMaskKind::full);

  // Rows, their bands within the split, the queries; accumulators cleared.
  ex.phase([&](int tid, float* acc) {
    for (int a = 0; a < kAcc; ++a) acc[a] = 0.0f;
    if (tid < nrows) {
      const std::int64_t r = chunk * g.rows + tid;
      const std::int64_t s = r / g.group, n = kvh * g.group + r % g.group;
      std::int64_t lo = 0, hi = 0;
      row_band(k, b, s, lo, hi);
      lo = max64(lo, split_lo);
      hi = min64(hi, split_hi);
      if (lo >= hi) lo = hi = 0;
      sh.lo[tid] = lo;
      sh.hi[tid] = hi;
      sh.head[tid] = n;
      sh.pos[tid] = s;
      sh.m[tid] = neg_inf();
      sh.l[tid] = 0.0f;
    }
    for (int e = tid; e < nrows32 * dk32; e += kThreads) {
      const std::int64_t r = chunk * g.rows + e / dk32, d = e % dk32;
      const std::int64_t s = r / g.group, n = kvh * g.group + r % g.group;
      sh.q[e] = load(q_t, p.q.data,
                     b * p.q.stride[0] + n * p.q.stride[1] + s * p.q.stride[2] + d * p.q.stride[3]);
    }
  });

  // The union of the rows' bands (every thread computes the same).
  std::int64_t lo_all = L, hi_all = 0;
  for (std::int64_t r = 0; r < nrows; ++r)
    if (sh.lo[r] < sh.hi[r]) {
      lo_all = min64(lo_all, sh.lo[r]);
      hi_all = max64(hi_all, sh.hi[r]);
    }

  for (std::int64_t c0 = lo_all; c0 < hi_all; c0 += cols) {
    const std::int64_t ncols = min64(cols, hi_all - c0);
    const int ncols32 = static_cast<int>(ncols);
    bool seen = false;  // fully masked tiles (no row sees a column of it) are skipped
    for (std::int64_t r = 0; r < nrows && !seen; ++r)
      seen = sh.lo[r] < sh.hi[r] && sh.lo[r] < c0 + ncols && sh.hi[r] > c0;
    if (!seen) continue;

    ex.phase([&](int tid, float*) {
      if (tid < ncols) {
        sh.koff[tid] = kv_row_offset(p, p.k, b, kvh, c0 + tid);
        sh.voff[tid] = kv_row_offset(p, p.v, b, kvh, c0 + tid);
      }
    });
    // The key tile (a bad block id: NaN).
    ex.phase([&](int tid, float*) {
      for (int e = tid; e < ncols32 * dk32; e += kThreads) {
        const int t = e / dk32, d = e % dk32;
        sh.tile[t * ks + d] = sh.koff[t] < 0 ? quiet_nan()
                                             : load(kv_t, p.k.data, sh.koff[t] + d * p.k.stride[3]);
      }
    });
    // Scores: scale * q.k (+ pse); -inf outside the row's band or where the full mask says 1.
    ex.phase([&](int tid, float*) {
      for (int e = tid; e < nrows32 * cols32; e += kThreads) {
        const int r = e / cols32, t = e % cols32;
        const std::int64_t j = c0 + t;
        float s = neg_inf();
        if (t < ncols && sh.lo[r] <= j && j < sh.hi[r]) {
          const std::int64_t i = sh.pos[r];
          const bool masked =
              full_mask && static_cast<const std::uint8_t*>(
                               p.mask.data)[b * p.mask.stride[0] + i * p.mask.stride[2] +
                                            j * p.mask.stride[3]] != 0;
          if (!masked) {
            float dot = 0.0f;
            for (std::int64_t d = 0; d < dk; ++d) dot = ::fmaf(sh.q[r * dk + d], sh.tile[t * ks + d], dot);
            s = p.scale * dot;
            if (p.pse.data)
              s += load(pse_t, p.pse.data,
                        b * p.pse.stride[0] + sh.head[r] * p.pse.stride[1] + i * p.pse.stride[2] +
                            j * p.pse.stride[3]);
          }
        }
        sh.score[r * cs + t] = s;
      }
    });
    // Per row: the tile's maximum, the rescale factor, the weights (SoftmaxState::raise_max and
    // add, with their empty and NaN cases); and the value tile.
    ex.phase([&](int tid, float*) {
      if (tid < nrows) {
        float* sc = sh.score + tid * cs;
        float tmax = neg_inf();
        for (std::int64_t t = 0; t < ncols; ++t)
          if (!(sc[t] <= tmax)) tmax = sc[t];  // NaN wins
        float m = sh.m[tid], factor = 1.0f;
        if ((tmax > m || is_nan(tmax)) && !is_nan(m)) {
          factor = ::expf(m - tmax);  // from an empty state: exp(-inf) = 0
          m = tmax;
          sh.l[tid] *= factor;
        }
        sh.m[tid] = m;
        sh.alpha[tid] = factor;
        float sum = sh.l[tid];
        for (std::int64_t t = 0; t < ncols; ++t) {
          float w = 0.0f;
          if (m != neg_inf() && sc[t] != neg_inf()) {
            w = ::expf(sc[t] - m);
            sum += w;
          }
          sc[t] = w;
        }
        sh.l[tid] = sum;
      }
      for (int e = tid; e < ncols32 * dv32; e += kThreads) {
        const int t = e / dv32, d = e % dv32;
        sh.tile[e] = sh.voff[t] < 0 ? 0.0f : load(kv_t, p.v.data, sh.voff[t] + d * p.v.stride[3]);
      }
    });
    // Accumulators: acc = acc * factor + sum_t w_t * v_t (columns of weight 0 skipped, as the
    // CPU kernel skips the masked ones).
    ex.phase([&](int tid, float* acc) {
      for (int a = 0; a < kAcc; ++a) {
        const int e = tid + a * kThreads;
        if (e >= nrows32 * dv32) break;
        const int r = e / dv32, d = e % dv32;
        float x = acc[a] * sh.alpha[r];
        const float* w = sh.score + r * cs;
        for (std::int64_t t = 0; t < ncols; ++t)
          if (w[t] != 0.0f) x = ::fmaf(w[t], sh.tile[t * dv + d], x);
        acc[a] = x;
      }
    });
  }

  // The rows: partial records (decode) or the outputs (FiaLaunch::finish: an empty state writes
  // zeros and lse = +inf).
  const std::int64_t N = g.heads, Sq = g.q_seq;
  ex.phase([&](int tid, float* acc) {
    for (int a = 0; a < kAcc; ++a) {
      const int e = tid + a * kThreads;
      if (e >= nrows32 * dv32) break;
      const int r = e / dv32, d = e % dv32;
      const std::int64_t n = sh.head[r], s = sh.pos[r];
      if (g.split) {
        partial_record(p, (b * N + n) * Sq + s, split)[d] = acc[a];
      } else {
        const bool empty = sh.m[r] == neg_inf();
        store(q_t, p.out.data,
              b * p.out.stride[0] + n * p.out.stride[1] + s * p.out.stride[2] + d * p.out.stride[3],
              empty ? 0.0f : acc[a] / sh.l[r]);
      }
    }
    if (tid < nrows) {
      const std::int64_t n = sh.head[tid], s = sh.pos[tid];
      if (g.split) {
        float* rec = partial_record(p, (b * N + n) * Sq + s, split);
        rec[p.plan.fast_dv] = sh.m[tid];
        rec[p.plan.fast_dv + 1] = sh.l[tid];
      } else if (p.lse) {
        p.lse[b * p.lse_stride[0] + n * p.lse_stride[1] + s * p.lse_stride[2]] =
            sh.m[tid] == neg_inf() ? pos_inf() : sh.m[tid] + ::logf(sh.l[tid]);
      }
    }
  });
}

// ---- the split combine (decode) ----

// Thread `tid` of the combine block of query row `row` ((b * N + n) * Sq + s): merges the row's
// partial records in split order (one maximum over the splits, each split's weight exp(max_s -
// max), NaN propagating; an empty split weighs 0) and writes its elements of the output; thread 0
// also writes softmax_lse. No split (no KV column) or only empty ones: zeros and lse = +inf.
NG_FIA_HD inline void combine_row(const void* block, std::int64_t row, int tid) {
  const Block k = block_of(block);
  const FiaParams& p = *k.p;
  const Geometry g = geometry(p.key, p.plan);
  const std::int64_t N = g.heads, Sq = g.q_seq;
  const std::int64_t b = row / (N * Sq), n = (row / Sq) % N, s = row % Sq;
  const std::int64_t nsplit = split_count(g, kv_len(k, b));
  const std::int64_t fdv = p.plan.fast_dv;
  float mx = neg_inf();
  for (std::int64_t i = 0; i < nsplit; ++i) {
    const float m = partial_record(p, row, i)[fdv];
    if (is_nan(m) || is_nan(mx)) mx = quiet_nan();
    else if (m > mx) mx = m;
  }
  const bool empty = mx == neg_inf();
  float sum = 0.0f;
  if (!empty)
    for (std::int64_t i = 0; i < nsplit; ++i) {
      const float* rec = partial_record(p, row, i);
      if (rec[fdv] != neg_inf()) sum = ::fmaf(rec[fdv + 1], ::expf(rec[fdv] - mx), sum);
    }
  const DType q_t = static_cast<DType>(p.key.sig[static_cast<int>(FiaArg::query)].dtype);
  for (std::int64_t d = tid; d < g.dv; d += kThreads) {
    float x = 0.0f;
    if (!empty) {
      for (std::int64_t i = 0; i < nsplit; ++i) {
        const float* rec = partial_record(p, row, i);
        if (rec[fdv] != neg_inf()) x = ::fmaf(rec[d], ::expf(rec[fdv] - mx), x);
      }
      x /= sum;
    }
    store(q_t, p.out.data,
          b * p.out.stride[0] + n * p.out.stride[1] + s * p.out.stride[2] + d * p.out.stride[3], x);
  }
  if (tid == 0 && p.lse)
    p.lse[b * p.lse_stride[0] + n * p.lse_stride[1] + s * p.lse_stride[2]] =
        empty ? pos_inf() : mx + ::logf(sum);
}

}  // namespace npugraph::ops::attention::cuda_core
