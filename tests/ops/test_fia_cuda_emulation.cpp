// FIA's CUDA kernels without a GPU: the __host__ __device__ math of fia_cuda_core.hpp (Note [FIA
// CUDA kernels]) run by a host loop that emulates the grid exactly as fia_cuda() launches it —
// every block of the attention kernel, its threads phase by phase (Exec::phase), then every block
// of the combine kernel — over parameter blocks the op builds, compared with the independent
// float64 reference of the parity harness (fia_reference.cpp) and with the CPU op. Plus the host
// decision of what the CUDA backend refuses (fia_cuda_unsupported). Runs in every build but the
// TSan one (the header is plain C++ without nvcc, so NPUGRAPH_CUDA=OFF runs it too); it says
// nothing about a GPU run, which has not happened yet.
//
// Tolerance: the emulation sums the dot products in a different order (one fused multiply-add
// chain over D) than the CPU kernels and the reference, so equality is not expected; the bounds
// are the parity harness's (fia_case.hpp: eps * max(1, |ref|), eps = 1e-5 fp32, 5e-4 fp16, 4e-3
// bf16; lse 1e-5 * (1 + |ref|)) against the float64 reference, and twice eps against the CPU op
// (both may round a value to a neighbour). The float16/bfloat16 conversions are checked bit for
// bit against the library's half/bfloat16 over every 16-bit pattern.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "ops/attention/fia_cuda_core.hpp"
#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
using ngtest::expect_close;
namespace att = ng::ops::attention;
namespace cc = att::cuda_core;

// The host's Exec: the threads of a phase one after another (Note [FIA CUDA kernels]: inside a
// phase each thread writes only its own elements).
struct HostExec {
  std::vector<std::array<float, cc::kAcc>>& acc;
  int phases = 0;
  template <class F>
  void phase(F&& f) {
    ++phases;
    for (int t = 0; t < cc::kThreads; ++t) f(t, acc[t].data());
  }
};

struct EmulationStats {
  std::int64_t blocks = 0, exited = 0, phases = 0;
};

// Runs a parameter block as fia_cuda() launches it: the grid of geometry(), then the combine.
EmulationStats emulate(std::span<const std::byte> bytes) {
  std::vector<std::int64_t> aligned(bytes.size() / sizeof(std::int64_t));  // the device copy
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  const void* block = aligned.data();
  const auto& p = *static_cast<const att::FiaParams*>(block);
  const cc::Geometry g = cc::geometry(p.key, p.plan);
  auto sh = std::make_unique<cc::Shared>();
  std::vector<std::array<float, cc::kAcc>> acc(cc::kThreads);
  EmulationStats st;
  for (std::int64_t z = 0; z < g.batch; ++z)
    for (std::int64_t y = 0; y < g.splits; ++y)
      for (std::int64_t x = 0; x < g.grid_x(); ++x) {
        // Shared memory and registers start as garbage (NaN): a read of something no phase wrote
        // shows up in the results.
        std::memset(static_cast<void*>(sh.get()), 0xff, sizeof(cc::Shared));
        for (auto& a : acc) a.fill(std::nanf(""));
        HostExec ex{acc};
        cc::attention_block(block, cc::Coord{x, y, z}, *sh, ex);
        ++st.blocks;
        st.exited += ex.phases <= 1;
        st.phases += ex.phases;
      }
  if (g.split)
    for (std::int64_t row = 0; row < g.batch * g.heads * g.q_seq; ++row)
      for (int t = 0; t < cc::kThreads; ++t) cc::combine_row(block, row, t);
  return st;
}

std::string cuda_refusal(const Tensor& q, const Tensor& k, const Tensor& v,
                         const ng::ops::FiaOptions& o) {
  att::FiaParams scratch;
  att::FiaPlan plan(q, k, v, o, scratch);
  att::plan_fia(plan);
  return att::fia_cuda_unsupported(plan, ng::Device::cuda(0));
}

struct Emulated {
  Tensor out, lse;
  EmulationStats stats;
  att::FiaParamBuffer block;
};

// The op's block for (q, k, v, opt) with fresh outputs (NaN: what the kernels leave untouched
// shows), emulated.
void emulate_op(const Tensor& q, const Tensor& k, const Tensor& v, const ng::ops::FiaOptions& opt,
                Emulated& e) {
  e.out = filled_tensor(ng::ops::fia_output_shape(q, k, v, opt), q.dtype(), NAN);
  e.lse = filled_tensor(ng::ops::fia_lse_shape(q, k, v, opt), DType::f32, NAN);
  const Tensor ws = ng::ops::fia_max_workspace(q, k, v, opt);
  att::build_fia_params(q, k, v, opt, ws, e.out, e.lse, e.block);
  e.stats = emulate(e.block.bytes());
}

void expect_cpu_op_match(const Tensor& q, const Tensor& k, const Tensor& v,
                         const ng::ops::FiaOptions& opt, const Emulated& e) {
  const auto r = ng::ops::fused_infer_attention_score(q, k, v, opt);
  ng::current_stream().synchronize();
  expect_close(e.out, r.attention_out, out_bound(q.dtype()), "attention_out");
  expect_close(e.lse, r.softmax_lse, 1e-5, "softmax_lse");
}

class FiaCudaEmulation : public ::testing::TestWithParam<FiaCase> {};

TEST_P(FiaCudaEmulation, MatchesTheReferenceAndTheCpuOp) {
  const FiaBuilt b = build_case(GetParam());
  ASSERT_EQ(cuda_refusal(b.q, b.k, b.v, b.opt), "");
  Emulated e;
  emulate_op(b.q, b.k, b.v, b.opt, e);
  expect_matches(b, e.out, e.lse);
  expect_cpu_op_match(b.q, b.k, b.v, b.opt, e);
}

// The harness's shapes: B = 3, N = 4, Dk = 12 (Dv 8 with .dv), Sq = 7 (decode 1), Skv = 70 or
// paged capacity 96 / 256 (ragged lengths by default).
INSTANTIATE_TEST_SUITE_P(
    FiaCuda, FiaCudaEmulation,
    ::testing::Values(
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .decode = true},
        FiaCase{.layout = "BSH", .dtype = DType::bf16, .decode = true},
        FiaCase{.layout = "BSND", .dtype = DType::f16, .gqa = 2, .decode = true},
        FiaCase{.layout = "BNSD", .dtype = DType::bf16, .gqa = 4, .decode = true,
                .lengths = Lengths::broadcast},
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .gqa = 2, .decode = true,
                .kv = Kv::paged_bnsd},
        FiaCase{.layout = "BSH", .dtype = DType::bf16, .decode = true, .kv = Kv::paged_bsh},
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .mode = 2},
        FiaCase{.layout = "BSH", .dtype = DType::bf16, .gqa = 2, .mode = 3},
        FiaCase{.layout = "BSND", .dtype = DType::f16, .mode = 4},
        FiaCase{.layout = "BNSD_BSND", .dtype = DType::f16, .mode = 0},
        FiaCase{.layout = "BSH", .dtype = DType::f16, .mode = 1, .kv = Kv::paged_bsh},
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .gqa = 4, .mode = 3, .kv = Kv::paged_bnsd},
        FiaCase{.layout = "BNSD", .dtype = DType::bf16, .pse = true},
        FiaCase{.layout = "BSND", .dtype = DType::f16, .dv = true},
        FiaCase{.layout = "NSD", .dtype = DType::f32, .mode = 3},
        FiaCase{.layout = "BNSD", .dtype = DType::f32, .decode = true, .lengths = Lengths::full}),
    [](const ::testing::TestParamInfo<FiaCase>& i) { return i.param.name(); });

// Decode at a length that splits: B = 3, 8 query heads over 2 KV heads, D = 128, KV lengths
// 1000 / 0 / 513 of 1024 (4, 0 and 3 splits of the 4 the plan allows).
struct SplitDecode {
  Tensor q, k, v;
  ng::ops::FiaOptions opt;
};

SplitDecode split_decode(DType dtype, std::vector<std::int64_t> lengths) {
  std::vector<double> qv, kv, vv;
  SplitDecode s{random_tensor(qv, {3, 8, 1, 128}, dtype, 11),
                random_tensor(kv, {3, 2, 1024, 128}, dtype, 12, -2.0, 2.0),
                random_tensor(vv, {3, 2, 1024, 128}, dtype, 13), {}};
  s.opt.num_heads = 8;
  s.opt.num_key_value_heads = 2;
  s.opt.input_layout = "BNSD";
  s.opt.scale = 0.088;
  s.opt.actual_seq_lengths_kv = std::move(lengths);
  s.opt.softmax_lse_flag = true;
  return s;
}

TEST(FiaCudaEmulationSplits, DecodeSplitsCombineToTheCpuOpAndEmptyBatchesAreZero) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(ng::dtype_name(dtype));
    const SplitDecode s = split_decode(dtype, {1000, 0, 513});
    ASSERT_EQ(cuda_refusal(s.q, s.k, s.v, s.opt), "");
    Emulated e;
    emulate_op(s.q, s.k, s.v, s.opt, e);
    const att::FiaParams& p = e.block.header();
    const cc::Geometry g = cc::geometry(p.key, p.plan);
    EXPECT_TRUE(g.split);
    EXPECT_EQ(g.splits, 4);  // ceil(1024 / kMinSplit)
    EXPECT_EQ(cc::split_count(g, 1000), 4);
    EXPECT_EQ(cc::split_count(g, 0), 0);
    EXPECT_EQ(cc::split_count(g, 513), 3);
    // 3 batches x 4 splits x 2 KV heads x 1 row chunk; the blocks past a batch's splits exit:
    // batch 1 all 4, batch 2 one (x 2 heads).
    EXPECT_EQ(e.stats.blocks, 24);
    EXPECT_EQ(e.stats.exited, 10);
    expect_cpu_op_match(s.q, s.k, s.v, s.opt, e);
    const std::vector<double> out = read_back(e.out), lse = read_back(e.lse);
    for (std::int64_t i = 8 * 128; i < 16 * 128; ++i) ASSERT_EQ(out[i], 0.0) << i;
    for (std::int64_t i = 8; i < 16; ++i) ASSERT_TRUE(std::isinf(lse[i]) && lse[i] > 0) << i;
  }
}

// Decode plans beyond S = 1: query S = 3 with a bottom-right causal band (each row its own band
// within each split; batch 1's third row past its actual length: zeros), and 64 query heads over
// one KV head (two row chunks per KV head, each reading the KV once).
TEST(FiaCudaEmulationSplits, MultiRowDecodePlansSplitAndCombineToTheCpuOp) {
  {
    std::vector<double> qv, kv, vv;
    const Tensor q = random_tensor(qv, {3, 8, 3, 128}, DType::f16, 41);
    const Tensor k = random_tensor(kv, {3, 2, 1024, 128}, DType::f16, 42, -2.0, 2.0);
    const Tensor v = random_tensor(vv, {3, 2, 1024, 128}, DType::f16, 43);
    ng::ops::FiaOptions opt{.num_heads = 8, .scale = 0.088, .input_layout = "BNSD",
                            .num_key_value_heads = 2, .sparse_mode = 3, .softmax_lse_flag = true};
    opt.atten_mask = compressed_mask();
    opt.actual_seq_lengths = {3, 2, 3};
    opt.actual_seq_lengths_kv = {1000, 700, 513};
    ASSERT_EQ(cuda_refusal(q, k, v, opt), "");
    Emulated e;
    emulate_op(q, k, v, opt, e);
    EXPECT_TRUE(cc::geometry(e.block.header().key, e.block.header().plan).split);
    expect_cpu_op_match(q, k, v, opt, e);
  }
  {
    std::vector<double> qv, kv, vv;
    const Tensor q = random_tensor(qv, {2, 64, 1, 128}, DType::bf16, 44);
    const Tensor k = random_tensor(kv, {2, 1, 600, 128}, DType::bf16, 45, -2.0, 2.0);
    const Tensor v = random_tensor(vv, {2, 1, 600, 128}, DType::bf16, 46);
    ng::ops::FiaOptions opt{.num_heads = 64, .scale = 0.088, .input_layout = "BNSD",
                            .num_key_value_heads = 1, .softmax_lse_flag = true};
    opt.actual_seq_lengths_kv = {600, 300};
    Emulated e;
    emulate_op(q, k, v, opt, e);
    const cc::Geometry g = cc::geometry(e.block.header().key, e.block.header().plan);
    EXPECT_EQ(g.row_chunks, 2);
    EXPECT_EQ(g.splits, 3);
    expect_cpu_op_match(q, k, v, opt, e);
  }
}

// An update changes only host values: the new block keeps the grid (geometry is a function of
// what fia_check_update keeps fixed), and the same grid run on it computes the new lengths' result.
TEST(FiaCudaEmulationSplits, AnUpdatedBlockKeepsTheGridAndTakesEffect) {
  const SplitDecode s = split_decode(DType::f16, {1000, 0, 513});
  Emulated e;
  emulate_op(s.q, s.k, s.v, s.opt, e);
  const att::FiaParams before = e.block.header();
  SplitDecode u = split_decode(DType::f16, {33, 1024, 256});
  Emulated f;
  f.out = e.out;
  f.lse = e.lse;
  const Tensor ws = ng::ops::fia_max_workspace(u.q, u.k, u.v, u.opt);
  att::build_fia_params(u.q, u.k, u.v, u.opt, ws, f.out, f.lse, f.block);
  const att::FiaParams& after = f.block.header();
  const cc::Geometry g0 = cc::geometry(before.key, before.plan), g1 = cc::geometry(after.key, after.plan);
  EXPECT_EQ(g0.grid_x(), g1.grid_x());
  EXPECT_EQ(g0.splits, g1.splits);
  EXPECT_EQ(g0.batch, g1.batch);
  f.stats = emulate(f.block.bytes());
  EXPECT_EQ(f.stats.exited, 2 * (4 - 1) + 0 + 2 * (4 - 1));  // 33 (its last tile one column) and 256 columns: one split each
  expect_cpu_op_match(u.q, u.k, u.v, u.opt, f);
}

// Prefill at D = 128 (32 query rows per block, 32 KV columns per tile): several row chunks per
// (batch, KV head), GQA 2, bottom-right causal (sparse_mode 3) against the CPU op; the causal run
// skips the tiles above the diagonal, so it runs fewer phases than the unmasked one.
TEST(FiaCudaEmulationSplits, TiledCausalPrefillSkipsMaskedTilesAndMatchesTheCpuOp) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(ng::dtype_name(dtype));
    std::vector<double> qv, kv, vv;
    const Tensor q = random_tensor(qv, {2, 200, 4, 128}, dtype, 31);
    const Tensor k = random_tensor(kv, {2, 300, 2, 128}, dtype, 32, -2.0, 2.0);
    const Tensor v = random_tensor(vv, {2, 300, 2, 128}, dtype, 33);
    ng::ops::FiaOptions opt{.num_heads = 4, .scale = 0.088, .input_layout = "BSND",
                            .num_key_value_heads = 2, .softmax_lse_flag = true};
    opt.actual_seq_lengths = {200, 150};
    opt.actual_seq_lengths_kv = {300, 170};
    ng::ops::FiaOptions causal = opt;
    causal.sparse_mode = 3;
    causal.atten_mask = compressed_mask();
    ASSERT_EQ(cuda_refusal(q, k, v, causal), "");
    Emulated full, tri;
    emulate_op(q, k, v, opt, full);
    emulate_op(q, k, v, causal, tri);
    const cc::Geometry g = cc::geometry(tri.block.header().key, tri.block.header().plan);
    EXPECT_FALSE(g.split);
    EXPECT_EQ(g.rows, 32);
    EXPECT_EQ(g.cols, 32);
    EXPECT_EQ(g.row_chunks, 13);  // 2 heads x 200 positions per KV head / 32
    expect_cpu_op_match(q, k, v, opt, full);
    expect_cpu_op_match(q, k, v, causal, tri);
    EXPECT_LT(tri.stats.phases * 5, full.stats.phases * 4);  // about a third of the band is masked
  }
}

// A block id outside the cache cannot throw on a GPU: the rows that see it are NaN (the CPU
// kernel raises a TaskError, tests/ops/test_fia_paged.cpp).
TEST(FiaCudaEmulationSplits, ABadBlockIdMakesItsRowsNaNNeverAWildRead) {
  const FiaBuilt b = build_case({.layout = "BNSD", .decode = true, .kv = Kv::paged_bnsd,
                                 .lengths = Lengths::full});
  Emulated e;
  emulate_op(b.q, b.k, b.v, b.opt, e);
  expect_matches(b, e.out, e.lse);
  // The op checked the table when it built the block; the kernel reads it when it runs.
  auto* table = b.opt.block_table.data_ptr<std::int32_t>();
  table[1 * 3 + 2] = static_cast<std::int32_t>(b.ref.num_blocks);
  e.stats = emulate(e.block.bytes());
  const std::vector<double> out = read_back(e.out);
  const std::int64_t row = 4 * 12;  // batch 1's rows: 4 heads x D 12
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(out.size()); ++i) {
    if (i >= row && i < 2 * row) EXPECT_TRUE(std::isnan(out[i])) << i;
    else EXPECT_FALSE(std::isnan(out[i])) << i;
  }
}

TEST(FiaCudaCore, HalfAndBfloat16ConversionsAreTheLibrarysBitForBit) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    ng::half x;
    std::memcpy(static_cast<void*>(&x), &bits, 2);
    const float f = cc::half_to_float(bits);
    const float ref = static_cast<float>(x);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(cc::bits_of(f), cc::bits_of(ref)) << h;
    ASSERT_EQ(cc::float_to_half(f), bits) << h;  // round trip
    ng::bfloat16 y;
    std::memcpy(static_cast<void*>(&y), &bits, 2);
    if (!std::isnan(static_cast<float>(y))) {
      ASSERT_EQ(cc::bf16_to_float(bits), static_cast<float>(y)) << h;
    }
  }
  // Rounding of floats between representable values: the library's conversions (round to
  // nearest even), over a sweep of bit patterns.
  for (std::uint32_t u = 0; u < 0xffffffffu - 0x10000u; u += 0x1357u) {
    const float f = cc::float_of(u);
    if (std::isnan(f)) continue;
    const ng::half h(f);
    const ng::bfloat16 bf(f);
    std::uint16_t hb, bb;
    std::memcpy(&hb, static_cast<const void*>(&h), 2);
    std::memcpy(&bb, static_cast<const void*>(&bf), 2);
    ASSERT_EQ(cc::float_to_half(f), hb) << std::hex << u;
    ASSERT_EQ(cc::float_to_bf16(f), bb) << std::hex << u;
  }
}

// Every argument the CPU op takes and the CUDA kernels do not: refused on the host, naming the
// argument, its value and what is supported.
void expect_refusal(const FiaCase& c, std::initializer_list<const char*> parts) {
  SCOPED_TRACE(c.name());
  const FiaBuilt b = build_case(c);
  const std::string why = cuda_refusal(b.q, b.k, b.v, b.opt);
  EXPECT_NE(why.find("fused_infer_attention_score on cuda:0: "), std::string::npos) << why;
  EXPECT_NE(why.find("not supported on the CUDA backend yet (supported: "), std::string::npos) << why;
  for (const char* part : parts) EXPECT_NE(why.find(part), std::string::npos) << why;
}

TEST(FiaCudaRefusal, NamesTheArgumentTheValueAndWhatIsSupported) {
  expect_refusal({.layout = "TND", .mode = 3}, {"input_layout = TND", "token layouts"});
  expect_refusal({.layout = "NTD_TND", .mode = 3}, {"input_layout = NTD_TND"});
  expect_refusal({.layout = "BNSD", .decode = true, .antiquant = Antiquant::channel},
                 {"key = int8[", "antiquant_mode = 0"});
  expect_refusal({.layout = "BNSD", .decode = true, .antiquant = Antiquant::sep_token},
                 {"key = int8[", "key_antiquant_mode = 1"});
  expect_refusal({.layout = "BSH", .rope = true}, {"query_rope = float16[", "key_rope = float16["});
  expect_refusal({.layout = "BNSD", .decode = true, .prefix = true}, {"key_shared_prefix = float16["});
  expect_refusal({.layout = "BSH", .mode = 3, .padding = true}, {"query_padding_size = int64[1]"});
  expect_refusal({.layout = "BNSD", .quant = OutQuant::tensor}, {"quant_scale2 = "});
  expect_refusal({.layout = "BNSD", .decode = true, .sink = true},
                 {"learnable_sink = float16[4]", "(attention sinks)"});
  {  // a float32 query over a float16 cache: the cpu op's extension, refused on cuda by name
    const FiaBuilt b = build_case({.layout = "BNSD", .decode = true});
    std::vector<double> x = read_back(b.q);
    const Tensor q32 = host_tensor(x, b.q.shape(), DType::f32);
    const std::string why = cuda_refusal(q32, b.k, b.v, b.opt);
    EXPECT_NE(why.find("key = float16["), std::string::npos) << why;
    EXPECT_NE(why.find("a key/value dtype other than the query's float32"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace fia_test
