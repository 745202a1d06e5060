// A tiny Llama-architecture GGUF model with random weights, written by the tests (the engine's unit
// tests run on it in a blink; tests/python/llm checks the same forward pass against numpy). With
// architecture "gemma3" it carries Gemma 3's extra tensors (per-head q/k norms, post-sublayer norms)
// and its sliding window.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "llm/gguf_writer.hpp"
#include "llm/tokenizer_file.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/quant.hpp"

namespace ngtest {

struct TinyLlama {
  std::int64_t layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 128, context = 512;
  float rope_theta = 10000.0f, eps = 1e-5f;
  std::string architecture = "llama";
  std::uint32_t seed = 7;
  std::int64_t sliding_window = 0;  // gemma3: <arch>.attention.sliding_window (0: not written)
  bool qkv_bias = false;            // writes attn_q/k/v.bias (what qwen2 needs)
  // ggml type numbers of the layer matrices and of the (tied) embedding. Types without a quantiser
  // in ops::quantize (Q3_K, 11) get zero blocks: for the loader's errors.
  std::uint32_t matrix_type = 3;  // Q4_1
  std::uint32_t embd_type = 8;    // Q8_0
};

// The file's bytes: metadata, the small vocabulary's tokenizer and weights (matrices Q4_1, the
// embedding Q8_0, norms F32; the output projection tied to the embedding).
inline Bytes tiny_llama_bytes(const TinyLlama& o = {}) {
  namespace ops = npugraph::ops;
  const Vocab vocab = small_vocab();
  const auto V = static_cast<std::int64_t>(vocab.tokens.size());
  const std::int64_t kv_dim = o.hidden / o.heads * o.kv_heads;
  std::mt19937 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  GgufWriter w;
  w.str("general.architecture", o.architecture);
  w.str("general.name", "tiny-llama");
  const std::string a = o.architecture;
  w.u32(a + ".block_count", static_cast<std::uint32_t>(o.layers));
  w.u32(a + ".context_length", static_cast<std::uint32_t>(o.context));
  w.u32(a + ".embedding_length", static_cast<std::uint32_t>(o.hidden));
  w.u32(a + ".feed_forward_length", static_cast<std::uint32_t>(o.ffn));
  w.u32(a + ".attention.head_count", static_cast<std::uint32_t>(o.heads));
  w.u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(o.kv_heads));
  w.f32(a + ".rope.freq_base", o.rope_theta);
  w.f32(a + ".attention.layer_norm_rms_epsilon", o.eps);
  w.u32(a + ".vocab_size", static_cast<std::uint32_t>(V));
  w.u32(a + ".rope.dimension_count", static_cast<std::uint32_t>(o.hidden / o.heads));
  if (o.sliding_window > 0) w.u32(a + ".attention.sliding_window", static_cast<std::uint32_t>(o.sliding_window));
  if (o.sliding_window < 0) w.i32(a + ".attention.sliding_window", static_cast<std::int32_t>(o.sliding_window));
  const bool gemma = a == "gemma3";
  w.str("tokenizer.ggml.model", "gpt2");
  w.str("tokenizer.ggml.pre", "smollm");
  w.str_array("tokenizer.ggml.tokens", vocab.tokens);
  w.array<std::int32_t>("tokenizer.ggml.token_type", GgufType::i32, vocab.types);
  w.str_array("tokenizer.ggml.merges", vocab.merges);
  w.u32("tokenizer.ggml.bos_token_id", 1);
  w.u32("tokenizer.ggml.eos_token_id", 2);
  w.u32("tokenizer.ggml.padding_token_id", 2);
  w.boolean("tokenizer.ggml.add_bos_token", false);
  w.str("tokenizer.chat_template", kSmolTemplate);
  auto quantized = [&](const std::string& name, std::int64_t rows, std::int64_t cols, std::uint32_t type,
                       float scale) {
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    for (float& v : values) v = scale * normal(rng);
    if (!ops::is_quant_type(type)) {
      const auto& t = npugraph::llm::ggml_type_traits(static_cast<npugraph::llm::GgmlType>(type));
      w.tensor(name, {cols, rows}, type, Bytes(static_cast<std::size_t>(rows * cols / t.block) * t.block_bytes));
      return;
    }
    const ops::QuantWeight q = ops::quantize(static_cast<ops::QuantType>(type), values, rows, cols);
    const auto* p = static_cast<const std::byte*>(q.bytes().data());
    w.tensor(name, {cols, rows}, static_cast<std::uint32_t>(type), Bytes(p, p + q.bytes().nbytes()));
  };
  auto norm = [&](const std::string& name, std::int64_t width) {
    std::vector<float> g(static_cast<std::size_t>(width));
    for (float& v : g) v = 1.0f + 0.1f * normal(rng);
    w.tensor(name, {width}, 0, as_bytes(g));
  };
  quantized("token_embd.weight", V, o.hidden, o.embd_type, 1.0f);
  norm("output_norm.weight", o.hidden);
  const float s = 1.0f / std::sqrt(static_cast<float>(o.hidden));
  for (std::int64_t l = 0; l < o.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight", o.hidden);
    quantized(p + "attn_q.weight", o.hidden, o.hidden, o.matrix_type, 2 * s);
    quantized(p + "attn_k.weight", kv_dim, o.hidden, o.matrix_type, 2 * s);
    quantized(p + "attn_v.weight", kv_dim, o.hidden, o.matrix_type, s);
    quantized(p + "attn_output.weight", o.hidden, o.hidden, o.matrix_type, s);
    norm(p + "ffn_norm.weight", o.hidden);
    if (o.qkv_bias) {
      norm(p + "attn_q.bias", o.hidden);
      norm(p + "attn_k.bias", kv_dim);
      norm(p + "attn_v.bias", kv_dim);
    }
    if (gemma || a == "qwen3") {
      norm(p + "attn_q_norm.weight", o.hidden / o.heads);
      norm(p + "attn_k_norm.weight", o.hidden / o.heads);
    }
    if (gemma) {
      norm(p + "post_attention_norm.weight", o.hidden);
      norm(p + "post_ffw_norm.weight", o.hidden);
    }
    quantized(p + "ffn_gate.weight", o.ffn, o.hidden, o.matrix_type, s);
    quantized(p + "ffn_up.weight", o.ffn, o.hidden, o.matrix_type, s);
    quantized(p + "ffn_down.weight", o.hidden, o.ffn, o.matrix_type, s);
  }
  return w.build();
}

// Writes the tiny model into the tests' scratch folder and returns its path.
inline std::filesystem::path write_tiny_llama(const std::string& file_name, const TinyLlama& o = {}) {
  const auto path = scratch_dir() / file_name;
  write_file(path, tiny_llama_bytes(o));
  return path;
}

}  // namespace ngtest
