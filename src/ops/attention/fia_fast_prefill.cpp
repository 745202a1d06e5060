// The fast FIA prefill kernel (query S > kDecodeMaxSeq, and every TND/NTD launch): a unit is
// (batch, KV head, a tile of plan.fast_tile query positions) with all the group's query heads,
// so each key/value tile converted to float32 serves group x tile query rows. A unit streams only
// the KV columns its rows can see (causal, band and sparse modes 2-4 skip whole tiles; ragged
// batches do no work past their lengths) and writes its rows directly.
// Note [FIA fast kernels] (fia_fast.hpp) and Note [FIA workspace] (fia_params.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention/fia_fast_prefill.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "hwy/highway.h"
#include "ops/attention/fia_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {

struct PrefillUnit {
  std::int64_t b, h, s0, s1;  // query positions [s0, s1) (TND/NTD: tokens)
};

// The units: per batch and KV head, tiles of the query positions, the latest (most columns under
// a causal mask) first. TND/NTD tokens past the last batch belong to no batch: their rows (empty)
// go to units of the last batch.
std::vector<PrefillUnit> plan_units(const FiaLaunch& l) {
  const std::int64_t B = l.key.batch, kvn = l.key.kv_heads, tile = l.p.plan.fast_tile;
  std::vector<PrefillUnit> units;
  auto add = [&](std::int64_t b, std::int64_t from, std::int64_t to) {
    for (std::int64_t h = 0; h < kvn; ++h)
      for (std::int64_t e = to; e > from; e -= tile) units.push_back({b, h, std::max(from, e - tile), e});
  };
  for (std::int64_t b = 0; b < B; ++b) {
    if (l.token) {
      add(b, l.q_start[b], l.q_start[b] + l.aq[b]);
      if (b == B - 1) add(b, l.q_start[b] + l.aq[b], l.key.q_seq);
    } else {
      // Rows outside the valid range are written empty; they still need a unit.
      const std::int64_t first = l.q_first(b);
      add(b, 0, first);
      add(b, first, first + l.aq[b]);
      add(b, first + l.aq[b], l.key.q_seq);
    }
  }
  return units;
}

void prefill_unit(const FiaLaunch& l, const PrefillUnit& u, std::byte* slot) {
  const FiaWorkspacePlan& plan = l.p.plan;
  Row rows[kMaxUnitRows];
  float* q[kMaxUnitRows];
  float* acc[kMaxUnitRows];
  float* st[kMaxUnitRows];
  float* qbase = reinterpret_cast<float*>(slot + plan.fast_q_offset);
  float* abase = reinterpret_cast<float*>(slot + plan.fast_acc_offset);
  float* sbase = reinterpret_cast<float*>(slot + plan.fast_state_offset);
  std::int64_t R = 0, c0 = std::numeric_limits<std::int64_t>::max(), c1 = 0;
  for (std::int64_t s = u.s0; s < u.s1; ++s)
    for (std::int64_t g = 0; g < l.group; ++g, ++R) {
      rows[R] = l.row(u.b, u.h * l.group + g, s);
      q[R] = qbase + R * plan.fast_dk;
      acc[R] = abase + R * plan.fast_dv;
      st[R] = sbase + 2 * R;
      st[R][0] = -std::numeric_limits<float>::infinity();
      st[R][1] = 0.0f;
      if (!rows[R].active()) continue;
      load_q(l, rows[R], q[R], plan.fast_dk);
      std::fill(acc[R], acc[R] + plan.fast_dv, 0.0f);
      c0 = std::min(c0, rows[R].lo);
      c1 = std::max(c1, rows[R].hi);
    }
  if (c0 < c1) {
    const Tiles t{reinterpret_cast<float*>(slot + plan.fast_k_offset),
                  reinterpret_cast<float*>(slot + plan.fast_v_offset),
                  reinterpret_cast<float*>(slot + plan.fast_score_offset)};
    ProcessRowsAny(l, u.b, u.h, UnitRows{rows, q, acc, st, R, KvRun{}}, c0, c1, t);
  }
  for (std::int64_t r = 0; r < R; ++r) l.finish(rows[r], acc[r], st[r][0], st[r][1]);
}

void RunPrefill(const FiaLaunch& l, const ExecContext& ctx) {
  const std::vector<PrefillUnit> units = plan_units(l);
  const auto count = static_cast<std::int64_t>(units.size());
  const std::int64_t slots =
      std::min<std::int64_t>({std::max(ctx.num_threads(), 1), l.p.plan.fast_slots, count});
  std::atomic<std::int64_t> next{0};
  ctx.parallel_for(slots, 1, [&](std::int64_t begin, std::int64_t) {
    std::byte* slot = SlotBase(l, begin);
    for (std::int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < count;)
      prefill_unit(l, units[static_cast<std::size_t>(u)], slot);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::attention::fast {

HWY_EXPORT(RunPrefill);

void run_fast_prefill(const FiaLaunch& l, const ExecContext& ctx) {
  HWY_DYNAMIC_DISPATCH(RunPrefill)(l, ctx);
}

}  // namespace npugraph::ops::attention::fast
#endif  // HWY_ONCE
