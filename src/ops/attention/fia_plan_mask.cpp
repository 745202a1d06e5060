// The plan's mask stage (Note [FIA plan]): sparse_mode, inner_precise, atten_mask (full and
// compressed forms), pse_shift, learnable_sink and the left-padding tensors' shapes; the mask, pse
// and sink views. What
// the host values decide (the band, the padding starts, the extents the lengths need) is the
// block's: fia_block.cpp.
#include "ops/attention/fia_plan.hpp"

namespace npugraph::ops::attention {
namespace {

bool is_mask_dtype(DType t) { return t == DType::boolean || t == DType::i8 || t == DType::u8; }

void check_padding_tensor(const FiaPlan& c, const Tensor& t, const char* name) {
  if (!t.defined()) return;
  check_same_device(t, name, c.q);
  NG_CHECK_ARG(t.dtype() == DType::i64 && t.numel() == 1, kOp, name, " = ", TensorText{t},
               ": must be an int64 tensor of 1 element");
  NG_CHECK_ARG(!c.paged, kOp, name, " = ", TensorText{t},
               ": left padding is not supported with paged KV (block_table)");
  NG_CHECK_ARG(!c.prefix, kOp, name, " = ", TensorText{t},
               ": left padding is not supported with a shared prefix");
  NG_CHECK_ARG(!c.token, kOp, name, " = ", TensorText{t},
               ": left padding is not supported with input_layout ", c.o.input_layout);
}

// The mask's (b, i, j) dimensions: index of each (-1: absent) for the accepted shapes.
struct MaskDims {
  int b = -1, i = -1, j = -1;
};

MaskDims check_full_mask(const FiaPlan& c, const Tensor& m) {
  const int rank = m.dim();
  const std::int64_t B = c.key.batch;
  MaskDims d;
  if (c.decode) {
    // [B|1, Skv], [B|1, 1, Skv], [B|1, 1, 1, Skv]
    bool ok = rank >= 2 && rank <= 4;
    for (int x = 1; ok && x < rank - 1; ++x) ok = m.size(x) == 1;
    ok = ok && (m.size(0) == B || m.size(0) == 1);
    NG_CHECK_ARG(ok, kOp, "atten_mask = ", TensorText{m},
                 ": for decode (query S == 1) it must be [B, Skv], [B, 1, Skv] or [B, 1, 1, Skv] "
                 "(B may be 1) with B = ", B, " (sparse_mode is ignored by decode)");
    d = {0, -1, rank - 1};
  } else {
    // [Sq, Skv], [B|1, Sq, Skv], [B|1, 1, Sq, Skv]
    bool ok = rank >= 2 && rank <= 4;
    if (ok && rank >= 3) ok = m.size(0) == B || m.size(0) == 1;
    if (ok && rank == 4) ok = m.size(1) == 1;
    NG_CHECK_ARG(ok, kOp, "atten_mask = ", TensorText{m},
                 ": a full mask must be [Sq, Skv], [B, Sq, Skv] or [B, 1, Sq, Skv] (B may be 1) "
                 "with B = ", B);
    d = {rank >= 3 ? 0 : -1, rank - 2, rank - 1};
    NG_CHECK_ARG(m.size(d.i) >= c.key.q_seq, kOp, "atten_mask = ", TensorText{m},
                 ": its Sq dimension (", m.size(d.i), ") must be >= the query's S (",
                 c.key.q_seq, ")");
  }
  return d;
}

void check_compressed_mask(const FiaPlan& c, const Tensor& m) {
  const int rank = m.dim();
  bool ok = rank >= 2 && rank <= 4 && m.size(-1) == kCompressedMask &&
            m.size(-2) == kCompressedMask;
  for (int x = 0; ok && x < rank - 2; ++x) ok = m.size(x) == 1;
  NG_CHECK_ARG(ok, kOp, "atten_mask = ", TensorText{m}, ": sparse_mode = ", c.o.sparse_mode,
               " takes the compressed mask [2048, 2048], [1, 2048, 2048] or [1, 1, 2048, 2048]");
}

// The views of a full mask and of pse_shift (Note [FIA views]); their KV extents are checked
// against the actual lengths by the block (fia_block.cpp).
void make_mask_views(const FiaPlan& c) {
  FiaParams& p = c.header;
  const Tensor& m = c.o.atten_mask;
  if (static_cast<FiaMaskKind>(c.key.mask_kind) == FiaMaskKind::full) {
    const int rank = m.dim();
    p.mask.data = m.data();
    if (c.decode) {
      p.mask.stride[0] = m.size(0) == 1 ? 0 : m.stride(0);
    } else {
      p.mask.stride[0] = rank >= 3 && m.size(0) != 1 ? m.stride(0) : 0;
      p.mask.stride[2] = m.stride(rank - 2);
    }
    p.mask.stride[3] = m.stride(rank - 1);
  }
  const Tensor& pse = c.o.pse_shift;
  if (pse.defined()) {
    p.pse.data = pse.data();
    p.pse.stride[0] = pse.size(0) == 1 ? 0 : pse.stride(0);
    p.pse.stride[1] = pse.stride(1);
    p.pse.stride[2] = pse.stride(2);
    p.pse.stride[3] = pse.stride(3);
  }
}

}  // namespace

void plan_mask(FiaPlan& c) {
  const FiaOptions& o = c.o;
  NG_CHECK_ARG(o.sparse_mode >= 0 && o.sparse_mode <= 4, kOp, "sparse_mode = ", o.sparse_mode,
               ": must be in [0, 4] (5-8, prefix/global/dilated/block_local, are not supported)");
  const std::int64_t max_precise = c.decode ? 1 : 3;
  NG_CHECK_ARG(o.inner_precise >= 0 && o.inner_precise <= max_precise, kOp, "inner_precise = ",
               o.inner_precise, ": must be in [0, ", max_precise, "]",
               c.decode ? " for decode (query S == 1)" : "");
  c.key.sparse_mode = o.sparse_mode;
  c.key.inner_precise = o.inner_precise;

  c.q_padding = o.query_padding_size.defined();
  c.kv_padding = o.kv_padding_size.defined();
  check_padding_tensor(c, o.query_padding_size, "query_padding_size");
  check_padding_tensor(c, o.kv_padding_size, "kv_padding_size");

  const Tensor& m = o.atten_mask;
  const std::int64_t mode = c.decode ? -1 : o.sparse_mode;  // -1: decode ignores sparse_mode
  FiaMaskKind kind = FiaMaskKind::none;
  if (m.defined()) {
    check_same_device(m, "atten_mask", c.q);
    NG_CHECK_ARG(is_mask_dtype(m.dtype()), kOp, "atten_mask = ", TensorText{m},
                 ": dtype must be bool, int8 or uint8");
    if (mode >= 2) {
      check_compressed_mask(c, m);
      kind = FiaMaskKind::compressed;
    } else {
      NG_CHECK_ARG(!c.token, kOp, "atten_mask = ", TensorText{m}, ": with input_layout ",
                   o.input_layout, " only the compressed mask of sparse_mode 2, 3 or 4 is "
                   "supported, not a full mask (sparse_mode = ", o.sparse_mode, ")");
      check_full_mask(c, m);
      kind = FiaMaskKind::full;
    }
  } else {
    NG_CHECK_ARG(mode != 1, kOp, "atten_mask = undefined: sparse_mode = 1 needs a full mask");
    NG_CHECK_ARG(mode < 2, kOp, "atten_mask = undefined: sparse_mode = ", mode,
                 " needs the compressed mask [2048, 2048]");
  }
  c.key.mask_kind = static_cast<std::int64_t>(kind);
  c.key.anchor = (mode == 3 || mode == 4) ? 1 : 0;

  const Tensor& pse = o.pse_shift;
  if (pse.defined()) {
    check_same_device(pse, "pse_shift", c.q);
    NG_CHECK_ARG(!c.token, kOp, "pse_shift = ", TensorText{pse},
                 ": is not supported with input_layout ", o.input_layout);
    NG_CHECK_ARG(pse.dtype() == c.q_dtype, kOp, "pse_shift = ", TensorText{pse},
                 ": must have the query's dtype ", dtype_name(c.q_dtype));
    NG_CHECK_ARG(pse.dim() == 4 && (pse.size(0) == c.key.batch || pse.size(0) == 1) &&
                     pse.size(1) == c.key.heads,
                 kOp, "pse_shift = ", TensorText{pse}, ": must be [B, N, Sq, Skv] or [1, N, Sq, Skv]"
                 " with B = ", c.key.batch, ", N = num_heads = ", c.key.heads);
    NG_CHECK_ARG(pse.size(2) >= c.key.q_seq, kOp, "pse_shift = ", TensorText{pse},
                 ": its Sq dimension (", pse.size(2), ") must be >= the query's S (", c.key.q_seq,
                 ")");
  }
  // learnable_sink (Note [FIA learnable sink]): one logit per query head, read by the kernel.
  const Tensor& sink = o.learnable_sink;
  if (sink.defined()) {
    check_same_device(sink, "learnable_sink", c.q);
    NG_CHECK_ARG(sink.dtype() == DType::f32 || sink.dtype() == DType::f16 ||
                     sink.dtype() == DType::bf16,
                 kOp, "learnable_sink = ", TensorText{sink},
                 ": dtype must be float32, float16 or bfloat16");
    NG_CHECK_ARG(sink.dim() == 1 && sink.size(0) == c.key.heads, kOp, "learnable_sink = ",
                 TensorText{sink}, ": must be 1-D [N], one value per query head, with N = "
                 "num_heads = ", c.key.heads);
    c.header.sink.data = sink.data();
    c.header.sink.stride[1] = sink.stride(0);
  }
  set_sig(c, FiaArg::learnable_sink, sink);
  make_mask_views(c);
  set_sig(c, FiaArg::pse_shift, pse);
  set_sig(c, FiaArg::atten_mask, m);
  set_sig(c, FiaArg::query_padding_size, o.query_padding_size);
  set_sig(c, FiaArg::kv_padding_size, o.kv_padding_size);
}

}  // namespace npugraph::ops::attention
