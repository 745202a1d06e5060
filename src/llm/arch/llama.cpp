// The Llama architecture (Llama 2/3, SmolLM2; Note [Architectures]): its metadata keys and its
// layer, which Qwen 2 and 3 reuse with their tensors added (biases; per-head norms).
//
//   h = rmsnorm(x) * attn_norm
//   q, k, v = h Wq^T (+ bq), h Wk^T (+ bk), h Wv^T (+ bv)
//   [qwen3] q, k = rmsnorm of each head * attn_q_norm, attn_k_norm
//   q, k = rope(q), rope(k)          (llama: adjacent pairs, ggml's "norm"; qwen: halves, "neox")
//   cache[slots] = k, v;  a = attention(q, cache)
//   x = x + a Wo^T;  h = rmsnorm(x) * ffn_norm;  x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
#include "llm/arch/architecture.hpp"

#include <cmath>

#include "npugraph/error.hpp"
#include "npugraph/ops/elementwise.hpp"
#include "npugraph/ops/kv_cache.hpp"
#include "npugraph/ops/rms_norm.hpp"
#include "npugraph/ops/rope.hpp"
#include "npugraph/ops/swiglu.hpp"

namespace npugraph::llm {
namespace {

std::int64_t positive(const GgufFile& f, const std::string& key) {
  const auto v = f.get<std::int64_t>(key);
  NG_CHECK_ARG(v > 0, f.name(), ": ", key, " = ", v, ": must be positive");
  return v;
}

class Llama final : public Architecture {
 public:
  std::string_view name() const override { return "llama"; }
  std::span<const LayerTensor> layer_tensors() const override {
    static const std::vector<LayerTensor> table = llama_tensors();
    return table;
  }
  void configure(const GgufFile& f, ModelConfig& c) const override { read_llama_keys(f, "llama", c); }
  void layer(const LayerStep& s) const override { llama_layer(s); }
};

using Shape = std::vector<std::int64_t>;

}  // namespace

std::vector<LayerTensor> llama_tensors() {
  using W = LayerWeights;
  return {
      {"attn_norm.weight", false, [](const ModelConfig& c) { return Shape{c.hidden}; }, ShardBy::whole, nullptr, &W::attn_norm},
      {"attn_q.weight", true, [](const ModelConfig& c) { return Shape{c.q_dim(), c.hidden}; }, ShardBy::query_rows, &W::q},
      {"attn_k.weight", true, [](const ModelConfig& c) { return Shape{c.kv_dim(), c.hidden}; }, ShardBy::kv_rows, &W::k},
      {"attn_v.weight", true, [](const ModelConfig& c) { return Shape{c.kv_dim(), c.hidden}; }, ShardBy::kv_rows, &W::v},
      {"attn_output.weight", true, [](const ModelConfig& c) { return Shape{c.hidden, c.q_dim()}; }, ShardBy::query_cols, &W::o},
      {"ffn_norm.weight", false, [](const ModelConfig& c) { return Shape{c.hidden}; }, ShardBy::whole, nullptr, &W::ffn_norm},
      {"ffn_gate.weight", true, [](const ModelConfig& c) { return Shape{c.ffn, c.hidden}; }, ShardBy::ffn_rows, &W::gate},
      {"ffn_up.weight", true, [](const ModelConfig& c) { return Shape{c.ffn, c.hidden}; }, ShardBy::ffn_rows, &W::up},
      {"ffn_down.weight", true, [](const ModelConfig& c) { return Shape{c.hidden, c.ffn}; }, ShardBy::ffn_cols, &W::down},
  };
}

std::vector<LayerTensor> qkv_bias_tensors() {
  using W = LayerWeights;
  return {
      {"attn_q.bias", false, [](const ModelConfig& c) { return Shape{c.q_dim()}; }, ShardBy::query_rows, nullptr, &W::q_bias},
      {"attn_k.bias", false, [](const ModelConfig& c) { return Shape{c.kv_dim()}; }, ShardBy::kv_rows, nullptr, &W::k_bias},
      {"attn_v.bias", false, [](const ModelConfig& c) { return Shape{c.kv_dim()}; }, ShardBy::kv_rows, nullptr, &W::v_bias},
  };
}

std::vector<LayerTensor> qk_norm_tensors() {
  using W = LayerWeights;
  return {
      {"attn_q_norm.weight", false, [](const ModelConfig& c) { return Shape{c.head_dim}; }, ShardBy::whole, nullptr, &W::q_norm},
      {"attn_k_norm.weight", false, [](const ModelConfig& c) { return Shape{c.head_dim}; }, ShardBy::whole, nullptr, &W::k_norm},
  };
}

const Architecture& llama_architecture() {
  static const Llama arch;
  return arch;
}

void read_llama_keys(const GgufFile& f, const std::string& a, ModelConfig& c) {
  c.layers = positive(f, a + ".block_count");
  c.hidden = positive(f, a + ".embedding_length");
  c.heads = positive(f, a + ".attention.head_count");
  c.kv_heads = f.has(a + ".attention.head_count_kv") ? positive(f, a + ".attention.head_count_kv") : c.heads;
  c.ffn = positive(f, a + ".feed_forward_length");
  c.context = positive(f, a + ".context_length");
  c.rope_theta = f.get_or<float>(a + ".rope.freq_base", 10000.0f);
  c.rms_eps = f.get_or<float>(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  NG_CHECK_ARG(c.heads % c.kv_heads == 0, f.name(), ": ", a, ".attention.head_count = ", c.heads,
               ": must be a multiple of ", a, ".attention.head_count_kv = ", c.kv_heads);
  if (f.has(a + ".attention.key_length")) {
    c.head_dim = positive(f, a + ".attention.key_length");
    const auto value_length = f.get_or<std::int64_t>(a + ".attention.value_length", c.head_dim);
    NG_CHECK_ARG(value_length == c.head_dim, f.name(), ": ", a, ".attention.value_length = ", value_length,
                 ": npugraph needs it equal to ", a, ".attention.key_length = ", c.head_dim);
  } else {
    NG_CHECK_ARG(c.hidden % c.heads == 0, f.name(), ": ", a, ".embedding_length = ", c.hidden,
                 ": must be a multiple of ", a, ".attention.head_count = ", c.heads,
                 " (or the file must give ", a, ".attention.key_length)");
    c.head_dim = c.hidden / c.heads;
  }
  if (auto rope = f.find<std::int64_t>(a + ".rope.dimension_count"))
    NG_CHECK_ARG(*rope == c.head_dim, f.name(), ": ", a, ".rope.dimension_count = ", *rope,
                 ": npugraph rotates the whole head (", c.head_dim, ")");
  const auto tokens = f.find<std::vector<std::string>>("tokenizer.ggml.tokens");
  c.vocab = f.has(a + ".vocab_size") ? positive(f, a + ".vocab_size")
                                     : static_cast<std::int64_t>(tokens ? tokens->size() : 0);
  NG_CHECK_ARG(c.vocab > 0, f.name(), ": neither ", a, ".vocab_size nor tokenizer.ggml.tokens gives the vocabulary");
  NG_CHECK_ARG(c.rms_eps > 0, f.name(), ": ", a, ".attention.layer_norm_rms_epsilon = ", c.rms_eps,
               ": must be positive");
  NG_CHECK_ARG(c.rope_theta > 0, f.name(), ": ", a, ".rope.freq_base = ", c.rope_theta, ": must be positive");
  read_rope_scaling(f, a, c);
}

void read_rope_scaling(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string type = f.get_or<std::string>(a + ".rope.scaling.type", "none");
  if (type == "linear") {
    const auto factor = f.get<float>(a + ".rope.scaling.factor");
    NG_CHECK_ARG(std::isfinite(factor) && factor > 0, f.name(), ": ", a, ".rope.scaling.factor = ", factor,
                 ": must be positive");
    c.rope_freq_scale = 1.0 / factor;
  } else if (auto scale = f.find<float>(a + ".rope.scale_linear"); scale && type == "none") {  // older files
    NG_CHECK_ARG(std::isfinite(*scale) && *scale > 0, f.name(), ": ", a, ".rope.scale_linear = ", *scale,
                 ": must be positive");
    c.rope_freq_scale = 1.0 / *scale;
  } else {
    NG_CHECK_AS(UnsupportedError, type == "none", f.name(), ": ", a, ".rope.scaling.type = '", type,
                "': npugraph runs unscaled rope, 'linear' scaling and Llama 3's rope_freqs factors (not YaRN or "
                "LongRoPE)");
  }
}

void matmul(const Tensor& x, const Matrix& w, const Tensor& bias, const Tensor& out, const ops::QuantLinearOptions& o) {
  if (!w.quant.defined()) return ops::linear_out(x, w.dense, bias, out);
  if (o.activations == ops::Activations::q8 && !ops::quant_traits(w.quant.type()).q8_kernel)
    return ops::weight_quant_linear_out(x, w.quant, bias, out, {.activations = ops::Activations::f32});
  ops::weight_quant_linear_out(x, w.quant, bias, out, o);
}

bool row_count_matters(const Matrix& w, const ops::QuantLinearOptions& o) {
  return w.quant.defined() && o.activations == ops::Activations::q8 && ops::quant_traits(w.quant.type()).q8_kernel &&
         w.quant.layout() != ops::QuantLayout::rows16;
}

void matmul(const Tensor& x, const Matrix& w, const Tensor& bias, const Tensor& out, const LayerStep& s) {
  if (s.split <= 0 || s.n <= ops::kLinearGemvMaxRows || !row_count_matters(w, s.linear))
    return matmul(x, w, bias, out, s.linear);
  matmul(x.narrow(0, 0, s.split), w, bias, out.narrow(0, 0, s.split), s.linear);
  matmul(x.narrow(0, s.split, s.n - s.split), w, bias, out.narrow(0, s.split, s.n - s.split), s.linear);
}

void qkv_projections(const LayerStep& s) {
  const LayerWeights& w = *s.w;
  if (s.qkv1.defined()) {
    matmul(s.h, w.qkv, w.qkv_bias, s.qkv1.view({1, s.qkv1.numel()}), s.linear);
  } else {
    matmul(s.h, w.q, w.q_bias, s.q, s);
    matmul(s.h, w.k, w.k_bias, s.k, s);
    matmul(s.h, w.v, w.v_bias, s.v, s);
  }
}

void gated_ffn(const LayerStep& s, bool gelu) {
  const LayerWeights& w = *s.w;
  if (s.gate_up.defined()) {  // each row's halves: the same elementwise activation(gate) * up
    matmul(s.y, w.gate_up, Tensor(), s.gate_up, s);
    if (gelu) ops::geglu_out(s.gate_up, s.act);
    else ops::swiglu_out(s.gate_up, s.act);
  } else {
    matmul(s.y, w.gate, Tensor(), s.gate, s);
    matmul(s.y, w.up, Tensor(), s.up, s);
    if (gelu) ops::geglu_out(s.gate, s.up, s.act);
    else ops::swiglu_out(s.gate, s.up, s.act);
  }
}

void cache_kv(const LayerStep& s, const Tensor& k3) {
  ops::reshape_and_cache(k3, s.v.view(k3.shape()), s.k_cache, s.v_cache, s.slots, ops::KvCacheLayout::head_major);
}

void llama_layer(const LayerStep& s) {
  const ModelConfig& c = *s.config;
  const LayerWeights& w = *s.w;
  const std::int64_t n = s.n, hd = c.head_dim;
  ops::rms_norm_out(s.x, w.attn_norm, c.rms_eps, s.h);
  qkv_projections(s);
  const Tensor q3 = s.q.view({n, s.heads, hd}), k3 = s.k.view({n, s.kv_heads, hd});
  if (w.q_norm.defined()) {  // qwen3: each head normalised over its head_dim values, in place
    ops::rms_norm_out(q3, w.q_norm, c.rms_eps, q3);
    ops::rms_norm_out(k3, w.k_norm, c.rms_eps, k3);
  }
  const ops::RopeOptions rope{.theta = c.rope_theta, .style = c.rope_style, .freq_scale = c.rope_freq_scale,
                              .freq_factors = s.rope_freqs};
  ops::rotary_embedding_out(s.positions, q3, q3, rope);
  ops::rotary_embedding_out(s.positions, k3, k3, rope);
  cache_kv(s, k3);
  s.attention();
  matmul(s.attn, w.o, Tensor(), s.h, s);
  s.reduce(s.h);
  // x += attention; y = rmsnorm(x)
  ops::add_rms_norm_out(s.x, s.h, w.ffn_norm, c.rms_eps, s.y, Tensor(), s.x);
  gated_ffn(s, false);
  matmul(s.act, w.down, Tensor(), s.h, s);
  s.reduce(s.h);
  ops::add_out(s.x, s.h, s.x);
}

}  // namespace npugraph::llm
