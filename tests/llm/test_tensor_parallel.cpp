// The weights a tensor-parallel rank holds (Note [Tensor-parallel split]): the split rule
// (shard_of), row and column slices of quantised and float matrices against the full matrix's
// values, a rank's layer of the tiny model against the whole model's (stacks included), and the
// named errors for splits the heads, the FFN width or the Q4 blocks do not allow.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/model.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "npugraph/ops/quant.hpp"
#include "support/throws.hpp"

namespace {

namespace llm = npugraph::llm;
namespace ops = npugraph::ops;
using ngtest::throws;

// A matrix's values as float32, row-major (quantised: ggml's dequantisation; dense: float32).
std::vector<float> values(const llm::Matrix& m) {
  std::vector<float> v(static_cast<std::size_t>(m.rows() * m.cols()));
  if (m.quant.defined()) {
    ops::dequantize_rows(m.quant, 0, m.rows(), v.data());
  } else {
    const auto* p = static_cast<const float*>(m.dense.data());
    v.assign(p, p + v.size());
  }
  return v;
}

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of a row-major matrix of `cols` columns.
std::vector<float> block(const std::vector<float>& all, std::int64_t cols, std::int64_t r0, std::int64_t nr,
                         std::int64_t c0, std::int64_t nc) {
  std::vector<float> out;
  for (std::int64_t r = r0; r < r0 + nr; ++r)
    for (std::int64_t c = c0; c < c0 + nc; ++c) out.push_back(all[static_cast<std::size_t>(r * cols + c)]);
  return out;
}

std::vector<float> random_values(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

llm::ModelConfig smollm2_shape() {
  return {.name = "smollm2-shape", .layers = 30, .hidden = 576, .heads = 9, .kv_heads = 3, .head_dim = 64,
          .ffn = 1536, .vocab = 49152, .context = 2048};
}

TEST(LlmTensorParallel, SmolLM2SplitsByKvGroupTwoToOneAndOneEach) {
  const llm::ModelConfig c = smollm2_shape();
  struct Want {
    int rank, size;
    std::int64_t kv0, kv, h0, h, f0, f;
  };
  for (const Want& w : {Want{0, 1, 0, 3, 0, 9, 0, 1536}, Want{0, 2, 0, 2, 0, 6, 0, 768}, Want{1, 2, 2, 1, 6, 3, 768, 768},
                        Want{0, 3, 0, 1, 0, 3, 0, 512}, Want{1, 3, 1, 1, 3, 3, 512, 512},
                        Want{2, 3, 2, 1, 6, 3, 1024, 512}}) {
    const llm::ModelShard s = llm::shard_of(c, {.rank = w.rank, .size = w.size});
    const std::string at = "rank " + std::to_string(w.rank) + " of " + std::to_string(w.size);
    EXPECT_EQ(s.rank, w.rank) << at;
    EXPECT_EQ(s.size, w.size) << at;
    EXPECT_EQ(s.kv_head0, w.kv0) << at;
    EXPECT_EQ(s.kv_heads, w.kv) << at;
    EXPECT_EQ(s.head0, w.h0) << at;
    EXPECT_EQ(s.heads, w.h) << at;
    EXPECT_EQ(s.ffn0, w.f0) << at;
    EXPECT_EQ(s.ffn, w.f) << at;
  }
}

TEST(LlmTensorParallel, SplitsTheModelDoesNotAllowAreNamedErrors) {
  const llm::ModelConfig c = smollm2_shape();
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::shard_of(c, {.rank = 0, .size = 4}); },
                                              {"tensor parallel size = 4", "at most the 3 KV heads", "KV group"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::shard_of(c, {.rank = 0, .size = 0}); },
                                              {"tensor parallel size = 0", "must be >= 1"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::shard_of(c, {.rank = 2, .size = 2}); },
                                              {"tensor parallel rank = 2", "[0, 2)"}));
  llm::ModelConfig odd = c;
  odd.ffn = 1000;
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::shard_of(odd, {.rank = 0, .size = 3}); },
                                              {"tensor parallel size = 3", "must divide the FFN width 1000"}));
}

TEST(LlmTensorParallel, RowAndColumnSlicesOfAQ4MatrixAreThePartsOfTheFullMatrix) {
  const std::int64_t rows = 12, cols = 192;  // 6 blocks per row
  for (ops::QuantType type : {ops::QuantType::q4_1, ops::QuantType::q4_0, ops::QuantType::q8_0}) {
    const std::string at(ops::quant_type_name(type));
    llm::Matrix m;
    m.quant = ops::quantize(type, random_values(rows * cols, 3), rows, cols);
    const std::vector<float> all = values(m);
    const llm::Matrix r = llm::slice_rows(m, 4, 5, "w");
    ASSERT_EQ(r.rows(), 5) << at;
    ASSERT_EQ(r.cols(), cols) << at;
    EXPECT_EQ(values(r), block(all, cols, 4, 5, 0, cols)) << at;
    EXPECT_EQ(r.quant.data(), m.quant.data() + 4 * m.quant.row_bytes()) << at << ": a row slice shares the bytes";
    const llm::Matrix k = llm::slice_cols(m, 64, 96, "w");
    ASSERT_EQ(k.rows(), rows) << at;
    ASSERT_EQ(k.cols(), 96) << at;
    EXPECT_EQ(values(k), block(all, cols, 0, rows, 64, 96)) << at;
    // Both: the part of a rank holding rows 8..11 and the last two blocks of columns.
    EXPECT_EQ(values(llm::slice_cols(llm::slice_rows(m, 8, 4, "w"), 128, 64, "w")), block(all, cols, 8, 4, 128, 64))
        << at;
  }
}

TEST(LlmTensorParallel, SlicesOfAFloatMatrixAreThePartsOfTheFullMatrix) {
  const std::int64_t rows = 6, cols = 40;
  std::vector<float> v = random_values(rows * cols, 5);
  llm::Matrix m;
  m.dense = npugraph::Tensor::from_blob(v.data(), {rows, cols}, npugraph::DType::f32);
  EXPECT_EQ(values(llm::slice_rows(m, 1, 3, "w")), block(v, cols, 1, 3, 0, cols));
  EXPECT_EQ(values(llm::slice_cols(m, 7, 20, "w")), block(v, cols, 0, rows, 7, 20));  // no blocks to keep
}

TEST(LlmTensorParallel, SlicesThatCutABlockOrLeaveTheMatrixAreNamedErrors) {
  llm::Matrix m;
  m.quant = ops::quantize(ops::QuantType::q4_1, random_values(4 * 96, 1), 4, 96);
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::slice_cols(m, 16, 32, "blk.0.attn_output.weight"); },
                                              {"blk.0.attn_output.weight = Q4_1[4, 96]", "columns [16, 48)",
                                               "cut its blocks of 32", "multiple of 32"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::slice_cols(m, 0, 40, "w"); }, {"columns [0, 40)", "Q4_1"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::slice_cols(m, 64, 64, "w"); },
                                              {"columns [64, 128)", "inside its 96 columns"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::slice_rows(m, 3, 2, "w"); },
                                              {"w: rows [3, 5)", "inside its 4 rows"}));
}

TEST(LlmTensorParallel, ARanksLayerIsItsPartOfTheWholeModelStacksIncluded) {
  // The tiny model: hidden 64, 4 query heads and 2 KV heads of 16, FFN 128. Rank 1 of 2: KV head 1,
  // query heads 2-3 (q rows 32..63, k/v rows 16..31, o columns 32..63), FFN columns 64..127.
  const auto path = ngtest::write_tiny_llama("tiny_llama_tp.gguf");
  const auto whole = llm::Model::load(path);
  const auto part = llm::Model::load(path, {.rank = 1, .size = 2});
  const llm::ModelShard& s = part->shard();
  EXPECT_EQ(s.kv_head0, 1);
  EXPECT_EQ(s.kv_heads, 1);
  EXPECT_EQ(s.head0, 2);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.ffn0, 64);
  EXPECT_EQ(s.ffn, 64);
  EXPECT_EQ(whole->shard().heads, 4);
  for (std::size_t l = 0; l < whole->layers.size(); ++l) {
    const llm::LayerWeights &w = whole->layers[l], &p = part->layers[l];
    const std::string at = "layer " + std::to_string(l);
    EXPECT_EQ(values(p.q), block(values(w.q), 64, 32, 32, 0, 64)) << at;
    EXPECT_EQ(values(p.k), block(values(w.k), 64, 16, 16, 0, 64)) << at;
    EXPECT_EQ(values(p.v), block(values(w.v), 64, 16, 16, 0, 64)) << at;
    EXPECT_EQ(values(p.o), block(values(w.o), 64, 0, 64, 32, 32)) << at;
    EXPECT_EQ(values(p.gate), block(values(w.gate), 64, 64, 64, 0, 64)) << at;
    EXPECT_EQ(values(p.up), block(values(w.up), 64, 64, 64, 0, 64)) << at;
    EXPECT_EQ(values(p.down), block(values(w.down), 128, 0, 64, 64, 64)) << at;
    // The stacks are the rank's q | k | v and gate | up rows, one after another.
    std::vector<float> qkv = values(p.q), gate_up = values(p.gate);
    for (const llm::Matrix* m : {&p.k, &p.v}) {
      const std::vector<float> rows = values(*m);
      qkv.insert(qkv.end(), rows.begin(), rows.end());
    }
    const std::vector<float> up = values(p.up);
    gate_up.insert(gate_up.end(), up.begin(), up.end());
    ASSERT_TRUE(p.qkv.defined() && p.gate_up.defined()) << at;
    EXPECT_EQ(p.qkv.rows(), 64) << at;
    EXPECT_EQ(values(p.qkv), qkv) << at;
    EXPECT_EQ(p.gate_up.rows(), 128) << at;
    EXPECT_EQ(values(p.gate_up), gate_up) << at;
  }
  // Replicated: embedding, norms, output projection.
  EXPECT_EQ(values(part->token_embd), values(whole->token_embd));
}

TEST(LlmTensorParallel, AModelWhoseHeadsOrFfnCutAQ4BlockIsANamedError) {
  // head_dim 8: a rank's 2 query heads are 16 columns of w.o, half a block.
  const auto narrow_heads = ngtest::write_tiny_llama("tiny_llama_tp_hd8.gguf", {.heads = 8, .kv_heads = 4});
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [&] { llm::Model::load(narrow_heads, {.rank = 1, .size = 4}); },
      {"tiny_llama_tp_hd8.gguf: tensor 'blk.0.attn_output.weight' (tensor-parallel rank 1 of 4: query heads [2, 4))",
       "columns [16, 32)", "cut its blocks of 32"}));
  EXPECT_NO_THROW(llm::Model::load(narrow_heads, {.rank = 1, .size = 2}));  // 32 columns each
  // FFN 96 over 2 ranks: 48 columns of w.down each.
  const auto odd_ffn = ngtest::write_tiny_llama("tiny_llama_tp_ffn96.gguf", {.ffn = 96});
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [&] { llm::Model::load(odd_ffn, {.rank = 0, .size = 2}); },
      {"tensor 'blk.0.ffn_down.weight' (tensor-parallel rank 0 of 2: FFN columns [0, 48))", "cut its blocks of 32"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [&] { llm::Model::load(odd_ffn, {.rank = 0, .size = 3}); },
      {"tensor parallel size = 3", "at most the 2 KV heads"}));
}

}  // namespace
