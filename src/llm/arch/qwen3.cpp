// Qwen 3 (dense; Note [Architectures]): the Llama layer with an RMSNorm over each query and key head
// before rope (blk.N.attn_q_norm / attn_k_norm, head_dim weights each), rope over the two halves of
// each head, no biases; head_dim is qwen3.attention.key_length (128 in every released size, so
// heads * head_dim is not the hidden width in general).
#include "llm/arch/architecture.hpp"

namespace npugraph::llm {
namespace {

class Qwen3 final : public Architecture {
 public:
  std::string_view name() const override { return "qwen3"; }
  std::span<const LayerTensor> layer_tensors() const override {
    static const std::vector<LayerTensor> table = tensor_table(llama_tensors(), qk_norm_tensors());
    return table;
  }
  void configure(const GgufFile& f, ModelConfig& c) const override {
    read_llama_keys(f, "qwen3", c);
    c.rope_style = ops::RopeStyle::neox;
  }
  void layer(const LayerStep& s) const override { llama_layer(s); }
};

}  // namespace

const Architecture& qwen3_architecture() {
  static const Qwen3 arch;
  return arch;
}

}  // namespace npugraph::llm
