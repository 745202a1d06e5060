// embedding: checks, launch, and the kernel (every id is checked before anything is written).
#include "npugraph/ops/embedding.hpp"

#include <vector>

#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"
#include "ops/embedding/embedding_params.hpp"
#include "ops/linear/quant_pack.hpp"

namespace npugraph::ops {
namespace {

using namespace detail_llm;

using embedding_impl::EmbeddingParams;

template <class TT, class TO>
void rows(const EmbeddingParams& p, std::int64_t t0, std::int64_t t1) {
  std::vector<float> buf;
  std::vector<std::byte> ggml_row;
  for (std::int64_t t = t0; t < t1; ++t) {
    const std::byte* row = p.table + p.ids[t] * p.row_bytes;
    if (p.rows16) {  // the row's blocks gathered into ggml's order first: the same bytes, so the same values
      ggml_row.resize(static_cast<std::size_t>(p.row_bytes));
      quant_pack::unpack(p.quant_type, p.table, p.H, p.ids[t], 1, ggml_row.data());
      row = ggml_row.data();
    }
    if (p.quant) {
      if constexpr (std::is_same_v<TO, float>) {
        dequantize_blocks(p.quant_type, row, static_cast<float*>(p.out) + t * p.H, p.H);
      } else {
        buf.resize(static_cast<std::size_t>(p.H));
        dequantize_blocks(p.quant_type, row, buf.data(), p.H);
        for (std::int64_t i = 0; i < p.H; ++i) store<TO>(p.out, t * p.H + i, buf[i]);
      }
    } else {
      for (std::int64_t i = 0; i < p.H; ++i) store<TO>(p.out, t * p.H + i, load<TT>(row, i));
    }
  }
}

void embedding_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<EmbeddingParams>(raw, size, "embedding");
  for (std::int64_t t = 0; t < p.T; ++t)
    if (p.ids[t] < 0 || p.ids[t] >= p.V)
      NG_THROW(TaskError, "embedding: ids[", t, "] = ", p.ids[t], ": outside the vocabulary [0, ",
               p.V, ") (nothing written)");
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, p.H));
  dispatch_float(p.table_dtype, [&](auto tt) {
    dispatch_float(p.out_dtype, [&](auto to) {
      ctx.parallel_for(p.T, grain, [&](std::int64_t b, std::int64_t e) {
        rows<decltype(tt), decltype(to)>(p, b, e);
      });
    });
  });
}

const KernelDef kEmbedding{.name = "embedding", .cpu = embedding_cpu,
                           .cuda = NG_LLM_CUDA_SLOT(&embedding_impl::embedding_cuda)};

void check_io(const Tensor& ids, const Tensor& out, std::int64_t H, const std::string& table) {
  constexpr const char* op = "embedding";
  NG_CHECK_ARG(ids.defined(), op, ": ids is undefined");
  NG_CHECK_ARG(ids.dtype() == DType::i32 && ids.is_contiguous(), op, ": ids = ", ids.str(),
               ": must be a contiguous int32 tensor");
  check_float(op, "out", out);
  Shape want = ids.shape();
  want.push_back(H);
  NG_CHECK_ARG(out.shape() == want, op, ": out = ", out.str(), ": must have the shape ", want.str(),
               " (ids = ", ids.str(), ", table = ", table, ")");
  check_same_device(op, "out", out, ids);
}

Shape out_shape(const Tensor& ids, std::int64_t H) {
  NG_CHECK_ARG(ids.defined(), "embedding: ids is undefined");
  Shape s = ids.shape();
  s.push_back(H);
  return s;
}

}  // namespace

const KernelDef& embedding_kernel() { return kEmbedding; }

void embedding_out(const Tensor& ids, const QuantWeight& table, const Tensor& out) {
  const Stream& stream = current_stream_ref(ids.device());
  const UpdateErrorGuard guard(stream);
  NG_CHECK_ARG(table.defined(), "embedding: table is undefined");
  check_io(ids, out, table.cols(), table.str());
  NG_CHECK_ARG(table.bytes().device() == ids.device(), "embedding: table is on ",
               table.bytes().device().str(), ": must be on ", ids.device().str());
  if (table.layout() == QuantLayout::rows16 && !ids.device().is_cpu())
    NG_THROW(UnsupportedError, "embedding: table = ", table.str(), " on ", ids.device().str(),
             ": the rows16 layout is read on the cpu only (unpack_rows)");
  if (ids.device().type() == DeviceType::cuda && !quant_traits(table.type()).cuda)
    NG_THROW(UnsupportedError, "embedding: table = ", table.str(), " on ", ids.device().str(),
             ": the cuda kernels read Q4_0, Q4_1 and Q8_0 tables only");
  EmbeddingParams p;
  p.ids = ids.data_ptr<std::int32_t>();
  p.table = table.data();
  p.out = out.data();
  p.T = ids.numel();
  p.V = table.rows();
  p.H = table.cols();
  p.row_bytes = table.row_bytes();
  p.quant = true;
  p.rows16 = table.layout() == QuantLayout::rows16;
  p.quant_type = table.type();
  p.out_dtype = out.dtype();
  const Tensor* uses[] = {&ids, &table.bytes(), &out};
  launch(stream, kEmbedding, p, uses);
}

void embedding_out(const Tensor& ids, const Tensor& table, const Tensor& out) {
  const Stream& stream = current_stream_ref(ids.device());
  const UpdateErrorGuard guard(stream);
  check_float("embedding", "table", table);
  NG_CHECK_ARG(table.dim() == 2 && table.size(1) > 0, "embedding: table = ", table.str(),
               ": must be a matrix [vocab, hidden]");
  check_io(ids, out, table.size(1), table.str());
  check_same_device("embedding", "table", table, ids);
  EmbeddingParams p;
  p.ids = ids.data_ptr<std::int32_t>();
  p.table = static_cast<const std::byte*>(table.data());
  p.out = out.data();
  p.T = ids.numel();
  p.V = table.size(0);
  p.H = table.size(1);
  p.row_bytes = p.H * static_cast<std::int64_t>(table.element_size());
  p.table_dtype = table.dtype();
  p.out_dtype = out.dtype();
  const Tensor* uses[] = {&ids, &table, &out};
  launch(stream, kEmbedding, p, uses);
}

Tensor embedding(const Tensor& ids, const QuantWeight& table, DType out_dtype) {
  NG_CHECK_ARG(table.defined(), "embedding: table is undefined");
  Tensor out = empty(out_shape(ids, table.cols()), out_dtype, ids.device());
  embedding_out(ids, table, out);
  return out;
}

Tensor embedding(const Tensor& ids, const Tensor& table, DType out_dtype) {
  NG_CHECK_ARG(table.defined() && table.dim() == 2, "embedding: table = ", describe(table),
               ": must be a matrix [vocab, hidden]");
  Tensor out = empty(out_shape(ids, table.size(1)), out_dtype, ids.device());
  embedding_out(ids, table, out);
  return out;
}

}  // namespace npugraph::ops
