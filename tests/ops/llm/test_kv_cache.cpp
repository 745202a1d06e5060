// reshape_and_cache against a reference scatter: dtypes, the token-major caches (3-D and 4-D) and
// the head-major one, negative slots, repeated slots, a bad slot failing the task with nothing
// written; a captured graph follows the slot mapping; FIA reads what it wrote through block_table
// (both layouts, the same bits); argument errors.
#include <gtest/gtest.h>

#include <cstring>

#include "npugraph/ops/fia.hpp"
#include "npugraph/ops/kv_cache.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::KvCacheLayout;

Tensor host_zeros(ng::Shape s, DType dt) {
  Tensor t = ng::empty(s, dt);
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

TEST(KvCache, WritesEachTokenAtItsSlot) {
  const std::int64_t T = 5, KVN = 3, NB = 4, BS = 8;
  const std::vector<std::int32_t> slots = {0, 31, -1, 9, 17};
  // D 200: a token of 600 values, longer than the kernel's 512-value conversion chunk.
  for (std::int64_t D : {64, 200})
    for (DType in : {DType::f32, DType::f16, DType::bf16})
      for (DType cd : {DType::f16, DType::bf16, DType::f32})
        for (int form : {0, 1, 2}) {  // [NB, BS, H], [NB, BS, KVN, D], head-major [NB, KVN, BS, D]
          const std::int64_t H = KVN * D;
          const bool head_major = form == 2;
          const Tensor k = random_tensor({T, KVN, D}, 1, in), v = random_tensor({T, KVN, D}, 2, in);
          const ng::Shape cs = form == 0   ? ng::Shape({NB, BS, H})
                               : form == 1 ? ng::Shape({NB, BS, KVN, D})
                                           : ng::Shape({NB, KVN, BS, D});
          const Tensor kc = host_zeros(cs, cd), vc = host_zeros(cs, cd);
          ng::ops::reshape_and_cache(k, v, kc, vc, int_tensor(slots, {T}),
                                     head_major ? KvCacheLayout::head_major : KvCacheLayout::token_major);
          ng::device_synchronize();
          const auto kv = floats(k), vv = floats(v), kcv = floats(kc), vcv = floats(vc);
          std::vector<float> want_k(kcv.size(), 0), want_v(vcv.size(), 0);
          for (std::int64_t t = 0; t < T; ++t) {
            const std::int64_t s = slots[t];
            if (s < 0) continue;
            for (std::int64_t h = 0; h < KVN; ++h)
              for (std::int64_t d = 0; d < D; ++d) {
                const std::int64_t i = h * D + d;
                const std::int64_t to = head_major ? (((s / BS) * KVN + h) * BS + s % BS) * D + d : s * H + i;
                want_k[to] = at(make_tensor({kv[t * H + i]}, {1}, cd), 0);
                want_v[to] = at(make_tensor({vv[t * H + i]}, {1}, cd), 0);
              }
          }
          EXPECT_EQ(kcv, want_k) << form;
          EXPECT_EQ(vcv, want_v) << form;
        }
}

TEST(KvCache, ARepeatedSlotKeepsTheLaterToken) {
  const Tensor k = make_tensor({1, 2, 3, 4}, {2, 1, 2}), v = make_tensor({5, 6, 7, 8}, {2, 1, 2});
  const Tensor kc = host_zeros({1, 2, 2}, DType::f32), vc = host_zeros({1, 2, 2}, DType::f32);
  ng::ops::reshape_and_cache(k, v, kc, vc, int_tensor({1, 1}, {2}));
  ng::device_synchronize();
  EXPECT_EQ(floats(kc), (std::vector<float>{0, 0, 3, 4}));
  EXPECT_EQ(floats(vc), (std::vector<float>{0, 0, 7, 8}));
}

TEST(KvCache, ASlotOutOfRangeFailsTheTaskNamingIt) {
  const Tensor k = random_tensor({2, 1, 4}, 3), v = random_tensor({2, 1, 4}, 4);
  const Tensor kc = host_zeros({2, 4, 4}, DType::f16), vc = host_zeros({2, 4, 4}, DType::f16);
  ng::ops::reshape_and_cache(k, v, kc, vc, int_tensor({3, 8}, {2}));
  EXPECT_TASK_ERROR(ng::current_stream().synchronize(), "reshape_and_cache",
                    "slot_mapping[1] = 8: outside the cache's 8 slots");
  for (std::int64_t i = 0; i < kc.numel(); ++i) ASSERT_EQ(at(kc, i), 0.0f);  // nothing written
}

TEST(KvCache, CapturedGraphFollowsTheSlotMapping) {
  const Tensor k = random_tensor({1, 3, 64}, 5), v = random_tensor({1, 3, 64}, 6);
  const Tensor slots = int_tensor({2}, {1});
  const Tensor kc = host_zeros({4, 4, 192}, DType::f16), vc = host_zeros({4, 4, 192}, DType::f16);
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::reshape_and_cache(k, v, kc, vc, slots);
  }
  for (std::int32_t s : {2, 7, 15}) {
    slots.data_ptr<std::int32_t>()[0] = s;  // the host writes the step's slot, then replays
    g.replay();
    ng::device_synchronize();
  }
  const auto kv = floats(k);
  for (std::int32_t s : {2, 7, 15})
    for (std::int64_t i = 0; i < 192; ++i)
      ASSERT_EQ(at(kc, s * 192 + i), static_cast<float>(ng::half(kv[i]))) << s;
  EXPECT_EQ(at(kc, 3 * 192), 0.0f);
}

// What reshape_and_cache writes is what FIA reads through a block table (the BSH paged layout, and
// the head-major one FIA reads as a BNSD paged cache), the same bits either way.
TEST(KvCache, FiaReadsTheWrittenCache) {
  const std::int64_t S = 40, KVN = 2, N = 4, D = 64, BS = 16, NB = 6;
  const Tensor k = random_tensor({S, KVN, D}, 7, DType::f16), v = random_tensor({S, KVN, D}, 8, DType::f16);
  // Logical block b of the sequence lives in physical block table[b].
  const std::vector<std::int32_t> table = {4, 1, 5};
  std::vector<std::int32_t> slots(S);
  for (std::int64_t t = 0; t < S; ++t) slots[t] = table[t / BS] * BS + static_cast<std::int32_t>(t % BS);
  const Tensor q = random_tensor({1, 1, N * D}, 9, DType::f16);
  const ng::ops::FiaOptions dense{.num_heads = N, .scale = 0.125, .input_layout = "BSH",
                                  .num_key_value_heads = KVN};
  const auto want = ng::ops::fused_infer_attention_score(q, k.view({1, S, KVN * D}), v.view({1, S, KVN * D}), dense);
  std::vector<float> first;
  for (bool head_major : {false, true}) {
    const ng::Shape cs = head_major ? ng::Shape({NB, KVN, BS, D}) : ng::Shape({NB, BS, KVN * D});
    const Tensor kc = host_zeros(cs, DType::f16), vc = host_zeros(cs, DType::f16);
    ng::ops::reshape_and_cache(k, v, kc, vc, int_tensor(slots, {S}),
                               head_major ? KvCacheLayout::head_major : KvCacheLayout::token_major);
    const ng::ops::FiaOptions paged{.actual_seq_lengths_kv = {S}, .block_table = int_tensor(table, {1, 3}),
                                    .num_heads = N, .scale = 0.125, .input_layout = "BSH",
                                    .num_key_value_heads = KVN, .block_size = BS};
    const auto got = ng::ops::fused_infer_attention_score(q, kc, vc, paged);
    ng::device_synchronize();
    for (std::int64_t i = 0; i < N * D; ++i)
      ASSERT_NEAR(at(got.attention_out, i), at(want.attention_out, i), 2e-3) << i;
    if (!head_major) first = floats(got.attention_out);
    else EXPECT_EQ(floats(got.attention_out), first);
  }
}

TEST(KvCache, ArgumentErrors) {
  const Tensor k = ng::empty({2, 3, 64}, DType::f32), v = ng::empty({2, 3, 64}, DType::f32);
  const Tensor kc = ng::empty({4, 16, 192}, DType::f16), vc = ng::empty({4, 16, 192}, DType::f16);
  const Tensor slots = int_tensor({0, 1}, {2});
  using ng::ops::reshape_and_cache;
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, ng::empty({4, 16, 128}, DType::f16), vc, slots),
                   "reshape_and_cache: key_cache = float16[4, 16, 128]: its slots must hold the 192 elements of a token of key = float32[2, 3, 64]");
  EXPECT_ARG_ERROR(reshape_and_cache(k, ng::empty({2, 3, 32}, DType::f32), kc, vc, slots),
                   "reshape_and_cache: value = float32[2, 3, 32]: must have the shape and dtype of key = float32[2, 3, 64]");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, kc, ng::empty({4, 16, 192}, DType::bf16), slots),
                   "value_cache = bfloat16[4, 16, 192]: must have the shape and dtype of key_cache = float16[4, 16, 192]");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, kc, vc, int_tensor({0}, {1})),
                   "reshape_and_cache: slot_mapping = int32[1]: must have 2 elements (one slot per token of key)");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, kc, kc, slots), "key_cache and value_cache are the same memory");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, ng::empty({64, 192}, DType::f16), vc, slots),
                   "reshape_and_cache: key_cache = float16[64, 192]: must be [num_blocks, block_size, kv_heads * head_dim]");
  // head_major: [num_blocks, kv_heads, block_size, head_dim], its heads and head_dim key's.
  constexpr auto hm = KvCacheLayout::head_major;
  const Tensor hkc = ng::empty({4, 3, 16, 64}, DType::f16), hvc = ng::empty({4, 3, 16, 64}, DType::f16);
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, kc, vc, slots, hm),
                   "reshape_and_cache: key_cache = float16[4, 16, 192]: a head_major cache must be [num_blocks, kv_heads, block_size, head_dim]");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, ng::empty({4, 6, 16, 32}, DType::f16), hvc, slots, hm),
                   "reshape_and_cache: key_cache = float16[4, 6, 16, 32]: its kv_heads and head_dim must be those of key = float32[2, 3, 64]");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, hkc, ng::empty({4, 3, 16, 32}, DType::f16), slots, hm),
                   "reshape_and_cache: value_cache = float16[4, 3, 16, 32]: its kv_heads and head_dim must be those of key = float32[2, 3, 64]");
  EXPECT_ARG_ERROR(reshape_and_cache(k, v, hkc, hvc, slots, static_cast<KvCacheLayout>(7)),
                   "reshape_and_cache: layout = 7: must be token_major or head_major");
}

// A head-major cache's capacity is num_blocks * block_size (its third dimension): slot 63 of
// [4, 3, 16, 64] is the last, 64 fails the task; key [T, KV_N * D] is read as [T, KV_N, D].
TEST(KvCache, HeadMajorCapacityAndFlatKeys) {
  const Tensor k = random_tensor({2, 192}, 3), v = random_tensor({2, 192}, 4);
  const Tensor kc = host_zeros({4, 3, 16, 64}, DType::f32), vc = host_zeros({4, 3, 16, 64}, DType::f32);
  ng::ops::reshape_and_cache(k, v, kc, vc, int_tensor({63, -1}, {2}), KvCacheLayout::head_major);
  ng::device_synchronize();
  const auto kv = floats(k);
  for (std::int64_t h = 0; h < 3; ++h)  // slot 63: block 3, row 15 of each head
    for (std::int64_t d = 0; d < 64; ++d) ASSERT_EQ(at(kc, ((3 * 3 + h) * 16 + 15) * 64 + d), kv[h * 64 + d]);
  ng::ops::reshape_and_cache(k, v, kc, vc, int_tensor({64, 0}, {2}), KvCacheLayout::head_major);
  EXPECT_TASK_ERROR(ng::current_stream().synchronize(), "reshape_and_cache",
                    "slot_mapping[0] = 64: outside the cache's 64 slots");
  EXPECT_EQ(at(kc, 0), 0.0f);  // nothing written, slot 0 included
}

}  // namespace
}  // namespace llm_ops_test
