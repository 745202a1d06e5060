// FIA constraint errors for the optional features: atten_mask, pse_shift, learnable_sink, left padding, paged KV,
// antiquant, the quantised output, the shared prefix, rope and the TND/NTD layouts. Each error
// names the argument, its value and the rule (base case: see test_fia_errors.hpp).
#include <string>
#include <vector>

#include "ops/fia_errors.hpp"

namespace fia_test {
namespace {

class FiaFeatureErrors : public FiaErrors {
 protected:
  // Query S = 1 (decode).
  void make_decode() {
    q = random_tensor(qv, {2, 4, 1, 8}, DType::f16, 11);
    out = filled_tensor(q.shape(), DType::f16, 0);
    lse = filled_tensor({2, 4, 1, 1}, DType::f32, 0);
  }
  // Paged KV: 5 blocks of `bs` rows in the [blocks, KV_N, bs, D] form, table [2, 2].
  void make_paged(std::int64_t bs, DType kv_dtype = DType::f16) {
    k = random_tensor(kv, {5, 2, bs, 8}, kv_dtype, 12, -1, 1);
    v = random_tensor(vv, {5, 2, bs, 8}, kv_dtype, 13, -1, 1);
    opt.block_table = int_tensor({0, 1, 2, -1}, {2, 2}, DType::i32);
    opt.block_size = bs;
    opt.actual_seq_lengths_kv = {bs + 1, bs};
    refresh_workspace();
  }
  // A workspace for the current shapes (when they are valid).
  void refresh_workspace() {
    try {
      ws = filled_tensor({ng::ops::fia_workspace_bytes(q, k, v, opt)}, DType::u8, 0);
    } catch (const ng::ArgumentError&) {
    }
  }
  // int8 key/value with combined per-tensor parameters.
  void make_int8() {
    k = random_tensor(kv, k.shape(), DType::i8, 14, -100, 100);
    v = random_tensor(vv, v.shape(), DType::i8, 15, -100, 100);
    std::vector<double> x{0.01, 0.02};
    opt.antiquant_scale = host_tensor(x, {2}, DType::f16);
  }
  void make_tnd() {
    opt.input_layout = "TND";
    q = random_tensor(qv, {6, 4, 8}, DType::f16, 16);
    k = random_tensor(kv, {9, 2, 8}, DType::f16, 17);
    v = random_tensor(vv, {9, 2, 8}, DType::f16, 18);
    out = filled_tensor(q.shape(), DType::f16, 0);
    lse = filled_tensor({6, 4, 1}, DType::f32, 0);
    opt.actual_seq_lengths = {2, 6};
    opt.actual_seq_lengths_kv = {4, 9};
    refresh_workspace();
  }
  void run_ok() {
    EXPECT_NO_THROW(call()());
    ng::current_stream().synchronize();
  }
};

TEST_F(FiaFeatureErrors, AttenMask) {
  opt.atten_mask = filled_tensor({3, 5}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {kPrefix, "atten_mask = float16[3, 5]", "dtype must be bool, int8 or uint8"}));
  opt.atten_mask = filled_tensor({2, 4, 3, 5}, DType::boolean, 0);  // per-head: not a torch_npu shape
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = bool[2, 4, 3, 5]",
                                        "a full mask must be [Sq, Skv], [B, Sq, Skv] or [B, 1, Sq, Skv] (B may be 1) with B = 2"}));
  opt.atten_mask = filled_tensor({2, 5}, DType::u8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = uint8[2, 5]", "its Sq dimension (2) must be >= the query's S (3)"}));
  opt.atten_mask = filled_tensor({1, 3, 4}, DType::i8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = int8[1, 3, 4]",
                                        "its Skv dimension (4) must be >= the shared prefix plus the key's S (5)"}));
  opt.atten_mask = filled_tensor({4, 8}, DType::boolean, 0);  // larger (padded) is fine
  run_ok();
  opt.sparse_mode = 3;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = bool[4, 8]", "sparse_mode = 3 takes the compressed mask [2048, 2048]"}));
  opt.atten_mask = compressed_mask();
  run_ok();
  make_decode();  // decode ignores sparse_mode: the mask must have a decode shape
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = bool[2048, 2048]", "for decode (query S == 1) it must be [B, Skv]"}));
  opt.atten_mask = filled_tensor({2, 2, 5}, DType::boolean, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = bool[2, 2, 5]", "[B, 1, Skv]"}));
  opt.atten_mask = filled_tensor({1, 1, 1, 5}, DType::boolean, 0);
  run_ok();
}

TEST_F(FiaFeatureErrors, TokenLayoutsTakeNoFullMaskOrPse) {
  make_tnd();
  run_ok();
  opt.atten_mask = filled_tensor({6, 9}, DType::boolean, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = bool[6, 9]", "with input_layout TND only the compressed mask"}));
  opt.sparse_mode = 3;
  opt.atten_mask = compressed_mask();
  run_ok();
  opt.pse_shift = filled_tensor({1, 4, 6, 9}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"pse_shift = float16[1, 4, 6, 9]", "is not supported with input_layout TND"}));
}

TEST_F(FiaFeatureErrors, PseShift) {
  opt.pse_shift = filled_tensor({2, 4, 3, 5}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"pse_shift = float32[2, 4, 3, 5]", "must have the query's dtype float16"}));
  opt.pse_shift = filled_tensor({2, 2, 3, 5}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"pse_shift = float16[2, 2, 3, 5]", "must be [B, N, Sq, Skv] or [1, N, Sq, Skv]"}));
  opt.pse_shift = filled_tensor({3, 4, 3, 5}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"pse_shift = float16[3, 4, 3, 5]", "with B = 2"}));
  opt.pse_shift = filled_tensor({1, 4, 2, 5}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"its Sq dimension (2) must be >= the query's S (3)"}));
  opt.pse_shift = filled_tensor({1, 4, 3, 4}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"its Skv dimension (4) must be >="}));
  opt.pse_shift = filled_tensor({1, 4, 4, 16}, DType::f16, 0);
  run_ok();
}

TEST_F(FiaFeatureErrors, LearnableSink) {
  opt.learnable_sink = filled_tensor({4, 1}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {kPrefix, "learnable_sink = float32[4, 1]", "must be 1-D [N], one value per query head, with N = num_heads = 4"}));
  opt.learnable_sink = filled_tensor({2}, DType::f32, 0);  // num_key_value_heads, not num_heads
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"learnable_sink = float32[2]", "must be 1-D [N]", "N = num_heads = 4"}));
  EXPECT_TRUE(throws<ng::ArgumentError>(eager(), {"learnable_sink = float32[2]"}));
  EXPECT_TRUE(throws<ng::ArgumentError>(workspace_bytes(), {"learnable_sink = float32[2]"}));
  opt.learnable_sink = filled_tensor({4}, DType::i32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"learnable_sink = int32[4]", "dtype must be float32, float16 or bfloat16"}));
  opt.learnable_sink = filled_tensor({4}, DType::i8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"learnable_sink = int8[4]", "dtype must be float32, float16 or bfloat16"}));
  const Tensor host = filled_tensor({4}, DType::f32, 0);
  opt.learnable_sink = Tensor::from_blob(host.data(), {4}, DType::f32, host.storage(), ng::Device::cuda(0));
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"learnable_sink = float32[4]", "must be on the query's device cpu", "not cuda:0"}));
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    opt.learnable_sink = filled_tensor({4}, dt, 0.5);
    run_ok();
  }
}

TEST_F(FiaFeatureErrors, LeftPadding) {
  opt.query_padding_size = int_tensor({1}, {1}, DType::i32);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query_padding_size = int32[1]", "must be an int64 tensor of 1 element"}));
  opt.query_padding_size = int_tensor({1, 1}, {2}, DType::i64);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query_padding_size = int64[2]", "of 1 element"}));
  opt.query_padding_size = int_tensor({1}, {1}, DType::i64);
  run_ok();  // without actual_seq_lengths the padding is ignored (right padding)
  opt.actual_seq_lengths = {2, 3};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query_padding_size = 1", "batch 1's valid rows would start at",
                                        "3 - 1 - 3 < 0"}));
  opt.actual_seq_lengths = {2, 2};
  run_ok();
  opt.query_padding_size = int_tensor({-4}, {1}, DType::i64);  // negative reads as 0
  run_ok();
  opt.kv_padding_size = int_tensor({2}, {1}, DType::i64);
  opt.actual_seq_lengths_kv = {4, 3};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"kv_padding_size = 2", "batch 0's valid rows would start at",
                                        "5 - 2 - 4 < 0"}));
  SetUp();
  opt.kv_padding_size = int_tensor({0}, {1}, DType::i64);
  make_paged(128);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"kv_padding_size = int64[1]", "not supported with paged KV"}));
  SetUp();
  opt.query_padding_size = int_tensor({0}, {1}, DType::i64);
  opt.key_shared_prefix = filled_tensor({1, 2, 2, 8}, DType::f16, 0);
  opt.value_shared_prefix = filled_tensor({1, 2, 2, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query_padding_size = int64[1]", "not supported with a shared prefix"}));
  SetUp();
  make_tnd();
  opt.kv_padding_size = int_tensor({0}, {1}, DType::i64);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"kv_padding_size = int64[1]", "not supported with input_layout TND"}));
}

// max_blocks * block_size past int32 (the reliability issue's unchecked product): refused before
// any block id is read (the table's contents are left uninitialised on purpose).
TEST_F(FiaFeatureErrors, PagedKvCapacityPastInt32IsRefused) {
  make_paged(512);
  opt.block_table = ng::empty({2, (std::int64_t{1} << 22) + 1}, DType::i32);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_table = int32[2, 4194305] with block_size = 512",
                                                 "its capacity max_blocks * block_size must be at most "
                                                 "2147483647 tokens"}));
  make_paged(512);
  run_ok();  // still usable
}

TEST_F(FiaFeatureErrors, PagedKv) {
  make_paged(128);
  run_ok();
  opt.block_table = int_tensor({0, 1, 2, 3}, {2, 2}, DType::i64);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_table = int64[2, 2]", "must be int32 [B, max_blocks]"}));
  opt.block_table = int_tensor({0, 1, 2}, {3, 1}, DType::i32);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_table = int32[3, 1]", "its first dimension must equal B = 2"}));
  opt.block_table = int_tensor({0, 1, 2, -1}, {2, 2}, DType::i32);
  opt.block_size = 64;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_size = 64", "with paged KV and query S > 1 it must be a multiple of 128 in [128, 512]"}));
  opt.block_size = 0;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_size = 0"}));
  opt.block_size = 128;
  opt.actual_seq_lengths_kv = {};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv = []", "paged KV (block_table) needs the KV lengths"}));
  opt.actual_seq_lengths_kv = {257, 1};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv[0] = 257", "must be <= block_table's capacity max_blocks * block_size (256)"}));
  opt.actual_seq_lengths_kv = {129, 128};
  opt.block_table = int_tensor({0, 5, 2, -1}, {2, 2}, DType::i32);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_table[0][1] = 5", "must be in [0, 5) (the key cache's block count)"}));
  opt.block_table = int_tensor({0, 1, -2, 0}, {2, 2}, DType::i32);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_table[1][0] = -2", "must be in [0, 5)"}));
  opt.block_table = int_tensor({0, 1, 2, 99}, {2, 2}, DType::i32);  // [1][1] unused: not checked
  run_ok();
  k = random_tensor(kv, {5, 2, 64, 8}, DType::f16, 20);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = float16[5, 2, 64, 8]", "its block_size dimension (64) must equal block_size = 128"}));
  k = random_tensor(kv, {5, 128, 16}, DType::f16, 20);  // [blocks, bs, H] key, 4-D value
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value = float16[5, 2, 128, 8]", "a paged cache must be [blocks, block_size, H] or [blocks, KV_N, block_size, D]"}));
  v = random_tensor(vv, {4, 128, 16}, DType::f16, 21);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value = float16[4, 128, 16]", "its block count (4) must equal the key's (5)"}));
  // Decode: multiples of 16 (32 for int8 KV); int8 paged KV only for decode.
  SetUp();
  make_decode();
  make_paged(24);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_size = 24", "a positive multiple of 16"}));
  SetUp();
  make_decode();
  make_paged(16, DType::i8);
  std::vector<double> x{0.01, 0.02};
  opt.antiquant_scale = host_tensor(x, {2}, DType::f16);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"block_size = 16", "a positive multiple of 32 (int8 KV)"}));
  SetUp();
  make_paged(128, DType::i8);
  opt.antiquant_scale = host_tensor(x, {2}, DType::f16);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = int8[5, 2, 128, 8]", "paged int8 KV (antiquant) is only supported for decode"}));
}

TEST_F(FiaFeatureErrors, Antiquant) {
  k = random_tensor(kv, k.shape(), DType::i8, 14, -100, 100);
  v = random_tensor(vv, v.shape(), DType::i8, 15, -100, 100);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = int8[2, 2, 5, 8]", "int8 key/value need antiquant_scale, or key_antiquant_scale and value_antiquant_scale"}));
  SetUp();
  std::vector<double> x{0.01, 0.02};
  opt.antiquant_scale = host_tensor(x, {2}, DType::f16);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_scale/offset = float16[2]", "antiquant parameters need int8 key/value (key is float16)"}));
  make_int8();
  run_ok();
  opt.antiquant_mode = 2;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_mode = 2", "must be 0 (per-channel or per-tensor) or 1 (per-token)"}));
  opt.antiquant_mode = 0;
  opt.antiquant_scale = filled_tensor({2, 3, 8}, DType::f16, 0.01);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_scale = float16[2, 3, 8]",
                                        "must be [2], [2, KV_N, 1, D], [2, KV_N, D] or [2, H] with KV_N = 2, D = 8, H = 16"}));
  opt.antiquant_scale = filled_tensor({2, 2, 8}, DType::f32, 0.01);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_scale = float32[2, 2, 8]", "must have the query's dtype float16"}));
  opt.antiquant_scale = filled_tensor({2, 16}, DType::f16, 0.01);
  opt.antiquant_offset = filled_tensor({2, 2, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_offset = float16[2, 2, 8]", "must have antiquant_scale's shape and dtype float16[2, 16]"}));
  opt.antiquant_offset = filled_tensor({2, 16}, DType::f16, 1);
  run_ok();
  opt.antiquant_scale = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_scale = undefined", "needed with antiquant_offset"}));
  opt.antiquant_offset = Tensor();
  opt.antiquant_mode = 1;
  opt.antiquant_scale = filled_tensor({2, 2, 4}, DType::f32, 0.01);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"antiquant_scale = float32[2, 2, 4]", "its S (4) must be >= the key's S (5)"}));
  opt.antiquant_scale = filled_tensor({2, 2, 5}, DType::f16, 0.01);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"per-token antiquant parameters (mode 1) must be float32"}));
  // Combined per-channel parameters need one D.
  SetUp();
  make_int8();
  v = random_tensor(vv, {2, 2, 5, 4}, DType::i8, 15, -100, 100);
  out = filled_tensor({2, 4, 3, 4}, DType::f16, 0);
  opt.antiquant_scale = filled_tensor({2, 16}, DType::f16, 0.01);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"need the key's D (8) to equal the value's (4)"}));
  // Not with TND.
  SetUp();
  make_tnd();
  make_int8();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key = int8[9, 2, 8]", "int8 key/value (antiquant) are not supported with input_layout TND"}));
}

TEST_F(FiaFeatureErrors, SeparateAntiquant) {
  make_int8();
  opt.antiquant_scale = Tensor();
  opt.key_antiquant_scale = filled_tensor({2, 8}, DType::f32, 0.01);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_antiquant_scale = undefined", "needed with key_antiquant_scale"}));
  opt.value_antiquant_scale = filled_tensor({2, 8}, DType::f32, 0.01);
  run_ok();
  opt.key_antiquant_offset = filled_tensor({2, 8}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_antiquant_offset = undefined", "must be given together"}));
  opt.value_antiquant_offset = filled_tensor({2, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_antiquant_offset = float16[2, 8]", "must have value_antiquant_scale's shape and dtype"}));
  opt.value_antiquant_offset = filled_tensor({2, 8}, DType::f32, 0);
  run_ok();
  opt.key_antiquant_mode = 1;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_antiquant_mode = 0", "must equal key_antiquant_mode = 1 (or be 1 with key_antiquant_mode 0)"}));
  opt.key_antiquant_mode = opt.value_antiquant_mode = 2;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_antiquant_mode = 2", "must be in [0, 1] when query S > 1"}));
  opt.key_antiquant_mode = opt.value_antiquant_mode = 6;
  make_decode();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_antiquant_mode = 6", "must be in [0, 5]"}));
  opt.key_antiquant_mode = opt.value_antiquant_mode = 4;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_antiquant_mode = 4", "the paged modes 4 and 5 need block_table"}));
  opt.key_antiquant_mode = opt.value_antiquant_mode = 2;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_antiquant_scale = float32[2, 8]", "per-tensor per-head (mode 2) must be [KV_N] = [2]"}));
  opt.key_antiquant_mode = opt.value_antiquant_mode = 3;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"per-token per-head (mode 3) must be [B, KV_N, S] with B = 2, KV_N = 2, S >= the key's S (5)"}));
  opt.key_antiquant_mode = opt.value_antiquant_mode = 0;
  opt.key_antiquant_scale = filled_tensor({2, 1, 8}, DType::f32, 0.01);  // value stays [2, 8]
  opt.key_antiquant_offset = opt.value_antiquant_offset = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_antiquant_scale = float32[2, 8]", "must have key_antiquant_scale's shape [2, 1, 8]"}));
  opt.key_antiquant_mode = 0;
  opt.value_antiquant_mode = 1;  // key per-channel with value per-token: shapes may differ
  opt.value_antiquant_scale = filled_tensor({1, 2, 5}, DType::f32, 0.01);
  run_ok();
  // Per-token parameters and a shared prefix.
  SetUp();
  make_int8();
  opt.antiquant_mode = 1;
  opt.antiquant_scale = filled_tensor({2, 2, 5}, DType::f32, 0.01);
  opt.key_shared_prefix = filled_tensor({1, 2, 2, 8}, DType::i8, 0);
  opt.value_shared_prefix = filled_tensor({1, 2, 2, 8}, DType::i8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_shared_prefix = int8[1, 2, 2, 8]", "a shared prefix is not supported with per-token antiquant parameters"}));
}

TEST_F(FiaFeatureErrors, QuantisedOutput) {
  for (const char* name : {"dequant_scale1", "quant_scale1", "dequant_scale2"}) {
    SetUp();
    Tensor& t = std::string(name) == "dequant_scale1" ? opt.dequant_scale1
                : std::string(name) == "quant_scale1" ? opt.quant_scale1 : opt.dequant_scale2;
    t = filled_tensor({1}, DType::f32, 1);
    EXPECT_TRUE(throws<ng::ArgumentError>(call(), {std::string(name) + " = float32[1]",
                                          "belongs to an int8 query (full quantisation), which is not supported on CPU"}));
  }
  SetUp();
  opt.quant_offset2 = filled_tensor({1}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_offset2 = float32[1]", "needs quant_scale2"}));
  opt.quant_scale2 = filled_tensor({1}, DType::f32, 50);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[2, 4, 3, 8]", "must be int8 (quant_scale2 is given)"}));
  out = filled_tensor(q.shape(), DType::i8, 0);
  run_ok();
  opt.quant_scale2 = filled_tensor({1}, DType::f16, 50);
  opt.quant_offset2 = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_scale2 = float16[1]", "must be float32 (or bfloat16 with a bfloat16 query)"}));
  opt.quant_scale2 = filled_tensor({4, 4}, DType::f32, 50);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_scale2 = float32[4, 4]", "must hold 1 value (per-tensor) or N * D = 32 values"}));
  opt.quant_scale2 = filled_tensor({1, 1, 32}, DType::f32, 50);
  opt.quant_offset2 = filled_tensor({32}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_offset2 = float32[32]", "must have quant_scale2's shape and dtype float32[1, 1, 32]"}));
  opt.quant_offset2 = filled_tensor({1, 1, 32}, DType::f32, 0);
  run_ok();
  const Tensor big = filled_tensor({64}, DType::f32, 50);
  opt.quant_scale2 = Tensor::from_blob(big.data(), {32}, {2}, DType::f32, big.storage());
  opt.quant_offset2 = Tensor();
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_scale2 = float32[32]", "must be contiguous"}));
  opt.quant_scale2 = filled_tensor({4, 8}, DType::f32, 50);
  opt.query_padding_size = int_tensor({0}, {1}, DType::i64);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_scale2 = float32[4, 8]", "per-channel output quantisation is not supported with left padding"}));
  // Band rules (torch_npu rejects them with an int8 output).
  SetUp();
  out = filled_tensor(q.shape(), DType::i8, 0);
  opt.quant_scale2 = filled_tensor({1}, DType::f32, 50);
  opt.atten_mask = compressed_mask();
  opt.sparse_mode = 4;
  opt.pre_tokens = 2;
  opt.next_tokens = -1;
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"pre_tokens = 2, next_tokens = -1", "sparse_mode 4 with an int8 output (quant_scale2) needs both >= 0"}));
  opt.next_tokens = 0;
  run_ok();
  opt.quant_offset2 = filled_tensor({1}, DType::f32, 1);
  opt.sparse_mode = 3;
  opt.actual_seq_lengths_kv = {5, 2};  // batch 1: 3 query rows, 2 keys: row 0 sees nothing
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"quant_offset2 = float32[1]", "with sparse_mode = 3",
                                        "some query rows of batch 1 (actual lengths 3 and 2) see no key"}));
  opt.actual_seq_lengths_kv = {5, 3};
  run_ok();
}

TEST_F(FiaFeatureErrors, SharedPrefix) {
  opt.key_shared_prefix = filled_tensor({1, 2, 4, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_shared_prefix = undefined", "must be given together"}));
  opt.value_shared_prefix = filled_tensor({1, 2, 4, 8}, DType::f16, 0);
  run_ok();
  opt.value_shared_prefix = filled_tensor({1, 2, 3, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_shared_prefix = float16[1, 2, 3, 8]", "its S must equal key_shared_prefix's (4)"}));
  opt.value_shared_prefix = filled_tensor({2, 2, 4, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_shared_prefix = float16[2, 2, 4, 8]", "its B dimension must be 1"}));
  opt.value_shared_prefix = filled_tensor({1, 2, 4, 8}, DType::bf16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_shared_prefix = bfloat16[1, 2, 4, 8]", "must have the value's dtype float16"}));
  opt.value_shared_prefix = filled_tensor({1, 2, 4, 4}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"value_shared_prefix = float16[1, 2, 4, 4]", "its D must equal the value's (8)"}));
  opt.value_shared_prefix = filled_tensor({1, 2, 4, 8}, DType::f16, 0);
  opt.actual_shared_prefix_len = {5};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_shared_prefix_len = [5]", "must be 1 value in [0, the shared prefix's S = 4]"}));
  opt.actual_shared_prefix_len = {1, 2};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_shared_prefix_len = [1, 2]", "must be 1 value"}));
  opt.actual_shared_prefix_len = {0};
  run_ok();
  // The mask's Skv covers the prefix too.
  opt.actual_shared_prefix_len = {3};
  opt.atten_mask = filled_tensor({3, 7}, DType::boolean, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"atten_mask = bool[3, 7]", "must be >= the shared prefix plus the key's S (8)"}));
  SetUp();
  opt.actual_shared_prefix_len = {1};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_shared_prefix_len = [1]", "needs key_shared_prefix and value_shared_prefix"}));
  SetUp();
  make_paged(128);
  opt.key_shared_prefix = opt.value_shared_prefix = filled_tensor({1, 2, 4, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_shared_prefix = float16[1, 2, 4, 8]", "not supported with paged KV"}));
  SetUp();
  make_tnd();
  opt.key_shared_prefix = opt.value_shared_prefix = filled_tensor({4, 2, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_shared_prefix = float16[4, 2, 8]", "not supported with input_layout TND"}));
}

TEST_F(FiaFeatureErrors, Rope) {
  opt.query_rope = filled_tensor({2, 4, 3, 4}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_rope = undefined", "query_rope and key_rope must be given together"}));
  opt.key_rope = filled_tensor({2, 2, 5, 4}, DType::f16, 0);
  run_ok();
  opt.key_rope_antiquant_scale = filled_tensor({1}, DType::f32, 1);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_rope_antiquant_scale = float32[1]", "is reserved by torch_npu and must be undefined"}));
  opt.key_rope_antiquant_scale = Tensor();
  opt.query_rope = filled_tensor({2, 4, 3, 4}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query_rope = float32[2, 4, 3, 4]", "must have the query's dtype float16"}));
  opt.query_rope = filled_tensor({2, 4, 2, 4}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"query_rope = float16[2, 4, 2, 4]", "must have the query's shape except D"}));
  opt.query_rope = filled_tensor({2, 4, 3, 6}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_rope = float16[2, 2, 5, 4]", "its D (4) must equal query_rope's (6)"}));
  opt.query_rope = filled_tensor({2, 4, 3, 4}, DType::f16, 0);
  opt.key_rope = filled_tensor({2, 2, 6, 4}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_rope = float16[2, 2, 6, 4]", "must have the key's shape except D"}));
  opt.key_rope = filled_tensor({2, 2, 5, 4}, DType::f16, 0);
  opt.key_shared_prefix = opt.value_shared_prefix = filled_tensor({1, 2, 4, 8}, DType::f16, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_shared_prefix = float16[1, 2, 4, 8]", "not supported with query_rope/key_rope"}));
  SetUp();
  make_int8();
  opt.query_rope = filled_tensor({2, 4, 3, 4}, DType::f16, 0);
  opt.key_rope = filled_tensor({2, 2, 5, 4}, DType::i8, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"key_rope = int8[2, 2, 5, 4]", "rope is not supported with int8 key/value"}));
}

TEST_F(FiaFeatureErrors, TokenLayoutLengths) {
  make_tnd();
  opt.actual_seq_lengths = {};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths = []", "with input_layout TND it is required (cumulative query lengths; their count is B)"}));
  EXPECT_TRUE(throws<ng::ArgumentError>(workspace_bytes(), {"actual_seq_lengths = []"}));
  opt.actual_seq_lengths = {4, 2};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths[1] = 2", "cumulative lengths must be >= 0 and non-decreasing (the previous is 4)"}));
  opt.actual_seq_lengths = {2, 7};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths[1] = 7", "must be <= the T dimension (6)"}));
  opt.actual_seq_lengths = {2, 6};
  opt.actual_seq_lengths_kv = {};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv = []", "with input_layout TND it is required (cumulative KV lengths)"}));
  opt.actual_seq_lengths_kv = {9};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv = [9]", "must hold one cumulative length per batch (B = 2"}));
  opt.actual_seq_lengths_kv = {4, 10};
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"actual_seq_lengths_kv[1] = 10", "must be <= the T dimension (9)"}));
  opt.actual_seq_lengths_kv = {4, 9};
  lse = filled_tensor({2, 4, 3, 1}, DType::f32, 0);
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"softmax_lse = float32[2, 4, 3, 1]", "[T, N, 1] = [6, 4, 1]"}));
  lse = filled_tensor({6, 4, 1}, DType::f32, 0);
  run_ok();
  opt.input_layout = "TND_NTD";
  EXPECT_TRUE(throws<ng::ArgumentError>(call(), {"attention_out = float16[6, 4, 8]", "must have the shape [4, 6, 8]"}));
}

}  // namespace
}  // namespace fia_test
