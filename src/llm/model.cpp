#include "npugraph/llm/model.hpp"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <system_error>

#include "llm/arch/architecture.hpp"
#include "npugraph/error.hpp"
#include "npugraph/memory.hpp"

namespace npugraph::llm {
namespace {

// A tensor viewing bytes of the mapped file; the storage keeps the file mapped. Kernels only read
// weights, so the read-only mapping is never written.
Tensor file_view(const std::shared_ptr<GgufFile>& file, std::span<const std::byte> bytes, Shape shape,
                 DType dtype) {
  return Tensor::from_blob(const_cast<std::byte*>(bytes.data()), shape, dtype, file);
}

Matrix matrix(const std::shared_ptr<GgufFile>& file, const std::string& name) {
  const GgufTensorInfo& t = file->tensor(name);
  const auto bytes = file->tensor_bytes(t);
  const std::int64_t rows = static_cast<std::int64_t>(t.n_rows()), cols = t.row_length();
  Matrix m;
  switch (t.type) {
    case GgmlType::F32: m.dense = file_view(file, bytes, {rows, cols}, DType::f32); break;
    case GgmlType::F16: m.dense = file_view(file, bytes, {rows, cols}, DType::f16); break;
    default:  // ModelConfig::from_gguf checked the types already
      NG_CHECK_ARG(ops::is_quant_type(static_cast<std::uint32_t>(t.type)), file->name(), ": tensor '", name,
                   "' is ", ggml_type_name(t.type), ": not a matrix type npugraph computes on (F32, F16, ",
                   ops::quant_type_names(), ")");
      m.quant = ops::QuantWeight(file_view(file, bytes, {static_cast<std::int64_t>(bytes.size())}, DType::u8),
                                 static_cast<ops::QuantType>(t.type), rows, cols);
      break;
  }
  return m;
}

Tensor norm(const std::shared_ptr<GgufFile>& file, const std::string& name) {
  const GgufTensorInfo& t = file->tensor(name);
  return file_view(file, file->tensor_bytes(t), {static_cast<std::int64_t>(t.n_elements)}, DType::f32);
}

// The matrices' rows stacked into one new matrix, and each of them replaced by a view of its rows
// (LayerWeights::qkv); nothing when their types or widths differ.
Matrix stack_rows(std::initializer_list<Matrix*> parts) {
  const Matrix& first = **parts.begin();
  std::int64_t rows = 0;
  for (const Matrix* m : parts) {
    if (m->cols() != first.cols() || m->quant.defined() != first.quant.defined()) return {};
    if (m->quant.defined() ? m->quant.type() != first.quant.type()
                           : m->dense.dtype() != first.dense.dtype() || !m->dense.is_contiguous())
      return {};
    rows += m->rows();
  }
  Matrix out;
  Tensor bytes;
  if (first.quant.defined()) {
    bytes = empty({rows * first.quant.row_bytes()}, DType::u8);
    out.quant = ops::QuantWeight(bytes, first.quant.type(), rows, first.cols());
  } else {
    bytes = empty({rows, first.cols()}, first.dense.dtype());
    out.dense = bytes;
  }
  auto* dst = static_cast<std::byte*>(bytes.data());
  std::int64_t row0 = 0;
  for (Matrix* m : parts) {
    const Tensor& src = m->quant.defined() ? m->quant.bytes() : m->dense;
    std::memcpy(dst, src.data(), src.nbytes());
    dst += src.nbytes();
    const std::int64_t n = m->rows();
    *m = slice_rows(out, row0, n, "stacked rows");
    row0 += n;
  }
  return out;
}

// The float32 vectors end to end, in new memory.
Tensor cat(std::initializer_list<Tensor> parts) {
  std::int64_t n = 0;
  for (const Tensor& t : parts) n += t.numel();
  Tensor out = empty({n}, DType::f32);
  auto* dst = out.data_ptr<float>();
  for (const Tensor& t : parts) {
    std::memcpy(dst, t.data(), t.nbytes());
    dst += t.numel();
  }
  return out;
}

// "model.gguf: tensor 'blk.3.attn_output.weight' (tensor-parallel rank 1 of 2: query heads [6, 9))"
std::string shard_name(const std::string& file, const std::string& tensor, const ModelShard& s, const char* what,
                       std::int64_t first, std::int64_t count) {
  return file + ": tensor '" + tensor + "' (tensor-parallel rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) +
         ": " + what + " [" + std::to_string(first) + ", " + std::to_string(first + count) + "))";
}

// Rank s's part of one layer tensor (Note [Tensor-parallel split]), as its table row says: rows of
// q, k, v and their biases (its heads) and of gate, up (its FFN columns); the matching input
// columns of o and down. The stacks are rebuilt from the sliced parts.
Matrix shard_of_tensor(const Matrix& m, const LayerTensor& t, const ModelConfig& c, const ModelShard& s, const std::string& file,
             const std::string& name) {
  struct Part {
    std::int64_t first, count, unit;
    const char* what;
  };
  Part p{};
  switch (t.shard) {
    case ShardBy::whole: return m;
    case ShardBy::query_rows: case ShardBy::query_cols: p = {s.head0, s.heads, c.head_dim, "query heads"}; break;
    case ShardBy::kv_rows: p = {s.kv_head0, s.kv_heads, c.head_dim, "KV heads"}; break;
    case ShardBy::ffn_rows: case ShardBy::ffn_cols: p = {s.ffn0, s.ffn, 1, "FFN columns"}; break;
  }
  const std::int64_t first = p.first * p.unit, count = p.count * p.unit;
  if (!t.matrix) return Matrix{.dense = m.dense.narrow(0, first, count)};  // a bias follows its projection's rows
  const std::string label = shard_name(file, name, s, p.what, p.first, p.count);
  const bool cols = t.shard == ShardBy::query_cols || t.shard == ShardBy::ffn_cols;
  return cols ? slice_cols(m, first, count, label) : slice_rows(m, first, count, label);
}

}  // namespace

ModelShard shard_of(const ModelConfig& c, TensorSplit split) {
  NG_CHECK_ARG(split.size >= 1, "tensor parallel size = ", split.size, ": must be >= 1 (1: the whole model)");
  NG_CHECK_ARG(split.rank >= 0 && split.rank < split.size, "tensor parallel rank = ", split.rank,
               ": must be in [0, ", split.size, ") (the size)");
  NG_CHECK_ARG(split.size <= c.kv_heads, "tensor parallel size = ", split.size, ": must be at most the ",
               c.kv_heads, " KV heads of ", c.name, " (attention is split by KV group: each rank holds at least one)");
  NG_CHECK_ARG(c.ffn % split.size == 0, "tensor parallel size = ", split.size, ": must divide the FFN width ",
               c.ffn, " of ", c.name, " (the MLP is split by columns evenly)");
  ModelShard s{.rank = split.rank, .size = split.size};
  const std::int64_t base = c.kv_heads / split.size, extra = c.kv_heads % split.size, r = split.rank;
  s.kv_heads = base + (r < extra ? 1 : 0);
  s.kv_head0 = r * base + std::min(r, extra);
  const std::int64_t group = c.heads / c.kv_heads;
  s.heads = s.kv_heads * group;
  s.head0 = s.kv_head0 * group;
  s.ffn = c.ffn / split.size;
  s.ffn0 = r * s.ffn;
  return s;
}

Matrix slice_rows(const Matrix& m, std::int64_t row0, std::int64_t rows, const std::string& name) {
  NG_CHECK_ARG(row0 >= 0 && rows >= 1 && row0 + rows <= m.rows(), name, ": rows [", row0, ", ", row0 + rows,
               "): must be a non-empty range inside its ", m.rows(), " rows");
  Matrix r;
  if (m.quant.defined()) {
    const std::int64_t rb = m.quant.row_bytes();
    const Tensor flat = m.quant.bytes().view({m.quant.bytes().numel()});  // any shape (QuantWeight)
    r.quant = ops::QuantWeight(flat.narrow(0, row0 * rb, rows * rb), m.quant.type(), rows, m.quant.cols());
  } else {
    r.dense = m.dense.narrow(0, row0, rows);
  }
  return r;
}

Matrix slice_cols(const Matrix& m, std::int64_t col0, std::int64_t cols, const std::string& name) {
  NG_CHECK_ARG(col0 >= 0 && cols >= 1 && col0 + cols <= m.cols(), name, ": columns [", col0, ", ", col0 + cols,
               "): must be a non-empty range inside its ", m.cols(), " columns");
  Matrix r;
  const std::int64_t rows = m.rows();
  if (m.quant.defined()) {
    const std::int64_t be = m.quant.block_size();
    NG_CHECK_ARG(col0 % be == 0 && cols % be == 0, name, " = ", m.quant.str(),
                 ": columns [", col0, ", ", col0 + cols, ") cut its blocks of ", be,
                 " elements: a column slice of a ", ops::quant_type_name(m.quant.type()),
                 " matrix must start and end on a multiple of ", be);
    const auto block = static_cast<std::int64_t>(ops::quant_block_bytes(m.quant.type()));
    const std::int64_t src_row = m.quant.row_bytes(), dst_row = cols / be * block;
    const Tensor bytes = empty({rows * dst_row}, DType::u8);
    const std::byte* src = m.quant.data() + col0 / be * block;
    auto* dst = static_cast<std::byte*>(bytes.data());
    for (std::int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * dst_row, src + i * src_row, dst_row);
    r.quant = ops::QuantWeight(bytes, m.quant.type(), rows, cols);
  } else {
    NG_CHECK_ARG(m.dense.is_contiguous(), name, " = ", m.dense.str(), ": must be contiguous to slice columns");
    const auto es = static_cast<std::int64_t>(dtype_size(m.dense.dtype()));
    r.dense = empty({rows, cols}, m.dense.dtype());
    const auto* src = static_cast<const std::byte*>(m.dense.data()) + col0 * es;
    auto* dst = static_cast<std::byte*>(r.dense.data());
    for (std::int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * cols * es, src + i * m.cols() * es, cols * es);
  }
  return r;
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, TensorSplit split) {
  std::error_code ec;
  NG_CHECK_ARG(std::filesystem::is_regular_file(path, ec), "model = '", path.string(),
               "': no such file (fetch SmolLM2 or Gemma 3 with `python3 tools/fetch_model.py [smollm2|gemma3]`, or pass a GGUF path)");
  std::shared_ptr<Model> m(new Model());
  m->file_ = std::make_shared<GgufFile>(GgufFile::open(path));
  m->config_ = ModelConfig::from_gguf(*m->file_);
  m->shard_ = shard_of(m->config_, split);
  m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*m->file_));
  const auto& f = m->file_;
  m->token_embd = matrix(f, "token_embd.weight");
  m->output = m->config_.tied_embeddings ? m->token_embd : matrix(f, "output.weight");
  m->output_norm = norm(f, "output_norm.weight");
  if (m->config_.rope_freq_factors) m->rope_freqs = norm(f, "rope_freqs.weight");
  m->layers.resize(static_cast<std::size_t>(m->config_.layers));
  const Architecture& arch = architecture(m->config_.architecture, f->name());
  for (std::int64_t l = 0; l < m->config_.layers; ++l) {  // by the architecture's table (Note [Tensor tables])
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& w = m->layers[static_cast<std::size_t>(l)];
    for (const LayerTensor& t : arch.layer_tensors()) {
      const std::string name = p + t.name;
      Matrix x = t.matrix ? matrix(f, name) : Matrix{.dense = norm(f, name)};
      if (split.size > 1) x = shard_of_tensor(x, t, m->config_, m->shard_, f->name(), name);
      if (t.as_matrix) w.*t.as_matrix = std::move(x);
      else if (t.as_vector) w.*t.as_vector = std::move(x.dense);
      else w.extra.emplace(t.name, std::move(x));
    }
    w.qkv = stack_rows({&w.q, &w.k, &w.v});
    if (w.qkv.defined() && w.q_bias.defined()) w.qkv_bias = cat({w.q_bias, w.k_bias, w.v_bias});
    w.gate_up = stack_rows({&w.gate, &w.up});
  }
  return m;
}

}  // namespace npugraph::llm
