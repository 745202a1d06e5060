// Parity of fused_infer_attention_score against the fp64 reference (test_fia_reference.hpp), over
// layout x dtype x GQA ratio x actual lengths x decode/prefill/band.
//
// Error bound (absolute, on attention_out; inputs are uniform in [-1, 1), so |out| <= max|v| < 1):
// the kernel reads the same rounded inputs as the reference (the conversions are exact), computes in
// float32, and rounds once to the output dtype. The rounding costs at most half an ulp of a value
// below 1: 2^-25 (fp32), 2^-12 = 2.4e-4 (fp16), 2^-9 = 2.0e-3 (bf16). The float32 arithmetic (a dot
// of D = 12 terms, exp, sums over <= 70 columns, each a few ulps of 2^-24 relative) adds ~1e-6 at
// these sizes. Bounds, at about twice the worst case: fp32 1e-5, fp16 5e-4, bf16 4e-3.
// softmax_lse is float32 for every dtype: bound 1e-5 * (1 + |lse|).
#include <cmath>
#include <string>
#include <tuple>

#include "ops/test_fia_reference.hpp"
#include "ops/test_fia_util.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;

enum class Lengths { full, ragged, broadcast };
enum class Mode { decode, prefill, causal, band };

double out_bound(DType t) {
  switch (t) {
    case DType::f32: return 1e-5;
    case DType::f16: return 5e-4;
    case DType::bf16: return 4e-3;
    default: return 0;
  }
}

using ParityParam = std::tuple<std::string, DType, int, Lengths, Mode>;

std::string case_name(const ::testing::TestParamInfo<ParityParam>& info) {
  const auto& [layout, dtype, gqa, lengths, mode] = info.param;
  std::string name = layout + "_" + std::string(ng::dtype_name(dtype)) + "_gqa" + std::to_string(gqa);
  name += lengths == Lengths::full ? "_full" : lengths == Lengths::ragged ? "_ragged" : "_broadcast";
  name += mode == Mode::decode    ? "_decode"
          : mode == Mode::prefill ? "_prefill"
          : mode == Mode::causal  ? "_causal"
                                  : "_band";
  return name;
}

class FiaParity : public ::testing::TestWithParam<ParityParam> {};

TEST_P(FiaParity, MatchesReference) {
  const auto& [layout, dtype, gqa, lengths, mode] = GetParam();
  RefArgs a;
  a.layout = layout;
  a.B = 3;
  a.N = 4;
  a.KVN = a.N / gqa;
  a.Sq = mode == Mode::decode ? 1 : 7;
  a.Skv = 70;  // more than one 64-column softmax block
  a.D = 12;    // not a multiple of the kernel's 8 dot lanes
  a.scale = 0.9;
  switch (mode) {
    case Mode::decode: a.pre_tokens = 0; a.next_tokens = -5; break;  // ignored by decode
    case Mode::prefill: break;
    case Mode::causal: a.next_tokens = 0; break;
    case Mode::band: a.pre_tokens = 3; a.next_tokens = -1; break;  // row 0 sees nothing
  }
  switch (lengths) {
    case Lengths::full: break;
    case Lengths::ragged:
      // q lengths: 0 zero-fills a whole batch; the 4th values are past B and ignored. Decode
      // ignores q lengths (100 > Sq would be an error otherwise).
      a.actual_seq_lengths = mode == Mode::decode ? std::vector<std::int64_t>{100, 0, 1, 999}
                                                  : std::vector<std::int64_t>{7, 3, 0, 999};
      a.actual_seq_lengths_kv = {70, 33, 0, 999};
      break;
    case Lengths::broadcast:
      a.actual_seq_lengths = {mode == Mode::decode ? 100 : 5};
      a.actual_seq_lengths_kv = {41};
      break;
  }

  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, layout_shape(layout, a.B, a.N, a.Sq, a.D), dtype, 1);
  const Tensor k = random_tensor(kv, layout_shape(layout, a.B, a.KVN, a.Skv, a.D), dtype, 2);
  const Tensor v = random_tensor(vv, layout_shape(layout, a.B, a.KVN, a.Skv, a.D), dtype, 3);
  const ng::ops::FiaOptions opt{.actual_seq_lengths = a.actual_seq_lengths,
                                .actual_seq_lengths_kv = a.actual_seq_lengths_kv,
                                .num_heads = a.N,
                                .scale = a.scale,
                                .pre_tokens = a.pre_tokens,
                                .next_tokens = a.next_tokens,
                                .input_layout = layout,
                                .num_key_value_heads = gqa == 1 ? 0 : a.KVN,
                                .softmax_lse_flag = true};
  const ng::ops::FiaResult r = ng::ops::fused_infer_attention_score(q, k, v, opt);
  ng::current_stream().synchronize();
  ASSERT_EQ(r.attention_out.shape(), q.shape());
  ASSERT_EQ(r.attention_out.dtype(), dtype);
  ASSERT_EQ(r.softmax_lse.shape(), (Shape{a.B, a.N, a.Sq, 1}));
  ASSERT_EQ(r.softmax_lse.dtype(), DType::f32);

  const RefResult ref = fia_reference(a, qv, kv, vv);
  const std::vector<double> out = read_back(r.attention_out);
  const std::vector<double> lse = read_back(r.softmax_lse);
  const double bound = out_bound(dtype);
  int failures = 0;
  for (std::size_t i = 0; i < out.size() && failures < 10; ++i)
    if (!(std::abs(out[i] - ref.out[i]) <= bound)) {
      ADD_FAILURE() << "attention_out[" << i << "] = " << out[i] << ", reference " << ref.out[i]
                    << ", bound " << bound;
      ++failures;
    }
  for (std::size_t i = 0; i < lse.size() && failures < 10; ++i) {
    const bool ok = std::isinf(ref.lse[i]) ? lse[i] == ref.lse[i]
                                           : std::abs(lse[i] - ref.lse[i]) <= 1e-5 * (1 + std::abs(ref.lse[i]));
    if (!ok) {
      ADD_FAILURE() << "softmax_lse[" << i << "] = " << lse[i] << ", reference " << ref.lse[i];
      ++failures;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fia, FiaParity,
    ::testing::Combine(::testing::Values("BNSD", "BSND", "BSH"),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16),
                       ::testing::Values(1, 2, 4),
                       ::testing::Values(Lengths::full, Lengths::ragged, Lengths::broadcast),
                       ::testing::Values(Mode::decode, Mode::prefill, Mode::causal, Mode::band)),
    case_name);

}  // namespace
}  // namespace fia_test
