// FIA under task update: what fia_check_update accepts and refuses ("<argument> is not updatable
// (captured with X, updated with Y)"), and, for every updatable argument, capture(old) ->
// update(old -> new) -> replay equals eager(new), bitwise (docs/fia.md, "What an update may
// change"; docs/semantics.md §5, §6).
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"
#include "support/captured_fia.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using ng::ops::FiaOptions;

struct Args {
  Tensor q, k, v, out, lse, ws;
  FiaOptions opt;
};

// BNSD float16, B = 2, N = 4, KV_N = 2, Skv = 64, D = 16; Sq as given.
Args make_args(std::int64_t q_seq, std::uint32_t seed = 1) {
  Args a;
  std::vector<double> x;
  a.q = random_tensor(x, {2, 4, q_seq, 16}, DType::f16, seed);
  a.k = random_tensor(x, {2, 2, 64, 16}, DType::f16, seed + 1);
  a.v = random_tensor(x, {2, 2, 64, 16}, DType::f16, seed + 2);
  a.opt = {.num_heads = 4, .scale = 0.25, .input_layout = "BNSD", .num_key_value_heads = 2,
           .softmax_lse_flag = true};
  a.out = filled_tensor(a.q.shape(), DType::f16, 0);
  a.lse = filled_tensor({2, 4, q_seq, 1}, DType::f32, 0);
  a.ws = filled_tensor({ng::ops::fia_workspace_bytes(a.q, a.k, a.v, a.opt)}, DType::u8, 0);
  return a;
}

std::string check(const Args& captured, const Args& updated) {
  att::FiaParamBuffer a, b;
  att::build_fia_params(captured.q, captured.k, captured.v, captured.opt, captured.ws,
                        captured.out, captured.lse, a);
  att::build_fia_params(updated.q, updated.k, updated.v, updated.opt, updated.ws, updated.out,
                        updated.lse, b);
  return ng::ops::fia_kernel().check_update(a.bytes(), b.bytes());
}

TEST(FiaCheckUpdate, AcceptsHostValuesAndNewBuffers) {
  Args a = make_args(8);
  a.opt.atten_mask = filled_tensor({8, 64}, DType::boolean, 0);
  Args b = a;
  b.opt.actual_seq_lengths = {3, 8};
  b.opt.actual_seq_lengths_kv = {0, 61};
  b.opt.scale = 3.0;
  b.opt.pre_tokens = 4;
  b.opt.next_tokens = 0;
  EXPECT_EQ(check(a, b), "");
  Args c = make_args(8, 100);  // other tensors, same shapes
  c.opt.atten_mask = filled_tensor({8, 64}, DType::boolean, 1);
  EXPECT_EQ(check(a, c), "");
}

// A block without its dimension trailer (what a re-planned update launches, Note [FIA parameter
// block]) is never accepted by the check, and its description takes the dimensions from the
// captured block.
TEST(FiaCheckUpdate, ABlockWithoutDimensionsIsRefusedAndDescribedFromTheCapturedOne) {
  const Args a = make_args(1);
  att::FiaParamBuffer full;
  att::build_fia_params(a.q, a.k, a.v, a.opt, a.ws, a.out, a.lse, full);
  const std::span<const std::byte> with = full.bytes();
  std::vector<std::byte> without(with.begin(), with.end() - att::kFiaDimsBytes);
  const std::uint32_t none = 0;
  std::memcpy(without.data() + offsetof(att::FiaParams, has_dims), &none, sizeof none);
  ASSERT_NE(att::fia_block_batch(without), 0);  // a valid block for the kernel
  const auto& kernel = ng::ops::fia_kernel();
  const std::string refused = "the parameter block has no tensor dimensions to compare (only the update "
                              "re-planned from the task's own captured plan may leave them out)";
  EXPECT_EQ(kernel.check_update(with, without), refused);
  EXPECT_EQ(kernel.check_update(without, with), refused);
  EXPECT_EQ(kernel.check_update(with, with), "");
  // A block one byte short of either size is not a block.
  EXPECT_EQ(kernel.check_update(with, std::span(without).first(without.size() - 8)),
            "the new parameter block is not a fused_infer_attention_score block");
  const std::string described = kernel.describe(without, with);
  EXPECT_NE(described.find("query float16[2, 4, 1, 16]"), std::string::npos) << described;
  EXPECT_EQ(described, kernel.describe(with, with));
  // Nothing to take them from: dtypes and ranks only.
  const std::string bare = kernel.describe(without, without);
  EXPECT_NE(bare.find("query float16 (4-d)"), std::string::npos) << bare;
  EXPECT_NE(bare.find("actual_seq_lengths_kv [64, 64]"), std::string::npos) << bare;
}

TEST(FiaCheckUpdate, RefusesShapeDtypeLayoutHeadsAndFlagChanges) {
  const Args a = make_args(1);
  EXPECT_EQ(check(a, make_args(2)), "query is not updatable (captured with float16[2, 4, 1, 16], updated with float16[2, 4, 2, 16])");

  Args kv = make_args(1);
  std::vector<double> x;
  kv.k = random_tensor(x, {2, 2, 32, 16}, DType::f16, 9);
  kv.v = random_tensor(x, {2, 2, 32, 16}, DType::f16, 10);
  EXPECT_EQ(check(a, kv), "key is not updatable (captured with float16[2, 2, 64, 16], updated with float16[2, 2, 32, 16])");

  Args dt = make_args(1);
  dt.q = random_tensor(x, dt.q.shape(), DType::bf16, 11);
  dt.k = random_tensor(x, dt.k.shape(), DType::bf16, 12);
  dt.v = random_tensor(x, dt.v.shape(), DType::bf16, 13);
  dt.out = filled_tensor(dt.q.shape(), DType::bf16, 0);
  EXPECT_EQ(check(a, dt), "query is not updatable (captured with float16[2, 4, 1, 16], updated with bfloat16[2, 4, 1, 16])");

  // The same memory seen as BSND [2, 1, 4, 16]: a layout change.
  Args lay = make_args(1);
  lay.opt.input_layout = "BSND";
  lay.q = lay.q.view({2, 1, 4, 16});
  lay.out = lay.out.view({2, 1, 4, 16});
  lay.k = random_tensor(x, {2, 64, 2, 16}, DType::f16, 14);
  lay.v = random_tensor(x, {2, 64, 2, 16}, DType::f16, 15);
  EXPECT_EQ(check(a, lay), "input_layout is not updatable (captured with BNSD, updated with BSND)");
  Args lay2 = make_args(2);
  Args lay3 = lay2;
  lay3.opt.input_layout = "BNSD_BSND";
  lay3.out = lay3.out.view({2, 2, 4, 16});
  EXPECT_EQ(check(lay2, lay3), "input_layout is not updatable (captured with BNSD, updated with BNSD_BSND)");

  Args heads = make_args(1);
  heads.opt.num_key_value_heads = 0;
  heads.k = random_tensor(x, {2, 4, 64, 16}, DType::f16, 16);
  heads.v = random_tensor(x, {2, 4, 64, 16}, DType::f16, 17);
  EXPECT_EQ(check(a, heads), "num_key_value_heads is not updatable (captured with 2, updated with 4)");

  Args flag = make_args(1);
  flag.opt.softmax_lse_flag = false;
  EXPECT_EQ(check(a, flag), "softmax_lse_flag is not updatable (captured with true, updated with false)");
}

TEST(FiaCheckUpdate, RefusesOptionalTensorAndModeChanges) {
  const Args base = make_args(4);
  Args mask = base;
  mask.opt.atten_mask = filled_tensor({4, 64}, DType::boolean, 0);
  EXPECT_EQ(check(base, mask), "atten_mask is not updatable (captured with undefined, updated with bool[4, 64])");
  Args mask2 = mask;
  mask2.opt.atten_mask = filled_tensor({4, 65}, DType::boolean, 0);
  EXPECT_EQ(check(mask, mask2), "atten_mask is not updatable (captured with bool[4, 64], updated with bool[4, 65])");
  Args sparse = mask;
  sparse.opt.sparse_mode = 1;
  EXPECT_EQ(check(mask, sparse), "sparse_mode is not updatable (captured with 0, updated with 1)");
  Args precise = base;
  precise.opt.inner_precise = 2;
  EXPECT_EQ(check(base, precise), "inner_precise is not updatable (captured with 0, updated with 2)");
  Args pse = base;
  pse.opt.pse_shift = filled_tensor({1, 4, 4, 64}, DType::f16, 0);
  EXPECT_EQ(check(base, pse), "pse_shift is not updatable (captured with undefined, updated with float16[1, 4, 4, 64])");
  Args quant = base;
  quant.opt.quant_scale2 = filled_tensor({1}, DType::f32, 10);
  quant.out = filled_tensor(base.q.shape(), DType::i8, 0);
  EXPECT_EQ(check(base, quant), "quant_scale2 is not updatable (captured with undefined, updated with float32[1])");

  // TND: the batch count is the number of lengths.
  FiaBuilt t = build_case({.layout = "TND", .mode = 3, .lengths = Lengths::full});
  Args ta{t.q, t.k, t.v, filled_tensor(ng::ops::fia_output_shape(t.q, t.k, t.v, t.opt), DType::f16, 0),
          filled_tensor(ng::ops::fia_lse_shape(t.q, t.k, t.v, t.opt), DType::f32, 0), {}, t.opt};
  ta.ws = filled_tensor({ng::ops::fia_workspace_bytes(t.q, t.k, t.v, t.opt)}, DType::u8, 0);
  Args tb = ta;
  tb.opt.actual_seq_lengths = {7, 14};
  tb.opt.actual_seq_lengths_kv = {70, 140};
  tb.lse = filled_tensor(ng::ops::fia_lse_shape(t.q, t.k, t.v, tb.opt), DType::f32, 0);
  EXPECT_EQ(check(ta, tb), "the batch count (the number of actual_seq_lengths with input_layout TND) is not updatable (captured with 3, updated with 2)");
}

TEST(FiaCheckUpdate, BshNumHeadsChangeIsNamed) {
  std::vector<double> x;
  Args a;
  a.q = random_tensor(x, {1, 1, 64}, DType::f32, 1);
  a.k = random_tensor(x, {1, 8, 64}, DType::f32, 2);
  a.v = random_tensor(x, {1, 8, 64}, DType::f32, 3);
  a.out = filled_tensor(a.q.shape(), DType::f32, 0);
  a.lse = filled_tensor({1}, DType::f32, 0);
  a.opt = {.num_heads = 4};
  a.ws = filled_tensor({ng::ops::fia_workspace_bytes(a.q, a.k, a.v, a.opt)}, DType::u8, 0);
  Args b = a;
  b.opt.num_heads = 8;
  b.ws = filled_tensor({ng::ops::fia_workspace_bytes(b.q, b.k, b.v, b.opt)}, DType::u8, 0);
  EXPECT_EQ(check(a, b), "num_heads is not updatable (captured with 4, updated with 8)");
}

// Captures the `.out` form with `before.opt`, checks replay == eager(before), updates to
// `after.opt`, and checks replay == eager(after), bitwise, and against the reference. `changed`:
// eager(after) must differ from eager(before) (the update really changed something). Both share
// query, key and value.
void expect_update(const FiaBuilt& before, const FiaBuilt& after, bool changed = true) {
  ngtest::CapturedFia c(before.q, before.k, before.v, before.opt);
  ng::ops::FiaResult eager_old, eager_new;
  EXPECT_TRUE(c.replay_equals_eager(before.opt, &eager_old));
  expect_matches(before, c.out, c.lse);
  c.update(after.opt);
  EXPECT_TRUE(c.replay_equals_eager(after.opt, &eager_new));
  if (changed) {
    EXPECT_FALSE(bitwise_equal(eager_new.attention_out, eager_old.attention_out));
  }
  expect_matches(after, c.out, c.lse);
}

TEST(FiaUpdateEachArgument, ActualSeqLengths) {
  const FiaBuilt b = build_case({.layout = "BSH", .mode = 3, .lengths = Lengths::ragged});
  FiaBuilt n = b;
  n.opt.actual_seq_lengths = n.ref.actual_seq_lengths = {2, 7, 5};
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, ActualSeqLengthsKv) {
  const FiaBuilt b = build_case({.layout = "BNSD", .dtype = DType::bf16, .gqa = 2, .mode = 1});
  FiaBuilt n = b;
  n.opt.actual_seq_lengths_kv = n.ref.actual_seq_lengths_kv = {3, 70, 0};
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, DecodeQueryLengthsChangeNothing) {
  // The seed's update: decode ignores actual_seq_lengths, so 29 -> 100 is legal and equal.
  FiaBuilt b = build_case({.layout = "BNSD", .decode = true, .lengths = Lengths::broadcast});
  b.opt.actual_seq_lengths = b.ref.actual_seq_lengths = {29};
  FiaBuilt n = b;
  n.opt.actual_seq_lengths = n.ref.actual_seq_lengths = {100};
  expect_update(b, n, /*changed=*/false);
}

TEST(FiaUpdateEachArgument, PagedKvLengths) {
  const FiaBuilt b = build_case({.layout = "BSND", .gqa = 4, .decode = true, .kv = Kv::paged_bnsd,
                                 .lengths = Lengths::full});
  FiaBuilt n = b;
  n.opt.actual_seq_lengths_kv = n.ref.actual_seq_lengths_kv = {1, 96, 33};
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, TokenLayoutCumulativeLengths) {
  const FiaBuilt b = build_case({.layout = "TND_NTD", .dtype = DType::f32, .mode = 3,
                                 .lengths = Lengths::full});
  FiaBuilt n = b;
  n.opt.actual_seq_lengths = n.ref.actual_seq_lengths = {2, 2, 20};
  n.opt.actual_seq_lengths_kv = n.ref.actual_seq_lengths_kv = {10, 150, 200};
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, ActualSharedPrefixLen) {
  FiaBuilt b = build_case({.layout = "BSND", .mode = 0, .prefix = true});
  b.opt.actual_shared_prefix_len = b.ref.actual_shared_prefix_len = {4};
  FiaBuilt n = b;
  n.opt.actual_shared_prefix_len = n.ref.actual_shared_prefix_len = {1};
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, Scale) {
  const FiaBuilt b = build_case({.layout = "NSD", .dtype = DType::bf16, .mode = 2, .pse = true});
  FiaBuilt n = b;
  n.opt.scale = n.ref.scale = 0.3;
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, PreAndNextTokensBand) {
  const FiaBuilt b = build_case({.layout = "BNSD_BSND", .mode = 4, .lengths = Lengths::full});
  FiaBuilt n = b;
  n.opt.pre_tokens = n.ref.pre_tokens = 1;  // a sliding window of 2 keys
  n.opt.next_tokens = n.ref.next_tokens = 0;
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, PreAndNextTokensWithMask) {
  const FiaBuilt b = build_case({.layout = "BSH", .dtype = DType::f32, .gqa = 4, .mode = 0});
  FiaBuilt n = b;
  n.opt.pre_tokens = n.ref.pre_tokens = 100;
  n.opt.next_tokens = n.ref.next_tokens = -2;
  expect_update(b, n);
}

// Tensor arguments may point at other memory of the same shape: another block table, another
// padding tensor, other quantisation scales.
TEST(FiaUpdateEachArgument, AnotherBlockTable) {
  const FiaBuilt b = build_case({.layout = "BNSD", .decode = true, .kv = Kv::paged_bsh,
                                 .lengths = Lengths::full});
  FiaBuilt n = b;
  n.ref.block_table.assign(b.ref.block_table.rbegin(), b.ref.block_table.rend());
  n.opt.block_table = int_tensor(n.ref.block_table, {3, 3}, DType::i32);
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, AnotherPaddingTensor) {
  const FiaBuilt b = build_case({.layout = "BSND", .mode = 1, .padding = true,
                                 .lengths = Lengths::full});
  FiaBuilt n = b;
  n.opt.actual_seq_lengths = n.ref.actual_seq_lengths = {5, 6, 7};
  n.opt.query_padding_size = int_tensor({0}, {1}, DType::i64);  // 9 - 0 - 7 >= 0
  n.ref.query_padding_size = 0;
  expect_update(b, n);
}

TEST(FiaUpdateEachArgument, AnotherQuantScale) {
  const FiaBuilt b = build_case({.layout = "BSH", .decode = true, .quant = OutQuant::channel_offset});
  FiaBuilt n = b;
  n.opt.quant_scale2 = filled_tensor(b.opt.quant_scale2.shape(), b.opt.quant_scale2.dtype(), 30);
  n.ref.quant_scale2.values.assign(n.ref.quant_scale2.values.size(), 30.0);
  expect_update(b, n);
}

// The seed example with a KV length update: capture with 29 visible keys, update to 61 and a new
// scale, replay; the result equals the eager result of the new arguments bitwise. An update that
// changes a shape, or whose workspace is too small, is refused and nothing is installed.
TEST(FiaTaskUpdate, CaptureUpdateReplayEqualsEagerAndRefusals) {
  const Args a = make_args(1);
  FiaOptions captured = a.opt;
  captured.actual_seq_lengths = {29};  // decode: ignored, as in the seed
  captured.actual_seq_lengths_kv = {29};
  FiaOptions updated = a.opt;
  updated.actual_seq_lengths = {100};
  updated.actual_seq_lengths_kv = {61, 7};
  updated.scale = 0.5;

  ngtest::CapturedFia c(a.q, a.k, a.v, captured);
  EXPECT_EQ(c.out.shape(), a.q.shape());
  EXPECT_EQ(c.lse.shape(), (Shape{2, 4, 1, 1}));
  c.update(updated);
  EXPECT_TRUE(c.replay_equals_eager(updated));

  // A shape change.
  const Args other = make_args(2);
  const Tensor out2 = ng::empty(other.q.shape(), DType::f16);
  const Tensor lse2 = ng::empty({2, 4, 2, 1}, DType::f32);
  const Tensor ws2 = ng::ops::fia_max_workspace(other.q, other.k, other.v, other.opt);
  EXPECT_TRUE(c.refuses_update(
      [&] { ng::ops::fused_infer_attention_score_out(other.q, other.k, other.v, other.opt, ws2, out2, lse2); },
      {"query is not updatable (captured with float16[2, 4, 1, 16], updated with float16[2, 4, 2, 16])"}));
  // A workspace smaller than the update needs.
  const Tensor small = ng::empty({c.ws.numel() - 1}, DType::u8);
  EXPECT_TRUE(c.refuses_update(
      [&] { ng::ops::fused_infer_attention_score_out(a.q, a.k, a.v, updated, small, c.out, c.lse); },
      {"these arguments need " + std::to_string(c.ws.numel()) + " (size it with fia_max_workspace)"}));
  EXPECT_TRUE(c.replay_equals_eager(updated));  // nothing was installed
}

// The allocating form binds its own temporary workspace and outputs, freed when it returns: inside an
// update it is a StateError naming the rule, the update is abandoned (nothing installed, the handle
// free again), and replays keep writing only the captured outputs (nothing the allocator hands out
// later is overwritten).
TEST(FiaTaskUpdate, TheAllocatingFormIsRefusedInsideAnUpdate) {
  const Args a = make_args(1);
  FiaOptions captured = a.opt;
  captured.actual_seq_lengths_kv = {29};
  FiaOptions updated = a.opt;
  updated.actual_seq_lengths_kv = {61, 7};
  ngtest::CapturedFia c(a.q, a.k, a.v, captured);
  {
    ng::StreamGuard on(c.updates);
    ng::task_update_begin(c.updates, c.handle);
    EXPECT_TRUE(throws<ng::StateError>(
        [&] { (void)ng::ops::fused_infer_attention_score(a.q, a.k, a.v, updated); },
        {"allocating form cannot be bound in a task update", ".out form", "nothing was installed"}));
    EXPECT_FALSE(c.updates.is_updating());
  }
  // Memory handed out after the refusal (where the temporaries would have been) is never written.
  const Tensor canary = filled_tensor({4096}, DType::u8, 7);
  const std::vector<double> canary_before = read_back(canary);
  EXPECT_TRUE(c.replay_equals_eager(captured));  // nothing was installed
  EXPECT_EQ(read_back(canary), canary_before);
  // The handle is free again: the .out form updates it.
  c.update(updated);
  EXPECT_TRUE(c.replay_equals_eager(updated));
  EXPECT_EQ(read_back(canary), canary_before);
}

}  // namespace
}  // namespace fia_test
