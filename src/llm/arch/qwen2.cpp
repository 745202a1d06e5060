// Qwen 2 / 2.5 (Note [Architectures]): the Llama layer with biases on the q, k and v projections
// (blk.N.attn_{q,k,v}.bias) and rope over the two halves of each head (llama.cpp's NEOX type).
#include "llm/arch/architecture.hpp"

namespace npugraph::llm {
namespace {

class Qwen2 final : public Architecture {
 public:
  std::string_view name() const override { return "qwen2"; }
  std::span<const LayerTensor> layer_tensors() const override {
    static const std::vector<LayerTensor> table = tensor_table(llama_tensors(), qkv_bias_tensors());
    return table;
  }
  void configure(const GgufFile& f, ModelConfig& c) const override {
    read_llama_keys(f, "qwen2", c);
    c.rope_style = ops::RopeStyle::neox;
  }
  void layer(const LayerStep& s) const override { llama_layer(s); }
};

}  // namespace

const Architecture& qwen2_architecture() {
  static const Qwen2 arch;
  return arch;
}

}  // namespace npugraph::llm
