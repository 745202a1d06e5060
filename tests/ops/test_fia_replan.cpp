// FIA's re-plan path (Note [FIA re-plan] in ops/attention/fia_plan.hpp): an update that re-issues a
// captured call with the captured tensors and static options starts from the captured plan.
//   - replan_block gives the block build_fia_params gives, byte for byte, over a spread of cases
//     (layouts, decode, paged KV, masks, padding, pse, shared prefix, rope, antiquant, int8 output),
//     with and without the captured output binding;
//   - an update takes the path exactly when same_plan_inputs holds (counted), and its replay equals
//     the eager call with the new arguments, bitwise;
//   - its errors are the full path's, and the update is abandoned.
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"
#include "ops/fia_replan_cases.hpp"
#include "support/captured_fia.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using ng::ops::FiaOptions;

struct Outputs {
  Tensor out, lse, ws;
};

Outputs outputs_for(const FiaBuilt& b) {
  const ng::ops::FiaPlan p = ng::ops::fia_plan(b.q, b.k, b.v, b.opt);
  return {filled_tensor(p.out_shape(), p.out_dtype(), 0),
          filled_tensor(b.opt.softmax_lse_flag ? p.lse_shape() : Shape{1}, DType::f32, 0),
          filled_tensor({p.workspace_bytes()}, DType::u8, 0)};
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

TEST(FiaReplan, TheBlockIsTheFreshPlansBlockByteForByte) {
  const std::vector<FiaCase> cases = replan_cases();
  for (const FiaCase& c : cases) {
    SCOPED_TRACE(c.name());
    const FiaBuilt b = build_case(c);
    const Outputs o = outputs_for(b);
    // What a capture keeps: the plan, and the header as bound to the outputs.
    att::FiaParamBuffer captured_block;
    att::FiaPlan captured(b.q, b.k, b.v, b.opt, captured_block.start());
    att::plan_fia(captured);
    att::FiaParamBuffer bound_block;
    bound_block.start(captured.header);
    att::bind_outputs(captured, o.ws, o.out, o.lse, bound_block.header());
    const att::FiaParams bound = bound_block.header();

    for (const FiaOptions& next : {b.opt, next_host_values(b)}) {
      ASSERT_TRUE(att::same_plan_inputs(captured, b.q, b.k, b.v, next));
      att::FiaParamBuffer fresh;
      att::build_fia_params(b.q, b.k, b.v, next, o.ws, o.out, o.lse, fresh);
      att::FiaParamBuffer replanned, rebound;
      const ng::ops::FiaHostValues host = ng::ops::FiaHostValues::of(next);
      att::replan_block(captured, nullptr, host, o.ws, o.out, o.lse, rebound);
      att::replan_block(captured, &bound, host, o.ws, o.out, o.lse, replanned);
      // The fresh block carries the tensors' dimensions (Note [FIA parameter block]); the re-planned
      // ones leave them out and are otherwise the same bytes.
      const std::span<const std::byte> full = fresh.bytes();
      ASSERT_TRUE(att::fia_block_has_dims(full));
      EXPECT_FALSE(att::fia_block_has_dims(replanned.bytes()));
      EXPECT_FALSE(att::fia_block_has_dims(rebound.bytes()));
      std::vector<std::byte> fresh_without(full.begin(), full.end() - att::kFiaDimsBytes);
      const std::uint32_t none = 0;
      std::memcpy(fresh_without.data() + offsetof(att::FiaParams, has_dims), &none, sizeof none);
      EXPECT_TRUE(same_bytes(fresh_without, rebound.bytes()));
      EXPECT_TRUE(same_bytes(fresh_without, replanned.bytes()));
      // The trailer holds each defined tensor's shape.
      att::FiaTensorDims dims[static_cast<int>(att::FiaArg::count)];
      att::fia_block_dims(full, dims);
      for (const auto& [arg, t] : {std::pair{att::FiaArg::query, &b.q}, {att::FiaArg::key, &b.k},
                                   {att::FiaArg::value, &b.v}})
        for (int d = 0; d < t->dim(); ++d) EXPECT_EQ(dims[static_cast<int>(arg)].d[d], t->shape()[d]);
    }
  }
}

TEST(FiaReplan, SamePlanInputsComparesEveryTensorAndStaticOptionButNoHostValue) {
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .mode = 0, .pse = true});
  att::FiaParamBuffer block;
  att::FiaPlan captured(b.q, b.k, b.v, b.opt, block.start());
  att::plan_fia(captured);
  EXPECT_TRUE(att::same_plan_inputs(captured, b.q, b.k, b.v, next_host_values(b)));
  // Other memory of the same shape, a view of other strides, another dtype: planned again.
  std::vector<double> x;
  const Tensor q2 = random_tensor(x, b.q.shape(), b.q.dtype(), 77);
  EXPECT_FALSE(att::same_plan_inputs(captured, q2, b.k, b.v, b.opt));
  EXPECT_FALSE(att::same_plan_inputs(captured, b.q, b.v, b.v, b.opt));
  FiaOptions o = b.opt;
  o.pse_shift = random_tensor(x, b.opt.pse_shift.shape(), b.opt.pse_shift.dtype(), 78);
  EXPECT_FALSE(att::same_plan_inputs(captured, b.q, b.k, b.v, o));
  o = b.opt;
  o.atten_mask = Tensor();
  EXPECT_FALSE(att::same_plan_inputs(captured, b.q, b.k, b.v, o));
  const std::vector<std::function<void(FiaOptions&)>> static_changes = {
      [](FiaOptions& p) { p.num_heads *= 2; },
      [](FiaOptions& p) { p.input_layout = "BSH"; },
      [](FiaOptions& p) { p.num_key_value_heads = 1; },
      [](FiaOptions& p) { p.sparse_mode = 1; },
      [](FiaOptions& p) { p.inner_precise = 1; },
      [](FiaOptions& p) { p.block_size = 128; },
      [](FiaOptions& p) { p.antiquant_mode = 1; },
      [](FiaOptions& p) { p.softmax_lse_flag = !p.softmax_lse_flag; },
      [](FiaOptions& p) { p.key_antiquant_mode = 1; },
      [](FiaOptions& p) { p.value_antiquant_mode = 1; },
  };
  for (std::size_t i = 0; i < static_changes.size(); ++i) {
    o = b.opt;
    static_changes[i](o);
    EXPECT_FALSE(att::same_plan_inputs(captured, b.q, b.k, b.v, o)) << "change " << i;
  }
}

TEST(FiaReplan, UpdatesWithTheCapturedTensorsTakeThePathAndReplayEqualsEager) {
  for (const FiaCase& c : replan_cases()) {
    SCOPED_TRACE(c.name());
    const FiaBuilt b = build_case(c);
    ngtest::CapturedFia f(b.q, b.k, b.v, b.opt);
    const att::FiaReplanCounts before = att::fia_replan_counts();
    const FiaOptions next = next_host_values(b);
    f.update(next);
    EXPECT_EQ(att::fia_replan_counts().plan, before.plan + 1);
    EXPECT_EQ(att::fia_replan_counts().outputs, before.outputs + 1);
    EXPECT_TRUE(f.replay_equals_eager(next));
    f.update(b.opt);
    EXPECT_TRUE(f.replay_equals_eager(b.opt));
  }
}

TEST(FiaReplan, OtherOutputsKeepThePlanAndOtherInputsPlanAgain) {
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true});
  ngtest::CapturedFia f(b.q, b.k, b.v, b.opt);
  const ng::Stream s = f.updates;
  // Other outputs (same shapes): the captured plan, outputs bound again.
  const Tensor out2 = filled_tensor(f.out.shape(), f.out.dtype(), 0);
  att::FiaReplanCounts before = att::fia_replan_counts();
  ng::task_update_begin(s, f.handle);
  {
    ng::StreamGuard on(s);
    ng::ops::fused_infer_attention_score_out(f.q, f.k, f.v, b.opt, f.ws, out2, f.lse);
  }
  ng::task_update_end(s);
  s.synchronize();
  EXPECT_EQ(att::fia_replan_counts().plan, before.plan + 1);
  EXPECT_EQ(att::fia_replan_counts().outputs, before.outputs);
  f.replay();
  const ng::ops::FiaResult eager = f.eager(b.opt);
  EXPECT_TRUE(bitwise_equal(out2, eager.attention_out));
  // Another query (same shape): planned from scratch, and still right.
  std::vector<double> x;
  const Tensor q2 = random_tensor(x, b.q.shape(), b.q.dtype(), 91);
  before = att::fia_replan_counts();
  ng::task_update_begin(s, f.handle);
  {
    ng::StreamGuard on(s);
    ng::ops::fused_infer_attention_score_out(q2, f.k, f.v, b.opt, f.ws, f.out, f.lse);
  }
  ng::task_update_end(s);
  s.synchronize();
  EXPECT_EQ(att::fia_replan_counts().plan, before.plan);
  f.replay();
  const ng::ops::FiaResult eager2 = ng::ops::fused_infer_attention_score(q2, f.k, f.v, b.opt);
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(f.out, eager2.attention_out));
}

TEST(FiaReplan, ItsErrorsAreTheFullPathsAndTheUpdateIsAbandoned) {
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true});
  ngtest::CapturedFia f(b.q, b.k, b.v, b.opt);
  ASSERT_TRUE(f.replay_equals_eager(b.opt));
  struct Bad {
    std::function<void(FiaOptions&)> change;
    std::vector<std::string> parts;
  };
  const std::int64_t kv_seq = b.k.shape()[2];
  const std::vector<Bad> bad = {
      {[&](FiaOptions& o) { o.actual_seq_lengths_kv = {kv_seq + 1}; },
       {"fused_infer_attention_score: actual_seq_lengths_kv[0] = " + std::to_string(kv_seq + 1),
        "must be <= the key's S dimension"}},
      {[](FiaOptions& o) { o.actual_seq_lengths_kv = {-1}; },
       {"actual_seq_lengths_kv[0] = -1: must be >= 0"}},
      {[](FiaOptions& o) { o.scale = 1e300; }, {"scale = 1e+300: must be finite in float32"}},
  };
  for (const Bad& x : bad) {
    FiaOptions o = b.opt;
    x.change(o);
    // The full path's message (the eager call), then the same words from the update.
    std::string eager_message;
    try {
      (void)ng::ops::fused_infer_attention_score(f.q, f.k, f.v, o);
      ng::device_synchronize();
    } catch (const ng::ArgumentError& e) {
      eager_message = e.what();
    }
    ASSERT_FALSE(eager_message.empty());
    for (const std::string& part : x.parts) EXPECT_NE(eager_message.find(part), std::string::npos) << eager_message;
    const att::FiaReplanCounts before = att::fia_replan_counts();
    EXPECT_TRUE(f.refuses_update(
        [&] { ng::ops::fused_infer_attention_score_out(f.q, f.k, f.v, o, f.ws, f.out, f.lse); },
        {eager_message}));
    EXPECT_EQ(att::fia_replan_counts().plan, before.plan);  // it failed before launching
    EXPECT_TRUE(f.replay_equals_eager(b.opt));             // nothing was installed
  }
}

TEST(FiaReplan, ACallCapturedFromAPublicPlanTakesThePathToo) {
  const FiaBuilt b = build_case({.layout = "BSH", .mode = 1});
  const ng::ops::FiaPlan plan = ng::ops::fia_plan(b.q, b.k, b.v, b.opt);
  const Outputs o = outputs_for(b);
  ng::Graph g;
  ng::TaskGroupHandle h;
  {
    ng::CaptureScope scope(g);
    const ng::Stream s = ng::current_stream();
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(plan, o.ws, o.out, o.lse);
    h = ng::task_group_end(s);
  }
  const ng::Stream u = ng::Stream::create();
  const FiaOptions next = next_host_values(b);
  const att::FiaReplanCounts before = att::fia_replan_counts();
  ng::task_update_begin(u, h);
  {
    ng::StreamGuard on(u);
    ng::ops::fused_infer_attention_score_out(b.q, b.k, b.v, next, o.ws, o.out, o.lse);
  }
  ng::task_update_end(u);
  u.synchronize();
  EXPECT_EQ(att::fia_replan_counts().outputs, before.outputs + 1);
  g.replay();
  ng::device_synchronize();
  const ng::ops::FiaResult eager = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, next);
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(o.out, eager.attention_out));
}

}  // namespace
}  // namespace fia_test
