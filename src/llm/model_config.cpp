#include "npugraph/llm/model_config.hpp"

#include <initializer_list>
#include <vector>

#include "llm/arch/architecture.hpp"
#include "npugraph/error.hpp"
#include "npugraph/ops/quant.hpp"

namespace npugraph::llm {
namespace {

bool matrix_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || ops::is_quant_type(static_cast<std::uint32_t>(t));
}

// Checks tensor `name`: its row-major shape and, for matrices, a type npugraph computes on.
void expect(const GgufFile& f, const std::string& name, std::initializer_list<std::int64_t> shape,
            bool matrix) {
  const GgufTensorInfo& t = f.tensor(name);
  const std::vector<std::int64_t> want(shape), got = t.row_major_shape();
  auto text = [](const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  NG_CHECK_ARG(got == want, f.name(), ": tensor '", name, "' has shape ", text(got), ": the model's ",
               "metadata needs ", text(want));
  if (matrix)
    NG_CHECK_ARG(matrix_type(t.type), f.name(), ": tensor '", name, "' is ", ggml_type_name(t.type),
                 ": npugraph computes on F32, F16, ", ops::quant_type_names(), " matrices");
  else
    NG_CHECK_ARG(t.type == GgmlType::F32, f.name(), ": tensor '", name, "' is ", ggml_type_name(t.type),
                 ": norm weights and biases must be F32");
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  const auto name = f.get<std::string>("general.architecture");
  const Architecture& arch = llm::architecture(name, f.name());
  ModelConfig c;
  c.name = f.get_or<std::string>("general.name", f.name());
  c.architecture = name;
  arch.configure(f, c);

  expect(f, "token_embd.weight", {c.vocab, c.hidden}, true);
  expect(f, "output_norm.weight", {c.hidden}, false);
  c.rope_freq_factors = f.find_tensor("rope_freqs.weight") != nullptr;
  if (c.rope_freq_factors) expect(f, "rope_freqs.weight", {c.head_dim / 2}, false);
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  if (!c.tied_embeddings) expect(f, "output.weight", {c.vocab, c.hidden}, true);
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    expect(f, p + "attn_norm.weight", {c.hidden}, false);
    expect(f, p + "attn_q.weight", {c.q_dim(), c.hidden}, true);
    expect(f, p + "attn_k.weight", {c.kv_dim(), c.hidden}, true);
    expect(f, p + "attn_v.weight", {c.kv_dim(), c.hidden}, true);
    expect(f, p + "attn_output.weight", {c.hidden, c.q_dim()}, true);
    expect(f, p + "ffn_norm.weight", {c.hidden}, false);
    expect(f, p + "ffn_gate.weight", {c.ffn, c.hidden}, true);
    expect(f, p + "ffn_up.weight", {c.ffn, c.hidden}, true);
    expect(f, p + "ffn_down.weight", {c.hidden, c.ffn}, true);
    if (c.qkv_bias) {
      expect(f, p + "attn_q.bias", {c.q_dim()}, false);
      expect(f, p + "attn_k.bias", {c.kv_dim()}, false);
      expect(f, p + "attn_v.bias", {c.kv_dim()}, false);
    }
    if (c.qk_norm) {
      expect(f, p + "attn_q_norm.weight", {c.head_dim}, false);
      expect(f, p + "attn_k_norm.weight", {c.head_dim}, false);
    }
    if (c.post_norms) {
      expect(f, p + "post_attention_norm.weight", {c.hidden}, false);
      expect(f, p + "post_ffw_norm.weight", {c.hidden}, false);
    }
  }
  return c;
}

}  // namespace npugraph::llm
