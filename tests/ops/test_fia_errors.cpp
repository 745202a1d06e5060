// Every FIA constraint fails with an ArgumentError naming the argument, the value and the rule, and
// nothing is launched. Base case: BNSD float16, B = 2, N = 4, KV_N = 2, Sq = 3, Skv = 5, D = 8.
// This file: layout, heads, dtypes, shapes, sparse_mode/inner_precise, scale, lengths, outputs and
// workspace. test_fia_errors_features.cpp: masks, pse, padding, paged KV, quantisation, prefix, rope,
// TND/NTD.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/fia_errors.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
using ng::ops::FiaOptions;

TEST_F(FiaErrors, BaseCaseIsValid) {
  EXPECT_NO_THROW(call()());
  EXPECT_NO_THROW(eager()());
  ng::current_stream().synchronize();
}

TEST_F(FiaErrors, Layout) {
  opt.input_layout = "XYZ";
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {kPrefix, "input_layout = \"XYZ\"",
                                        "must be BSH, BSND, BNSD, NSD, TND, NTD, or one of the "
                                        "output forms BNSD_BSND, BSH_BNSD"}));
  EXPECT_TRUE(throws<ng::ArgumentError>(workspace_bytes(), {"input_layout = \"XYZ\""}));
  EXPECT_TRUE(throws<ng::ArgumentError>(eager(), {"input_layout = \"XYZ\""}));
  opt.input_layout = "BSH_BSND";  // not an output form torch_npu has
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"input_layout = \"BSH_BSND\""}));
  opt.input_layout = "TND";  // a 4-D query
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 4, 3, 8]",
                                        "with input_layout TND it must be 3-D [T, N, D]"}));
  opt.input_layout = "BNSD_BSND";  // out is BNSD-shaped
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[2, 4, 3, 8]",
                                        "must have the shape [2, 3, 4, 8]"}));
  opt.input_layout = "BNSD_NBSD";
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"must have the shape [4, 2, 3, 8]"}));
}

TEST_F(FiaErrors, NumHeads) {
  opt.num_heads = 0;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {kPrefix, "num_heads = 0", "must be in [1, 256]"}));
  opt.num_heads = 257;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"num_heads = 257", "must be in [1, 256]"}));
  opt.num_heads = 2;  // the query's N dimension is 4
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 4, 3, 8]", "N dimension (4)", "must equal num_heads = 2"}));
}

TEST_F(FiaErrors, NumKeyValueHeads) {
  opt.num_key_value_heads = -1;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"num_key_value_heads = -1", "must be in [0, num_heads = 4]"}));
  opt.num_key_value_heads = 3;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"num_key_value_heads = 3", "must divide num_heads = 4"}));
  opt.num_key_value_heads = 4;  // the key's N dimension is 2
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = float16[2, 2, 5, 8]", "must equal num_key_value_heads = 4"}));
  // Ratio 128 > 64.
  std::vector<double> x;
  q = random_tensor(x, {1, 1, 128}, DType::f16, 4);
  k = v = random_tensor(x, {1, 1, 1}, DType::f16, 5);
  opt = {.num_heads = 128, .num_key_value_heads = 1};
  EXPECT_TRUE(throws<ng::ArgumentError>(workspace_bytes(), {"num_key_value_heads = 1", "num_heads / num_key_value_heads = 128", "must be <= 64"}));
}

TEST_F(FiaErrors, UndefinedTensors) {
  q = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = undefined", "must be a defined tensor"}));
  SetUp();
  v = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value = undefined", "must be a defined tensor"}));
  SetUp();
  out = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = undefined", "must be a defined tensor"}));
  SetUp();
  lse = Tensor();
  opt.softmax_lse_flag = false;  // required even when not written
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"softmax_lse = undefined", "must be a defined tensor"}));
  SetUp();
  ws = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"workspace = undefined", "must be a defined tensor"}));
}

TEST_F(FiaErrors, Dtypes) {
  std::vector<double> x;
  k = random_tensor(x, k.shape(), DType::bf16, 6);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = bfloat16[2, 2, 5, 8]", "dtype bfloat16 must equal the query's dtype float16",
                                        "or be float16 / bfloat16 under a float32 query"}));
  SetUp();  // a float32 query reads a half cache, not the other way round; value follows the key
  q = random_tensor(x, q.shape(), DType::f32, 7);
  k = random_tensor(x, k.shape(), DType::f32, 8);
  v = random_tensor(x, v.shape(), DType::f16, 9);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value = float16[2, 2, 5, 8]", "must equal the key's dtype float32"}));
  SetUp();
  v = random_tensor(x, v.shape(), DType::f32, 6);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value = float32[2, 2, 5, 8]", "must equal the key's dtype float16"}));
  SetUp();
  q = filled_tensor(q.shape(), DType::i8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = int8[2, 4, 3, 8]", "an int8 query (full quantisation",
                                        "is not supported on CPU"}));
  SetUp();
  q = filled_tensor(q.shape(), DType::u8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = uint8[2, 4, 3, 8]", "dtype must be float32, float16 or bfloat16"}));
  SetUp();
  out = filled_tensor(q.shape(), DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float32[2, 4, 3, 8]", "must have the query's dtype float16"}));
}

TEST_F(FiaErrors, RanksAndShapes) {
  std::vector<double> x;
  q = random_tensor(x, {2, 4, 24}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 4, 24]", "with input_layout BNSD it must be 4-D [B, N, S, D]"}));
  SetUp();
  opt.input_layout = "BSH";
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 4, 3, 8]", "with input_layout BSH it must be 3-D [B, S, H]"}));
  q = random_tensor(x, {2, 3, 30}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 3, 30]", "H = 30 must be a multiple of num_heads = 4"}));
  SetUp();
  q = random_tensor(x, {2, 4, 3, 0}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 4, 3, 0]", "its head dim D must be >= 1"}));
  SetUp();
  q = random_tensor(x, {0, 4, 3, 8}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[0, 4, 3, 8]", "its B dimension must be >= 1"}));
  SetUp();
  q = random_tensor(x, {1, 4, 1, 513}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(workspace_bytes(), {"query = float16[1, 4, 1, 513]", "head dim D = 513 must be <= 512"}));
  SetUp();
  k = random_tensor(x, {3, 2, 5, 8}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = float16[3, 2, 5, 8]", "B dimension (3) must equal the query's (2)"}));
  SetUp();
  k = random_tensor(x, {2, 2, 5, 16}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = float16[2, 2, 5, 16]", "head dim D = 16 must equal the query's (8)"}));
  SetUp();
  v = random_tensor(x, {2, 2, 6, 8}, DType::f16, 7);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value = float16[2, 2, 6, 8]", "its B and S must equal the key's (2, 5); only D may differ"}));
  SetUp();
  out = filled_tensor({2, 4, 3, 4}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[2, 4, 3, 4]", "must have the shape [2, 4, 3, 8] (the output layout, value's D)"}));
  SetUp();
  v = random_tensor(x, {2, 2, 5, 4}, DType::f16, 7);  // value D 4: attention_out D follows it
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[2, 4, 3, 8]", "must have the shape [2, 4, 3, 4]"}));
}

TEST_F(FiaErrors, SparseModeAndInnerPrecise) {
  opt.sparse_mode = 5;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"sparse_mode = 5", "must be in [0, 4]"}));
  opt.sparse_mode = -1;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"sparse_mode = -1", "must be in [0, 4]"}));
  opt.sparse_mode = 1;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = undefined", "sparse_mode = 1 needs a full mask"}));
  for (int mode : {2, 3, 4}) {
    opt.sparse_mode = mode;
    EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = undefined", "sparse_mode = " + std::to_string(mode),
                                          "needs the compressed mask [2048, 2048]"}));
  }
  opt.sparse_mode = 0;
  opt.inner_precise = 4;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"inner_precise = 4", "must be in [0, 3]"}));
  opt.inner_precise = 3;  // accepted: always float32 with row-invalid correction
  EXPECT_NO_THROW(call()());
  ng::current_stream().synchronize();
  std::vector<double> x;
  q = random_tensor(x, {2, 4, 1, 8}, DType::f16, 7);
  out = filled_tensor(q.shape(), DType::f16, 0);
  lse = filled_tensor({2, 4, 1, 1}, DType::f32, 0);
  opt.inner_precise = 2;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"inner_precise = 2", "must be in [0, 1] for decode (query S == 1)"}));
  opt.inner_precise = 0;
  opt.block_size = 128;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_size = 128", "must be 0 without block_table"}));
}

TEST_F(FiaErrors, Scale) {
  opt.scale = std::nan("");
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"scale = nan", "must be finite"}));
  opt.scale = 1e39;  // overflows float32
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"scale = 1e+39", "must be finite in float32"}));
}

TEST_F(FiaErrors, ActualSeqLengths) {
  opt.actual_seq_lengths = {1, 2, 3};  // B = 2: 3 values are fine (the first 2 are used)
  EXPECT_NO_THROW(call()());
  opt.actual_seq_lengths = {};
  opt.actual_seq_lengths_kv = {5, 4, 3};
  EXPECT_NO_THROW(call()());
  ng::current_stream().synchronize();

  SetUp();
  std::vector<double> x;
  q = random_tensor(x, {3, 4, 3, 8}, DType::f16, 8);
  k = v = random_tensor(x, {3, 2, 5, 8}, DType::f16, 9);
  out = filled_tensor(q.shape(), DType::f16, 0);
  lse = filled_tensor({3, 4, 3, 1}, DType::f32, 0);
  ws = filled_tensor({ng::ops::fia_workspace_bytes(q, k, v, opt)}, DType::u8, 0);
  opt.actual_seq_lengths = {1, 2};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths = [1, 2]", "must hold 1 value or at least B = 3 values"}));
  opt.actual_seq_lengths = {1, -2, 3};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths[1] = -2", "must be >= 0"}));
  opt.actual_seq_lengths = {4};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths[0] = 4", "must be <= the query's S dimension (3)"}));
  opt.actual_seq_lengths = {};
  opt.actual_seq_lengths_kv = {5, 6, 5};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv[1] = 6", "must be <= the key's S dimension (5)"}));
  opt.actual_seq_lengths_kv = {5, 5};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv = [5, 5]", "must hold 1 value or at least B = 3 values"}));
  opt.actual_seq_lengths_kv = {-1};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv[0] = -1", "must be >= 0"}));
}

TEST_F(FiaErrors, DecodeStillRejectsNegativeLengths) {
  std::vector<double> x;
  q = random_tensor(x, {2, 4, 1, 8}, DType::f16, 10);
  out = filled_tensor(q.shape(), DType::f16, 0);
  lse = filled_tensor({2, 4, 1, 1}, DType::f32, 0);
  opt.actual_seq_lengths = {100};  // past S = 1: ignored by decode
  opt.sparse_mode = 4;             // ignored by decode
  EXPECT_NO_THROW(call()());
  ng::current_stream().synchronize();
  opt.actual_seq_lengths = {-3};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths[0] = -3", "must be >= 0"}));
  opt.actual_seq_lengths = {};
  opt.actual_seq_lengths_kv = {9};  // kv lengths are still bounded
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv[0] = 9", "must be <= the key's S dimension (5)"}));
}

TEST_F(FiaErrors, SoftmaxLse) {
  lse = filled_tensor({2, 4, 3}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"softmax_lse = float32[2, 4, 3]", "with softmax_lse_flag it must be float32 [B, N, Sq, 1] = [2, 4, 3, 1]"}));
  lse = filled_tensor({2, 4, 3, 1}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"softmax_lse = float16[2, 4, 3, 1]", "must be float32"}));
  lse = filled_tensor({6, 4, 1}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"[B, N, Sq, 1] = [2, 4, 3, 1]"}));
  // Without the flag, anything defined goes.
  opt.softmax_lse_flag = false;
  EXPECT_NO_THROW(call()());
  ng::current_stream().synchronize();
}

TEST_F(FiaErrors, Workspace) {
  const std::int64_t need = ng::ops::fia_workspace_bytes(q, k, v, opt);
  ws = filled_tensor({need - 1}, DType::u8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"workspace = uint8[" + std::to_string(need - 1) + "]",
                                        "workspace has " + std::to_string(need - 1) +
                                            " bytes; these arguments need " + std::to_string(need) +
                                            " (size it with fia_max_workspace)"}));
  ws = filled_tensor({need}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"workspace = float32", "must be a uint8 tensor"}));
  const Tensor big = filled_tensor({2, need}, DType::u8, 0);
  ws = Tensor::from_blob(big.data(), {need}, {2}, DType::u8, big.storage());
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"workspace = uint8", "must be contiguous"}));
}

TEST_F(FiaErrors, OutputsMustBeContiguousAlignedAndNotOverlap) {
  const Tensor big = filled_tensor({2, 4, 3, 16}, DType::f16, 0);
  out = Tensor::from_blob(big.data(), {2, 4, 3, 8}, {192, 48, 16, 1}, DType::f16, big.storage());
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[2, 4, 3, 8]", "must be contiguous"}));
  SetUp();
  out = Tensor::from_blob(q.data(), q.shape(), DType::f16, q.storage());
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[2, 4, 3, 8]", "must not overlap query"}));
  SetUp();
  const std::int64_t need = static_cast<std::int64_t>(ws.nbytes());
  const Tensor shared = filled_tensor({need + 256}, DType::u8, 0);
  lse = Tensor::from_blob(shared.data(), {2, 4, 3, 1}, DType::f32, shared.storage());
  ws = Tensor::from_blob(static_cast<std::byte*>(shared.data()) + 64, {need}, DType::u8,
                         shared.storage());
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"workspace = uint8", "must not overlap softmax_lse"}));
  SetUp();
  const Tensor odd = filled_tensor({q.numel() + 1}, DType::f16, 0);
  q = Tensor::from_blob(static_cast<std::byte*>(odd.data()) + 1, q.shape(), DType::f16, odd.storage());
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query = float16[2, 4, 3, 8]", "aligned to its element size (2 bytes)"}));
}

TEST_F(FiaErrors, NothingLaunchedOnError) {
  out = filled_tensor(q.shape(), DType::f16, 5.0);
  opt.scale = std::nan("");
  EXPECT_ANY_THROW(call()());
  ng::current_stream().synchronize();
  for (double x : read_back(out)) ASSERT_EQ(x, 5.0);
}

}  // namespace
}  // namespace fia_test
