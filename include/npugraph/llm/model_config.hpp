// A model's shape, read from its GGUF metadata by its architecture (Note [Architectures] in
// src/llm/arch/architecture.hpp) and checked against its tensors.
#pragma once

#include <cstdint>
#include <string>

#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/rope.hpp"

namespace npugraph::llm {

struct ModelConfig {
  std::string name{};               // general.name, for messages
  std::string architecture{};       // general.architecture: "llama", "qwen2", "qwen3", "gemma3"
  std::int64_t layers = 0;          // <arch>.block_count
  std::int64_t hidden = 0;          // <arch>.embedding_length
  std::int64_t heads = 0;           // <arch>.attention.head_count
  std::int64_t kv_heads = 0;        // <arch>.attention.head_count_kv
  std::int64_t head_dim = 0;        // <arch>.attention.key_length, else hidden / heads
  std::int64_t ffn = 0;             // <arch>.feed_forward_length
  std::int64_t vocab = 0;           // <arch>.vocab_size, or the token list's length
  std::int64_t context = 0;         // <arch>.context_length
  double rope_theta = 10000.0;      // <arch>.rope.freq_base
  // Note [RoPE scaling] (npugraph/ops/rope.hpp): <arch>.rope.scaling.type "linear" gives
  // 1 / rope.scaling.factor (1 otherwise); a rope_freqs.weight tensor (Llama 3.1 / 3.2), its factors.
  double rope_freq_scale = 1.0;
  bool rope_freq_factors = false;   // the file has rope_freqs.weight, float32 [head_dim / 2]
  double rms_eps = 1e-5;            // <arch>.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;     // no output.weight: the output projection is token_embd
  // What the architecture's layers have beyond Llama's (set by the architecture, not read):
  ops::RopeStyle rope_style = ops::RopeStyle::norm;  // llama: adjacent pairs; qwen: halves (neox)
  // (The tensors an architecture's layers add — biases, per-head norms — are its tensor table's
  // rows: Note [Tensor tables] in src/llm/arch/architecture.hpp.)
  double embedding_scale = 1.0;     // the embeddings times this (gemma3: sqrt(hidden))
  double attention_scale = 0.0;     // FIA's scale; 0: 1 / sqrt(head_dim)
  // Sliding-window layers (gemma3): every layer but each global_every-th one (layer % global_every
  // == global_every - 1) attends to the last sliding_window tokens only (position p sees keys j with
  // p - sliding_window < j <= p; Note [Sliding window] in src/llm/runner.hpp), with rope base
  // rope_theta_local. 0: none.
  std::int64_t sliding_window = 0;
  std::int64_t global_every = 0;
  double rope_theta_local = 0.0;
  bool is_sliding(std::int64_t layer) const {
    return sliding_window > 0 && global_every > 0 && layer % global_every != global_every - 1;
  }

  // Reads and checks the metadata and every tensor the forward pass needs (names, shapes, and types
  // npugraph computes on: F32 norms and biases; F32/F16 matrices and the ops layer's quantisation
  // types, ops::kQuantTable). ArgumentError naming the file and the key or tensor for anything
  // else — an architecture npugraph does not run included.
  static ModelConfig from_gguf(const GgufFile& file);

  std::int64_t q_dim() const { return heads * head_dim; }
  std::int64_t kv_dim() const { return kv_heads * head_dim; }
};

}  // namespace npugraph::llm
