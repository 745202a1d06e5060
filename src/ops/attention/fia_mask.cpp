// FIA masking: sparse_mode and the band it implies, atten_mask (full and compressed forms),
// pse_shift, inner_precise, and the left-padding tensors.
#include <algorithm>

#include "ops/attention/fia_args.hpp"

namespace npugraph::ops::attention {
namespace {

bool is_mask_dtype(DType t) { return t == DType::boolean || t == DType::i8 || t == DType::u8; }

// The left padding is effective with its lengths (torch_npu: "otherwise right padding"); query
// padding is ignored by decode.
bool q_padding_effective(const FiaCall& c) {
  return c.q_padding && !c.decode && !c.o.actual_seq_lengths.empty();
}
bool kv_padding_effective(const FiaCall& c) {
  return c.kv_padding && !c.o.actual_seq_lengths_kv.empty();
}

void check_padding_tensor(const FiaCall& c, const Tensor& t, const char* name) {
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

MaskDims check_full_mask(const FiaCall& c, const Tensor& m) {
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

void check_compressed_mask(const FiaCall& c, const Tensor& m) {
  const int rank = m.dim();
  bool ok = rank >= 2 && rank <= 4 && m.size(-1) == kCompressedMask &&
            m.size(-2) == kCompressedMask;
  for (int x = 0; ok && x < rank - 2; ++x) ok = m.size(x) == 1;
  NG_CHECK_ARG(ok, kOp, "atten_mask = ", TensorText{m}, ": sparse_mode = ", c.o.sparse_mode,
               " takes the compressed mask [2048, 2048], [1, 2048, 2048] or [1, 1, 2048, 2048]");
}

// The mask's or pse's KV extent the kernel may index: the shared prefix plus the key (paged: the
// blocks the actual lengths use).
std::int64_t kv_extent(const FiaCall& c, const std::int64_t* actual_kv, std::int64_t prefix_len) {
  if (!c.paged) return prefix_len + c.key_s;
  std::int64_t most = 0;
  for (std::int64_t b = 0; b < c.key.batch; ++b) most = std::max(most, actual_kv[b]);
  return ceil_div(most, c.key.block_size) * c.key.block_size;
}

void check_padding_values(const FiaCall& c, const Tensor& t, const char* name,
                          const char* lengths_name, std::int64_t seq, const std::int64_t* actual) {
  const std::int64_t pad = std::max<std::int64_t>(0, *t.data_ptr<std::int64_t>());
  for (std::int64_t b = 0; b < c.key.batch; ++b)
    NG_CHECK_ARG(seq - pad - actual[b] >= 0, kOp, name, " = ", pad,
                 ": batch ", b, "'s valid rows would start at S - ", name, " - ", lengths_name,
                 "[", b, "] = ", seq, " - ", pad, " - ", actual[b], " < 0");
}

}  // namespace

void check_mask_shapes(FiaCall& c) {
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
  set_sig(c.key, FiaArg::pse_shift, pse);
  set_sig(c.key, FiaArg::atten_mask, m);
  set_sig(c.key, FiaArg::query_padding_size, o.query_padding_size);
  set_sig(c.key, FiaArg::kv_padding_size, o.kv_padding_size);
}

FiaBand resolve_band(const FiaCall& c) {
  FiaBand band;
  if (c.decode) return band;
  const FiaOptions& o = c.o;
  switch (o.sparse_mode) {
    case 0:
      // pre/next apply with a full mask only, and not under left padding (torch_npu).
      if (o.atten_mask.defined() && !q_padding_effective(c) && !kv_padding_effective(c)) {
        band.pre = o.pre_tokens;
        band.next = o.next_tokens;
      }
      break;
    case 2: band.next = 0; break;
    case 3: band.next = 0; band.anchor = true; break;
    case 4:
      band.pre = o.pre_tokens;
      band.next = o.next_tokens;
      band.anchor = true;
      break;
    default: break;
  }
  return band;
}

FiaBand finish_mask(const FiaCall& c, const std::int64_t* actual_q,
                    const std::int64_t* actual_kv, std::int64_t prefix_len, FiaParams& p) {
  const FiaOptions& o = c.o;
  if (q_padding_effective(c)) {
    check_padding_values(c, o.query_padding_size, "query_padding_size", "actual_seq_lengths",
                         c.key.q_seq, actual_q);
    p.q_padding = o.query_padding_size.data_ptr<std::int64_t>();
  }
  if (kv_padding_effective(c)) {
    check_padding_values(c, o.kv_padding_size, "kv_padding_size", "actual_seq_lengths_kv",
                         c.key_s, actual_kv);
    p.kv_padding = o.kv_padding_size.data_ptr<std::int64_t>();
  }

  const FiaBand band = resolve_band(c);
  p.pre_tokens = std::clamp(band.pre, -kBandLimit, kBandLimit);
  p.next_tokens = std::clamp(band.next, -kBandLimit, kBandLimit);

  const Tensor& m = o.atten_mask;
  const bool need_extent =
      static_cast<FiaMaskKind>(c.key.mask_kind) == FiaMaskKind::full || o.pse_shift.defined();
  const std::int64_t extent = need_extent ? kv_extent(c, actual_kv, prefix_len) : 0;
  if (static_cast<FiaMaskKind>(c.key.mask_kind) == FiaMaskKind::full) {
    NG_CHECK_ARG(m.size(-1) >= extent, kOp, "atten_mask = ", TensorText{m},
                 ": its Skv dimension (", m.size(-1), ") must be >= ",
                 c.paged ? "the blocks the actual KV lengths use (" : "the shared prefix plus the key's S (",
                 extent, ")");
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
  const Tensor& pse = o.pse_shift;
  if (pse.defined()) {
    NG_CHECK_ARG(pse.size(3) >= extent, kOp, "pse_shift = ", TensorText{pse},
                 ": its Skv dimension (", pse.size(3), ") must be >= ",
                 c.paged ? "the blocks the actual KV lengths use (" : "the shared prefix plus the key's S (",
                 extent, ")");
    p.pse.data = pse.data();
    p.pse.stride[0] = pse.size(0) == 1 ? 0 : pse.stride(0);
    p.pse.stride[1] = pse.stride(1);
    p.pse.stride[2] = pse.stride(2);
    p.pse.stride[3] = pse.stride(3);
  }
  return band;
}

}  // namespace npugraph::ops::attention
