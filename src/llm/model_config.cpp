#include "npugraph/llm/model_config.hpp"

#include <initializer_list>
#include <vector>

#include "npugraph/error.hpp"
#include "npugraph/ops/quant.hpp"

namespace npugraph::llm {
namespace {

std::int64_t positive(const GgufFile& f, const char* key) {
  const auto v = f.get<std::int64_t>(key);
  NG_CHECK_ARG(v > 0, f.name(), ": ", key, " = ", v, ": must be positive");
  return v;
}

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
                 ": norm weights must be F32");
}

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const GgufFile& f) {
  const auto arch = f.get<std::string>("general.architecture");
  NG_CHECK_ARG(arch == "llama", f.name(), ": general.architecture = '", arch,
               "': npugraph runs Llama-architecture models ('llama') only");
  LlamaConfig c;
  c.name = f.get_or<std::string>("general.name", f.name());
  c.layers = positive(f, "llama.block_count");
  c.hidden = positive(f, "llama.embedding_length");
  c.heads = positive(f, "llama.attention.head_count");
  c.kv_heads = f.has("llama.attention.head_count_kv") ? positive(f, "llama.attention.head_count_kv") : c.heads;
  c.ffn = positive(f, "llama.feed_forward_length");
  c.context = positive(f, "llama.context_length");
  c.rope_theta = f.get_or<float>("llama.rope.freq_base", 10000.0f);
  c.rms_eps = f.get_or<float>("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  NG_CHECK_ARG(c.hidden % c.heads == 0, f.name(), ": llama.embedding_length = ", c.hidden,
               ": must be a multiple of llama.attention.head_count = ", c.heads);
  NG_CHECK_ARG(c.heads % c.kv_heads == 0, f.name(), ": llama.attention.head_count = ", c.heads,
               ": must be a multiple of llama.attention.head_count_kv = ", c.kv_heads);
  c.head_dim = c.hidden / c.heads;
  if (auto rope = f.find<std::int64_t>("llama.rope.dimension_count"))
    NG_CHECK_ARG(*rope == c.head_dim, f.name(), ": llama.rope.dimension_count = ", *rope,
                 ": npugraph rotates the whole head (", c.head_dim, ")");
  const auto tokens = f.find<std::vector<std::string>>("tokenizer.ggml.tokens");
  c.vocab = f.has("llama.vocab_size") ? positive(f, "llama.vocab_size")
                                      : static_cast<std::int64_t>(tokens ? tokens->size() : 0);
  NG_CHECK_ARG(c.vocab > 0, f.name(), ": neither llama.vocab_size nor tokenizer.ggml.tokens gives the vocabulary");
  NG_CHECK_ARG(c.rms_eps > 0, f.name(), ": llama.attention.layer_norm_rms_epsilon = ", c.rms_eps,
               ": must be positive");
  NG_CHECK_ARG(c.rope_theta > 0, f.name(), ": llama.rope.freq_base = ", c.rope_theta, ": must be positive");

  expect(f, "token_embd.weight", {c.vocab, c.hidden}, true);
  expect(f, "output_norm.weight", {c.hidden}, false);
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  if (!c.tied_embeddings) expect(f, "output.weight", {c.vocab, c.hidden}, true);
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    expect(f, p + "attn_norm.weight", {c.hidden}, false);
    expect(f, p + "attn_q.weight", {c.hidden, c.hidden}, true);
    expect(f, p + "attn_k.weight", {c.kv_dim(), c.hidden}, true);
    expect(f, p + "attn_v.weight", {c.kv_dim(), c.hidden}, true);
    expect(f, p + "attn_output.weight", {c.hidden, c.hidden}, true);
    expect(f, p + "ffn_norm.weight", {c.hidden}, false);
    expect(f, p + "ffn_gate.weight", {c.ffn, c.hidden}, true);
    expect(f, p + "ffn_up.weight", {c.ffn, c.hidden}, true);
    expect(f, p + "ffn_down.weight", {c.hidden, c.ffn}, true);
  }
  return c;
}

}  // namespace npugraph::llm
