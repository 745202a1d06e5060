// Model architectures: what differs between GGUF model families. Note [Architectures].
//
// Note [Architectures]
// An architecture is three things: its hyper-parameters, read from its own metadata keys
// ("<arch>.block_count", ...) with the features its layers have (rope style, embedding scale,
// sliding window); its layers' tensors, one table (Note [Tensor tables]); and its layer forward, the ops one transformer layer
// issues and their order. One file per architecture in src/llm/arch, as llama.cpp keeps
// src/models/<arch>.cpp: llama.cpp (Llama 2/3, SmolLM2), qwen2.cpp (q/k/v biases, rotate-half
// rope), qwen3.cpp (an RMSNorm over each query and key head before rope, head_dim from
// attention.key_length), gemma3.cpp (its own layer: post-sublayer norms, GeGLU, scaled embeddings,
// sliding-window layers with their own rope base). Qwen 2 and 3 are the Llama layer with those tensors added, so
// they share its forward (llama_layer) and differ in their configure() and tables; an architecture whose
// layer differs in structure writes its own layer(). Everything else is shared and knows no
// architecture: the checker and loader (model_config.cpp, model.cpp: by the table), the runner
// (buffers, paged KV cache, prefill, the captured decode step with one task group per attention
// layer, updates, sampling — it calls layer() once per layer, handing it the attention launch and
// the tensor-parallel reduction as callbacks), the tokenizer and the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "npugraph/llm/model.hpp"
#include "npugraph/llm/model_config.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::llm {

// What one layer's forward reads and writes: the runner's persistent buffers for `n` tokens.
struct LayerStep {
  const ModelConfig* config = nullptr;
  const LayerWeights* w = nullptr;
  std::int64_t layer = 0;
  std::int64_t n = 0;
  std::int64_t heads = 0, kv_heads = 0;  // this rank's (Note [Tensor-parallel split])
  ops::QuantLinearOptions linear{};
  Tensor x;                    // [n, hidden] float32: the residual stream, updated in place
  Tensor h, y;                 // [n, hidden] scratch
  Tensor q, k, v;              // [n, heads * head_dim], [n, kv_heads * head_dim]
  Tensor qkv1;                 // defined: one token, q|k|v as one GEMV into it (q, k, v its parts)
  Tensor attn, act;            // [n, heads * head_dim], [n, ffn]
  Tensor gate, up, gate_up;    // gate_up defined: gate|up as one GEMV, swiglu reading its halves
  Tensor positions, slots;     // [n] int32
  Tensor rope_freqs;           // Model::rope_freqs on the device (undefined without them)
  Tensor k_cache, v_cache;     // this layer's, head-major (Note [KV cache layout] in runner.hpp)
  // A mixed step's decode rows (rows [0, split) of every tensor above; Note [Mixed steps]): a
  // projection whose arithmetic depends on the row count is issued per part. 0: one pass's rows.
  std::int64_t split = 0;
  std::function<void()> attention;            // FIA over q and the cache into attn (a task group)
  std::function<void(const Tensor&)> reduce;  // sums a partial result over the ranks (or nothing)
};

// Note [Tensor tables]
// Each architecture names its layers' tensors once, in a table its own file owns: the name after
// "blk.N.", where the loader puts it (a LayerWeights member, or LayerWeights::extra under its name
// for a tensor only that architecture reads), its row-major shape from the config, whether it is a
// matrix (F32, F16 or a quantisation type) or an F32 vector, and how a tensor-parallel rank takes
// its part (Note [Tensor-parallel split]). ModelConfig::from_gguf checks the file against the
// table, Model::load maps and shards by it, the runner copies by it: none of them spells a layer
// tensor's name, so a new architecture is its file (keys, table, layer) and a registry line.
enum class ShardBy {
  whole,       // every rank holds all of it (norms)
  query_rows,  // rows of the rank's query heads (q and its bias)
  kv_rows,     // rows of its KV heads (k, v and their biases)
  ffn_rows,    // rows of its FFN columns (gate, up)
  query_cols,  // input columns of its query heads (o)
  ffn_cols,    // input columns of its FFN columns (down)
};

struct LayerTensor {
  const char* name;  // after "blk.N."
  bool matrix;       // a matrix [rows, cols]; else an F32 vector
  std::vector<std::int64_t> (*shape)(const ModelConfig&);
  ShardBy shard = ShardBy::whole;
  Matrix LayerWeights::*as_matrix = nullptr;  // where it goes; neither: extra[name]
  Tensor LayerWeights::*as_vector = nullptr;
};

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual std::string_view name() const = 0;
  // The tensors of every layer (Note [Tensor tables]).
  virtual std::span<const LayerTensor> layer_tensors() const = 0;
  // Reads the architecture's hyper-parameters into c and sets its features; ArgumentError naming
  // the file and the key for a missing or bad value.
  virtual void configure(const GgufFile& file, ModelConfig& c) const = 0;
  // Issues one layer's ops on the current stream.
  virtual void layer(const LayerStep& s) const = 0;
};

// The architecture of general.architecture = `name`; ArgumentError naming the file, the value and
// the architectures npugraph runs.
const Architecture& architecture(std::string_view name, const std::string& file);
std::string architecture_names();  // "llama, qwen2, qwen3, gemma3"

// Shared by the Llama-like architectures (arch/llama.cpp): the "<prefix>.*" keys Llama has, and
// the Llama layer with the features the config switches on.
void read_llama_keys(const GgufFile& file, const std::string& prefix, ModelConfig& c);
// "<prefix>.rope.scaling.*" into c.rope_freq_scale (read_llama_keys calls it); UnsupportedError
// naming the file, key and value for a scaling npugraph does not run.
void read_rope_scaling(const GgufFile& file, const std::string& prefix, ModelConfig& c);
void llama_layer(const LayerStep& s);
// The Llama layer's tensors (norms, q, k, v, o, gate, up, down), and the feature rows its
// relatives add: q/k/v biases (qwen2), per-head q/k norms (qwen3, gemma3).
std::vector<LayerTensor> llama_tensors();
std::vector<LayerTensor> qkv_bias_tensors();
std::vector<LayerTensor> qk_norm_tensors();
template <class... Parts>
std::vector<LayerTensor> tensor_table(Parts... parts) {
  std::vector<LayerTensor> out;
  (out.insert(out.end(), parts.begin(), parts.end()), ...);
  return out;
}
// Pieces of a layer the architectures share: q, k, v from s.h (one stacked GEMV for one token,
// with the biases the weights have); act = activation(y Wg^T) * (y Wu^T), SwiGLU or GeGLU (gelu).
void qkv_projections(const LayerStep& s);
void gated_ffn(const LayerStep& s, bool gelu);
// k3 [n, kv_heads, head_dim] and s.v into the layer's caches at s.slots, in the caches' layout
// (head-major: Note [KV cache layout] in runner.hpp).
void cache_kv(const LayerStep& s, const Tensor& k3);

// A projection: weight_quant_linear or linear, q8 activations only where the weight's type has a
// kernel for them (Note [Quantisation table]). bias may be undefined.
void matmul(const Tensor& x, const Matrix& w, const Tensor& bias, const Tensor& out,
            const ops::QuantLinearOptions& o);
// The same for a layer's step: in a mixed step (s.split > 0), a projection whose rows take other
// arithmetic above 16 rows (the rows layout with q8 activations: its GEMV, then the float32 GEMM)
// runs as two calls, the decode rows' and the chunk's, each as its own pass makes it.
void matmul(const Tensor& x, const Matrix& w, const Tensor& bias, const Tensor& out, const LayerStep& s);
// Whether w's rows take other arithmetic with more than 16 rows under options o.
bool row_count_matters(const Matrix& w, const ops::QuantLinearOptions& o);

// The architectures, one definition each (arch/<name>.cpp).
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& gemma3_architecture();

}  // namespace npugraph::llm
