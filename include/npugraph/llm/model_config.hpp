// A Llama-architecture model's shape, read from its GGUF metadata and checked against its tensors.
#pragma once

#include <cstdint>
#include <string>

#include "npugraph/llm/gguf.hpp"

namespace npugraph::llm {

struct LlamaConfig {
  std::string name{};               // general.name, for messages
  std::int64_t layers = 0;          // llama.block_count
  std::int64_t hidden = 0;          // llama.embedding_length
  std::int64_t heads = 0;           // llama.attention.head_count
  std::int64_t kv_heads = 0;        // llama.attention.head_count_kv
  std::int64_t head_dim = 0;        // hidden / heads (llama.rope.dimension_count must agree)
  std::int64_t ffn = 0;             // llama.feed_forward_length
  std::int64_t vocab = 0;           // llama.vocab_size, or the token list's length
  std::int64_t context = 0;         // llama.context_length
  double rope_theta = 10000.0;      // llama.rope.freq_base
  double rms_eps = 1e-5;            // llama.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;     // no output.weight: the output projection is token_embd

  // Reads and checks the metadata and every tensor the forward pass needs (names, shapes, and types
  // npugraph computes on: F32 norms; F32/F16 matrices and the ops layer's quantisation types, ops::kQuantTable). ArgumentError naming the file
  // and the key or tensor for anything else — an architecture other than llama included.
  static LlamaConfig from_gguf(const GgufFile& file);

  std::int64_t kv_dim() const { return kv_heads * head_dim; }
};

}  // namespace npugraph::llm
