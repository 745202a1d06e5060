// The fast FIA decode kernel (query S <= kDecodeMaxSeq): flash-decoding over (batch, KV head,
// KV split) units, each reading its K/V slice once for every query row of the KV head's GQA group,
// the unit that completes a (batch, KV head)'s last split then combining each of its rows' splits
// in split order and writing the outputs.
// Note [FIA fast kernels] (fia_fast.hpp) and Note [FIA workspace] (fia_params.hpp).
//
// Note [FIA decode splits]
// The KV columns of batch b are [0, lkv_b) (shared prefix first). With T = ctx.num_threads(), batch
// b's split length is max(kMinSplit, ceil(lkv_b * KV_N / 4T)) rounded up to kFastChunk — what
// keeps T threads busy with b alone (4T units) — and b gets ceil(lkv_b / length) splits (1 at
// least, at most the plan's fast_splits), the length then evened out over them. So b's splits,
// and with them its outputs' bits (the merge combines them in split order), depend only on
// lkv_b, the shapes and T: never on the other batches in the launch (batch invariance: a decode
// row has the bits it has alone, whatever else an engine's step batches with it; issue 46).
// Splitting by the launch's total instead (as this kernel once did: one split for every row of a
// long enough batch) changed a row's splits with its batch, and so its last bits. A batch of many
// long rows now gets more units than it needs; a split costs one partial record per query row
// (Dv + 2 floats written, then merged), a few percent of its KV reads.
// The merge is fused into the units: each (batch, KV head) counts its computed splits (an
// acquire-release counter, only when some batch has several splits), and the unit that computes
// the last one merges the rows of that KV head's group in split order and writes them, so a
// launch is one parallel pass (the merge's arithmetic, and so its bits, do not depend on which
// unit does it). With one split per batch (KV lengths up to kMinSplit always) a unit writes its
// rows as soon as it is computed.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention/fia_fast_decode.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "hwy/highway.h"
#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/attention/fia_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {

// Note [FIA decode splits]: count[b], length[b], first[b] (first[B]: the units). Batches up to
// kInline keep the arrays on the stack (no allocation per launch).
class DecodeSplits {
 public:
  DecodeSplits(const FiaLaunch& l, std::int64_t threads);
  DecodeSplits(const DecodeSplits&) = delete;
  DecodeSplits& operator=(const DecodeSplits&) = delete;

  std::int64_t* count;   // splits of batch b
  std::int64_t* length;  // columns per split of batch b
  std::int64_t* first;   // the first unit of batch b (B + 1 entries)
  bool several = false;  // some batch has more than one split

 private:
  static constexpr std::int64_t kInline = 64;
  std::int64_t local_[3 * kInline + 1];
  std::vector<std::int64_t> heap_;
};

// Below this many multiply-adds a decode launch runs on one thread (RunDecode).
constexpr std::int64_t kSerialDecodeWork = std::int64_t{1} << 16;

// Note [FIA decode splits].
DecodeSplits::DecodeSplits(const FiaLaunch& l, std::int64_t threads) {
  const std::int64_t B = l.key.batch, kvn = l.key.kv_heads;
  std::int64_t* base = local_;
  if (B > kInline) {
    heap_.resize(static_cast<std::size_t>(3 * B + 1));
    base = heap_.data();
  }
  count = base;
  length = base + B;
  first = base + 2 * B;
  const std::int64_t target = 4 * std::max<std::int64_t>(1, threads);
  first[0] = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    // Batch b's own length only, never the launch's total (batch invariance).
    const std::int64_t n = std::max<std::int64_t>(1, l.lkv(b));
    std::int64_t len = std::max(kMinSplit, (n * kvn + target - 1) / target);
    len = (len + kFastChunk - 1) / kFastChunk * kFastChunk;
    std::int64_t c = std::clamp<std::int64_t>((n + len - 1) / len, 1, l.p.plan.fast_splits);
    std::int64_t per = (n + c - 1) / c;
    per = (per + kFastChunk - 1) / kFastChunk * kFastChunk;
    c = (n + per - 1) / per;
    count[b] = c;
    length[b] = per;
    first[b + 1] = first[b] + c * kvn;
    several = several || c > 1;
  }
}

float* partial(const FiaLaunch& l, std::int64_t row, std::int64_t split) {
  const FiaWorkspacePlan& plan = l.p.plan;
  return reinterpret_cast<float*>(l.base + plan.fast_partial_offset +
                                  (row * plan.fast_splits + split) * plan.fast_partial_bytes);
}

// Unit `unit`: batch b, KV head h, split `split` over the KV columns [c0, c1).
struct DecodeUnit {
  std::int64_t b, h, split, c0, c1;
};

DecodeUnit unit_at(const FiaLaunch& l, const DecodeSplits& sp, std::int64_t unit) {
  const std::int64_t B = l.key.batch;
  DecodeUnit u;
  u.b = std::upper_bound(sp.first, sp.first + B + 1, unit) - sp.first - 1;
  const std::int64_t local = unit - sp.first[u.b];
  u.h = local / sp.count[u.b];
  u.split = local % sp.count[u.b];
  u.c0 = u.split * sp.length[u.b];
  u.c1 = std::min(l.lkv(u.b), u.c0 + sp.length[u.b]);
  return u;
}

// Combines the splits of rows [begin, end) (r = (b * N + n) * Sq + s) in split order and writes
// them.
void merge_rows(const FiaLaunch& l, const DecodeSplits& sp, std::int64_t begin, std::int64_t end) {
  const std::int64_t N = l.key.heads, Sq = l.key.q_seq, dvp = l.p.plan.fast_dv;
  for (std::int64_t r = begin; r < end; ++r) {
    const std::int64_t s = r % Sq, n = (r / Sq) % N, b = r / Sq / N;
    float* acc = partial(l, r, 0);
    SoftmaxState st{acc[dvp], acc[dvp + 1]};
    for (std::int64_t k = 1; k < sp.count[b]; ++k) {
      const float* part = partial(l, r, k);
      float fa, fb;
      st = SoftmaxState::merge(st, SoftmaxState{part[dvp], part[dvp + 1]}, fa, fb);
      for (std::int64_t d = 0; d < dvp; ++d) acc[d] = fa * acc[d] + fb * part[d];
    }
    Row row{};
    row.b = b;
    row.n = n;
    row.s = s;
    l.finish(row, acc, st.max, st.sum);
  }
}

// `after`: the first run of the unit this worker computes next (UnitRows::after). `done`: per
// (batch, KV head), how many of its splits are computed (null when every batch has one split).
// The unit that computes a (batch, KV head)'s last split merges and writes its rows.
void decode_unit(const FiaLaunch& l, const DecodeSplits& sp, std::int64_t unit, const KvRun& after,
                 std::byte* slot, std::atomic<std::int64_t>* done) {
  const FiaWorkspacePlan& plan = l.p.plan;
  const std::int64_t Sq = l.key.q_seq;
  const auto [b, h, split, c0, c1] = unit_at(l, sp, unit);

  Row rows[kMaxUnitRows];
  float* q[kMaxUnitRows];
  float* acc[kMaxUnitRows];
  float* st[kMaxUnitRows];
  float* qbase = reinterpret_cast<float*>(slot + plan.fast_q_offset);
  std::int64_t R = 0;
  for (std::int64_t g = 0; g < l.group; ++g) {
    const std::int64_t n = h * l.group + g;
    for (std::int64_t s = 0; s < Sq; ++s, ++R) {
      rows[R] = l.row(b, n, s);
      q[R] = qbase + R * plan.fast_dk;
      if (rows[R].active()) load_q(l, rows[R], q[R], plan.fast_dk);
      acc[R] = partial(l, (b * l.key.heads + n) * Sq + s, split);
      st[R] = acc[R] + plan.fast_dv;
      std::fill(acc[R], acc[R] + plan.fast_dv, 0.0f);
      st[R][0] = -std::numeric_limits<float>::infinity();
      st[R][1] = 0.0f;
    }
  }
  const Tiles t{reinterpret_cast<float*>(slot + plan.fast_k_offset),
                reinterpret_cast<float*>(slot + plan.fast_v_offset),
                reinterpret_cast<float*>(slot + plan.fast_score_offset)};
  ProcessRowsAny(l, b, h, UnitRows{rows, q, acc, st, R, after}, c0, c1, t);
  // The last split of (b, h) to finish: the acquire makes the other splits' partials visible, their
  // release (the same read-modify-write) publishes them. Its rows are consecutive.
  if (done && done[b * l.key.kv_heads + h].fetch_add(1, std::memory_order_acq_rel) !=
                  sp.count[b] - 1)
    return;
  const std::int64_t r0 = (b * l.key.heads + h * l.group) * Sq;
  merge_rows(l, sp, r0, r0 + l.group * Sq);
}

void RunDecode(const FiaLaunch& l, const ExecContext& ctx) {
  // Every unit serves the group x S rows of one KV head: one path for the whole launch.
  count_fia_path(UseDirect(l, l.group * l.key.q_seq) ? FiaPath::decode_direct
                                                     : FiaPath::decode_tiles);
  const DecodeSplits sp(l, ctx.num_threads());
  const std::int64_t units = sp.first[l.key.batch];
  // A launch with little work runs on the stream's worker alone: handing units to the pool's
  // helpers (a wake-up, on a VM a yield when threads outnumber cores) cost several times the
  // ~1 us such a launch computes. Only who computes changes: the splits and the merge order, so
  // the result, stay as planned for ctx.num_threads().
  std::int64_t work = 0;  // multiply-adds: KV columns x query rows x (Dk + Dv)
  for (std::int64_t b = 0; b < l.key.batch; ++b) work += l.lkv(b);
  work *= l.key.heads * l.key.q_seq * (l.key.dk + l.key.dr + l.key.dv);
  const int threads = work < kSerialDecodeWork ? 1 : std::max(ctx.num_threads(), 1);
  const std::int64_t slots = std::min<std::int64_t>({threads, l.p.plan.fast_slots, units});
  // Split counters only where some row has splits to merge (Note [FIA decode splits]).
  std::vector<std::atomic<std::int64_t>> counters(
      sp.several ? static_cast<std::size_t>(l.key.batch * l.key.kv_heads) : 0);
  std::atomic<std::int64_t>* done = sp.several ? counters.data() : nullptr;
  std::atomic<std::int64_t> next{0};
  ctx.parallel_for(slots, 1, [&](std::int64_t begin, std::int64_t) {
    std::byte* slot = SlotBase(l, begin);
    // Each worker claims its next unit before computing the current one, so that the current
    // one's last chunk prefetches the next one's first run (which worker computes a unit does not
    // change its result).
    std::int64_t u = next.fetch_add(1, std::memory_order_relaxed);
    while (u < units) {
      const std::int64_t following = next.fetch_add(1, std::memory_order_relaxed);
      KvRun after;
      if (following < units) {
        const DecodeUnit f = unit_at(l, sp, following);
        if (f.c0 < f.c1) after = run_at(l, f.b, f.h, f.c0, std::min(kFastChunk, f.c1 - f.c0));
      }
      decode_unit(l, sp, u, after, slot, done);
      u = following;
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::attention::fast {

HWY_EXPORT(RunDecode);

void run_fast_decode(const FiaLaunch& l, const ExecContext& ctx) {
  HWY_DYNAMIC_DISPATCH(RunDecode)(l, ctx);
}

}  // namespace npugraph::ops::attention::fast
#endif  // HWY_ONCE
