// A model loaded from a GGUF file — any architecture of src/llm/arch (Note [Architectures]): its
// shape, tokenizer and weights.
//
// The weights are views of the mapped file (no copy): a block-quantised matrix is an
// ops::QuantWeight over its bytes, a float matrix or norm a Tensor; both keep the file mapped. A
// tensor-parallel rank's column slices (w.o, w.down) and the stacked projections are copies.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "npugraph/llm/gguf.hpp"
#include "npugraph/llm/model_config.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "npugraph/llm/tokenizer.hpp"
#include "npugraph/ops/quant.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::llm {

// A weight matrix [rows, cols]: block-quantised (a type of ops::kQuantTable) or float (F32/F16).
struct Matrix {
  ops::QuantWeight quant;  // defined for block-quantised weights
  Tensor dense;            // defined for float weights, [rows, cols]
  bool defined() const { return quant.defined() || dense.defined(); }
  std::int64_t rows() const { return quant.defined() ? quant.rows() : dense.size(0); }
  std::int64_t cols() const { return quant.defined() ? quant.cols() : dense.size(1); }
};

struct LayerWeights {
  Tensor attn_norm, ffn_norm;  // float32 [hidden]
  Matrix q, k, v, o, gate, up, down;
  // What some architectures' tables add (Note [Tensor tables]), undefined without them: float32
  // biases of q, k, v (qwen2; stacked as qkv_bias beside qkv), per-head norms [head_dim] (qwen3,
  // gemma3).
  Tensor q_bias, k_bias, v_bias, qkv_bias, q_norm, k_norm;
  // Tensors only one architecture reads, by their name after "blk.N." (its table's rows with no
  // member here; gemma3's post-sublayer norms); a vector is a Matrix whose dense tensor is 1-D.
  std::map<std::string, Matrix, std::less<>> extra;
  // The rows of q, k and v (of gate and up) in one matrix, when their types and widths match: one
  // GEMV instead of three (two) for a single token. q, k, v (gate, up) are then views of its rows.
  Matrix qkv, gate_up;
};

// Rows [row0, row0 + rows) of `m`, sharing its bytes (a quantised row is whole blocks).
// Columns [col0, col0 + cols) of `m`, copied into new memory; for a quantised matrix col0 and cols
// must be multiples of its 32-element blocks. `name` is the tensor's, for messages: ArgumentError
// naming it, the range and the rule for a range outside the matrix or one that cuts a block.
Matrix slice_rows(const Matrix& m, std::int64_t row0, std::int64_t rows, const std::string& name);
Matrix slice_cols(const Matrix& m, std::int64_t col0, std::int64_t cols, const std::string& name);

class Model {
 public:
  // Opens, checks (ModelConfig::from_gguf, Tokenizer::from_gguf) and maps the weights. ArgumentError
  // naming the file for a missing file, a malformed one, or a model npugraph does not run.
  // With split.size > 1, only rank split.rank's part of the attention and MLP weights (Note
  // [Tensor-parallel split]); ArgumentError naming the size and the rule for a split the model's
  // heads, FFN width or weight blocks do not allow.
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, TensorSplit split = {});

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  // The heads and FFN columns these weights hold (all of them when loaded whole).
  const ModelShard& shard() const { return shard_; }

  Matrix token_embd;  // [vocab, hidden]
  Matrix output;      // [vocab, hidden]: token_embd when the embeddings are tied
  Tensor output_norm; // float32 [hidden]
  Tensor rope_freqs;  // float32 [head_dim / 2]: ModelConfig::rope_freq_factors, else undefined
  std::vector<LayerWeights> layers;

 private:
  Model() = default;
  std::shared_ptr<GgufFile> file_;
  ModelConfig config_;
  ModelShard shard_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace npugraph::llm
