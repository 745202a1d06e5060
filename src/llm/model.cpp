#include "npugraph/llm/model.hpp"

#include <cstring>
#include <initializer_list>
#include <system_error>

#include "npugraph/error.hpp"

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
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q8_0:
      m.quant = ops::QuantWeight(file_view(file, bytes, {static_cast<std::int64_t>(bytes.size())}, DType::u8),
                                 static_cast<ops::QuantType>(t.type), rows, cols);
      break;
    default:  // LlamaConfig::from_gguf checked the types already
      NG_THROW(ArgumentError, file->name(), ": tensor '", name, "' is ", ggml_type_name(t.type),
               ": not a matrix type npugraph computes on");
  }
  return m;
}

Tensor norm(const std::shared_ptr<GgufFile>& file, const std::string& name) {
  const GgufTensorInfo& t = file->tensor(name);
  return file_view(file, file->tensor_bytes(t), {static_cast<std::int64_t>(t.n_elements)}, DType::f32);
}

// Rows [row0, row0 + rows) of `m` (its bytes shared).
Matrix row_view(const Matrix& m, std::int64_t row0, std::int64_t rows) {
  Matrix r;
  if (m.quant.defined()) {
    const std::int64_t rb = m.quant.row_bytes();
    r.quant = ops::QuantWeight(m.quant.bytes().narrow(0, row0 * rb, rows * rb), m.quant.type(), rows,
                               m.quant.cols());
  } else {
    r.dense = m.dense.narrow(0, row0, rows);
  }
  return r;
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
    *m = row_view(out, row0, n);
    row0 += n;
  }
  return out;
}

}  // namespace

std::shared_ptr<const LlamaModel> LlamaModel::load(const std::filesystem::path& path) {
  std::error_code ec;
  NG_CHECK_ARG(std::filesystem::is_regular_file(path, ec), "model = '", path.string(),
               "': no such file (fetch SmolLM2 with `python3 tools/fetch_model.py`, or pass a GGUF path)");
  std::shared_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = std::make_shared<GgufFile>(GgufFile::open(path));
  m->config_ = LlamaConfig::from_gguf(*m->file_);
  m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*m->file_));
  const auto& f = m->file_;
  m->token_embd = matrix(f, "token_embd.weight");
  m->output = m->config_.tied_embeddings ? m->token_embd : matrix(f, "output.weight");
  m->output_norm = norm(f, "output_norm.weight");
  m->layers.resize(static_cast<std::size_t>(m->config_.layers));
  for (std::int64_t l = 0; l < m->config_.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& w = m->layers[static_cast<std::size_t>(l)];
    w.attn_norm = norm(f, p + "attn_norm.weight");
    w.ffn_norm = norm(f, p + "ffn_norm.weight");
    w.q = matrix(f, p + "attn_q.weight");
    w.k = matrix(f, p + "attn_k.weight");
    w.v = matrix(f, p + "attn_v.weight");
    w.o = matrix(f, p + "attn_output.weight");
    w.gate = matrix(f, p + "ffn_gate.weight");
    w.up = matrix(f, p + "ffn_up.weight");
    w.down = matrix(f, p + "ffn_down.weight");
    w.qkv = stack_rows({&w.q, &w.k, &w.v});
    w.gate_up = stack_rows({&w.gate, &w.up});
  }
  return m;
}

}  // namespace npugraph::llm
