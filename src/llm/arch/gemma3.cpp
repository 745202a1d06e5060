// Gemma 3 (text; Note [Architectures]): its own layer.
//
//   x = embed(tokens) * sqrt(hidden)
//   per layer:  h = rmsnorm(x) * attn_norm
//               q, k, v = h Wq^T, h Wk^T, h Wv^T;  q, k = rmsnorm of each head * attn_q_norm / attn_k_norm
//               q, k = rope(q), rope(k)   (halves; base rope.freq_base on global layers, 10000 on
//                                          sliding-window ones; linear rope scaling on global ones only)
//               a = attention(q, cache), scale 1 / sqrt(head_dim) (query_pre_attn_scalar = head_dim)
//               x = x + rmsnorm(a Wo^T) * post_attention_norm
//               h = rmsnorm(x) * ffn_norm
//               x = x + rmsnorm((gelu_tanh(h Wg^T) * (h Wu^T)) Wd^T) * post_ffw_norm
//   logits = (rmsnorm(x) * output_norm) token_embd^T
// The norms' weights are stored with Gemma's "1 +" already added (llama.cpp's converter does it),
// so they are plain RMSNorm weights here. Every sixth layer (layer % 6 == 5) is global; the others
// attend to the last attention.sliding_window tokens (the query's own included): the runner
// issues their attention through the window at any context (Note [Sliding window] in
// src/llm/runner.hpp), so this layer calls s.attention() as every architecture does.
#include "llm/arch/architecture.hpp"

#include <cmath>

#include "npugraph/error.hpp"
#include "npugraph/ops/elementwise.hpp"
#include "npugraph/ops/rms_norm.hpp"
#include "npugraph/ops/rope.hpp"

namespace npugraph::llm {
namespace {

constexpr const char* kPostAttentionNorm = "post_attention_norm.weight";
constexpr const char* kPostFfwNorm = "post_ffw_norm.weight";

class Gemma3 final : public Architecture {
 public:
  std::string_view name() const override { return "gemma3"; }
  // The Llama tensors, per-head q/k norms, and two that only Gemma 3 reads (LayerWeights::extra):
  // the norms of each sublayer's output.
  std::span<const LayerTensor> layer_tensors() const override {
    using Shape = std::vector<std::int64_t>;
    static const std::vector<LayerTensor> table = tensor_table(
        llama_tensors(), qk_norm_tensors(),
        std::vector<LayerTensor>{
            {kPostAttentionNorm, false, [](const ModelConfig& c) { return Shape{c.hidden}; }},
            {kPostFfwNorm, false, [](const ModelConfig& c) { return Shape{c.hidden}; }},
        });
    return table;
  }

  void configure(const GgufFile& f, ModelConfig& c) const override {
    read_llama_keys(f, "gemma3", c);  // linear rope scaling (Gemma 3 4B and up) applies to global layers only
    c.rope_style = ops::RopeStyle::neox;
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden));
    c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    c.sliding_window = f.get_or<std::int64_t>("gemma3.attention.sliding_window", 0);
    NG_CHECK_ARG(c.sliding_window >= 0, f.name(), ": gemma3.attention.sliding_window = ", c.sliding_window,
                 ": must be positive (or 0: no sliding-window layers)");
    c.global_every = 6;
    c.rope_theta_local = 10000.0;
  }

  void layer(const LayerStep& s) const override {
    const ModelConfig& c = *s.config;
    const LayerWeights& w = *s.w;
    const std::int64_t n = s.n, hd = c.head_dim;
    ops::rms_norm_out(s.x, w.attn_norm, c.rms_eps, s.h);
    qkv_projections(s);
    const Tensor q3 = s.q.view({n, s.heads, hd}), k3 = s.k.view({n, s.kv_heads, hd});
    ops::rms_norm_out(q3, w.q_norm, c.rms_eps, q3);
    ops::rms_norm_out(k3, w.k_norm, c.rms_eps, k3);
    const bool sliding = c.is_sliding(s.layer);
    const ops::RopeOptions rope{.theta = sliding ? c.rope_theta_local : c.rope_theta, .style = c.rope_style,
                                .freq_scale = sliding ? 1.0 : c.rope_freq_scale, .freq_factors = s.rope_freqs};
    ops::rotary_embedding_out(s.positions, q3, q3, rope);
    ops::rotary_embedding_out(s.positions, k3, k3, rope);
    cache_kv(s, k3);
    s.attention();
    matmul(s.attn, w.o, Tensor(), s.h, s);
    s.reduce(s.h);
    ops::rms_norm_out(s.h, w.extra.find(kPostAttentionNorm)->second.dense, c.rms_eps, s.h);
    // x += attention; y = rmsnorm(x)
    ops::add_rms_norm_out(s.x, s.h, w.ffn_norm, c.rms_eps, s.y, Tensor(), s.x);
    gated_ffn(s, true);
    matmul(s.act, w.down, Tensor(), s.h, s);
    s.reduce(s.h);
    ops::rms_norm_out(s.h, w.extra.find(kPostFfwNorm)->second.dense, c.rms_eps, s.h);
    ops::add_out(s.x, s.h, s.x);
  }
};

}  // namespace

const Architecture& gemma3_architecture() {
  static const Gemma3 arch;
  return arch;
}

}  // namespace npugraph::llm
