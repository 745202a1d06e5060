#include "npugraph/llm/model_config.hpp"

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
void expect(const GgufFile& f, const std::string& name, const std::vector<std::int64_t>& want, bool matrix) {
  const GgufTensorInfo& t = f.tensor(name);
  const std::vector<std::int64_t> got = t.row_major_shape();
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
  for (std::int64_t l = 0; l < c.layers; ++l) {  // the architecture's table (Note [Tensor tables])
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const LayerTensor& t : arch.layer_tensors()) expect(f, p + t.name, t.shape(c), t.matrix);
  }
  return c;
}

}  // namespace npugraph::llm
