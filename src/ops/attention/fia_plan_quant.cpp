// The plan's quantisation stage (Note [FIA plan]): antiquant parameters of int8 key/value
// (combined and separate, every mode torch_npu documents) and the int8 output of quant_scale2 /
// quant_offset2, with their views. The int8 output's rule on rows a band leaves empty depends on
// host values: fia_block.cpp.
#include <initializer_list>

#include "ops/attention/fia_plan.hpp"

namespace npugraph::ops::attention {
namespace {

// One antiquant parameter (scale or offset) of key or value: its shape for `mode`, its dtype, and
// its view. `lead` >= 0: the combined form, whose first dimension (2) picks key (0) or value (1).
struct ParamSpec {
  const Tensor& t;
  const char* name;
  std::int64_t mode;  // 0-5 (combined: antiquant_mode 0/1)
  std::int64_t d;     // D of the tensor it dequantises
  int lead;
};

FiaView param_view(const FiaPlan& c, const ParamSpec& s) {
  const Tensor& t = s.t;
  const FiaShapeKey& k = c.key;
  const std::int64_t N = k.kv_heads, D = s.d, H = N * D, B = k.batch;
  const int off = s.lead >= 0 ? 1 : 0;  // dimensions before the parameter's own
  FiaView v;
  v.data = static_cast<std::byte*>(t.data()) +
           (s.lead > 0 ? s.lead * t.stride(0) * static_cast<std::int64_t>(t.element_size()) : 0);
  const bool per_token = s.mode == 1 || s.mode == 3 || s.mode == 4 || s.mode == 5;
  if (per_token) {
    NG_CHECK_ARG(t.dtype() == DType::f32, kOp, s.name, " = ", TensorText{t},
                 ": per-token antiquant parameters (mode ", s.mode, ") must be float32");
  } else {
    NG_CHECK_ARG(t.dtype() == c.q_dtype || (s.lead < 0 && t.dtype() == DType::f32), kOp, s.name,
                 " = ", TensorText{t}, ": must have the query's dtype ", dtype_name(c.q_dtype),
                 s.lead < 0 ? " or float32" : "");
  }
  if (s.lead >= 0)
    NG_CHECK_ARG(t.dim() >= 1 && t.size(0) == 2, kOp, s.name, " = ", TensorText{t},
                 ": its first dimension must be 2 (key, value)");
  const int r = t.dim() - off;  // the parameter's own rank
  auto sz = [&](int i) { return t.size(off + i); };
  auto st = [&](int i) { return t.stride(off + i); };
  auto own = [&](std::initializer_list<std::int64_t> dims) {
    if (r != static_cast<int>(dims.size())) return false;
    int i = 0;
    for (std::int64_t x : dims)
      if (sz(i++) != x) return false;
    return true;
  };
  switch (s.mode) {
    case 0:
      if (own({1}) || (s.lead >= 0 && r == 0)) return v;  // per-tensor: strides 0
      if (own({N, 1, D})) { v.stride[1] = st(0); v.stride[3] = st(2); return v; }
      if (own({N, D})) { v.stride[1] = st(0); v.stride[3] = st(1); return v; }
      if (own({H})) { v.stride[1] = D * st(0); v.stride[3] = st(0); return v; }
      if (s.lead < 0 && own({1, N, 1, D})) { v.stride[1] = st(1); v.stride[3] = st(3); return v; }
      if (s.lead < 0 && own({1, N, D})) { v.stride[1] = st(1); v.stride[3] = st(2); return v; }
      if (s.lead < 0 && own({1, H})) { v.stride[1] = D * st(1); v.stride[3] = st(1); return v; }
      NG_THROW(ArgumentError, kOp, s.name, " = ", TensorText{t},
               s.lead >= 0 ? ": per-tensor/per-channel (mode 0) must be [2], [2, KV_N, 1, D], "
                             "[2, KV_N, D] or [2, H]"
                           : ": per-tensor/per-channel (mode 0) must be [1], [KV_N, 1, D], "
                             "[KV_N, D], [H], [1, KV_N, 1, D], [1, KV_N, D] or [1, H]",
               " with KV_N = ", N, ", D = ", D, ", H = ", H);
    case 1:
      if (own({B, sz(1)}) && r == 2) { v.stride[0] = st(0); v.stride[2] = st(1); }
      else if (s.lead < 0 && r == 3 && sz(0) == 1 && sz(1) == B) { v.stride[0] = st(1); v.stride[2] = st(2); }
      else
        NG_THROW(ArgumentError, kOp, s.name, " = ", TensorText{t},
                 s.lead >= 0 ? ": per-token (mode 1) must be [2, B, S]" : ": per-token (mode 1) must be [B, S] or [1, B, S]",
                 " with B = ", B);
      NG_CHECK_ARG(t.size(-1) >= k.kv_seq, kOp, s.name, " = ", TensorText{t}, ": its S (",
                   t.size(-1), ") must be >= the key's S (", k.kv_seq, ")");
      return v;
    case 2:
      NG_CHECK_ARG(own({N}), kOp, s.name, " = ", TensorText{t},
                   ": per-tensor per-head (mode 2) must be [KV_N] = [", N, "]");
      v.stride[1] = st(0);
      return v;
    case 3:
      NG_CHECK_ARG(r == 3 && sz(0) == B && sz(1) == N && sz(2) >= k.kv_seq, kOp, s.name, " = ",
                   TensorText{t}, ": per-token per-head (mode 3) must be [B, KV_N, S] with B = ", B,
                   ", KV_N = ", N, ", S >= the key's S (", k.kv_seq, ")");
      v.stride[0] = st(0); v.stride[1] = st(1); v.stride[2] = st(2);
      return v;
    case 4:
      NG_CHECK_ARG(own({k.num_blocks, k.block_size}), kOp, s.name, " = ", TensorText{t},
                   ": paged per-token (mode 4) must be [blocks, block_size] = [", k.num_blocks,
                   ", ", k.block_size, "]");
      v.stride[0] = st(0); v.stride[2] = st(1);
      return v;
    case 5:
      NG_CHECK_ARG(own({k.num_blocks, N, k.block_size}), kOp, s.name, " = ", TensorText{t},
                   ": paged per-token per-head (mode 5) must be [blocks, KV_N, block_size] = [",
                   k.num_blocks, ", ", N, ", ", k.block_size, "]");
      v.stride[0] = st(0); v.stride[1] = st(1); v.stride[2] = st(2);
      return v;
    default: break;
  }
  NG_THROW(ArgumentError, kOp, s.name, " = ", TensorText{t}, ": unsupported mode ", s.mode);
}

void check_offset_matches(const Tensor& offset, const char* name, const Tensor& scale,
                          const char* scale_name) {
  NG_CHECK_ARG(offset.dtype() == scale.dtype() && offset.shape() == scale.shape(), kOp, name,
               " = ", TensorText{offset}, ": must have ", scale_name, "'s shape and dtype ",
               TensorText{scale});
}

void check_separate(FiaPlan& c) {
  FiaParams& p = c.header;
  const FiaOptions& o = c.o;
  const std::int64_t km = o.key_antiquant_mode, vm = o.value_antiquant_mode;
  const std::int64_t max_mode = c.decode ? 5 : 1;
  NG_CHECK_ARG(km >= 0 && km <= max_mode, kOp, "key_antiquant_mode = ", km, ": must be in [0, ",
               max_mode, "]", c.decode ? "" : " when query S > 1");
  NG_CHECK_ARG(vm >= 0 && vm <= max_mode, kOp, "value_antiquant_mode = ", vm,
               ": must be in [0, ", max_mode, "]", c.decode ? "" : " when query S > 1");
  NG_CHECK_ARG(km == vm || (km == 0 && vm == 1), kOp, "value_antiquant_mode = ", vm,
               ": must equal key_antiquant_mode = ", km, " (or be 1 with key_antiquant_mode 0)");
  NG_CHECK_ARG(c.paged || km < 4, kOp, "key_antiquant_mode = ", km,
               ": the paged modes 4 and 5 need block_table");
  NG_CHECK_ARG(o.key_antiquant_scale.defined(), kOp,
               "key_antiquant_scale = undefined: needed with value_antiquant_scale or the offsets");
  NG_CHECK_ARG(o.value_antiquant_scale.defined(), kOp,
               "value_antiquant_scale = undefined: needed with key_antiquant_scale");
  NG_CHECK_ARG(o.key_antiquant_offset.defined() == o.value_antiquant_offset.defined(), kOp,
               o.key_antiquant_offset.defined() ? "value_antiquant_offset = undefined"
                                                : "key_antiquant_offset = undefined",
               ": key_antiquant_offset and value_antiquant_offset must be given together");
  for (const Tensor* t : {&o.key_antiquant_scale, &o.value_antiquant_scale,
                          &o.key_antiquant_offset, &o.value_antiquant_offset})
    if (t->defined()) check_same_device(*t, "an antiquant parameter", c.q);
  if (km == vm)
    NG_CHECK_ARG(o.value_antiquant_scale.shape() == o.key_antiquant_scale.shape(), kOp,
                 "value_antiquant_scale = ", TensorText{o.value_antiquant_scale},
                 ": must have key_antiquant_scale's shape ", o.key_antiquant_scale.shape().str());
  p.k_scale = param_view(c, {o.key_antiquant_scale, "key_antiquant_scale", km, c.key.dk, -1});
  p.v_scale = param_view(c, {o.value_antiquant_scale, "value_antiquant_scale", vm, c.key.dv, -1});
  if (o.key_antiquant_offset.defined()) {
    check_offset_matches(o.key_antiquant_offset, "key_antiquant_offset", o.key_antiquant_scale,
                         "key_antiquant_scale");
    check_offset_matches(o.value_antiquant_offset, "value_antiquant_offset",
                         o.value_antiquant_scale, "value_antiquant_scale");
    p.k_offset = param_view(c, {o.key_antiquant_offset, "key_antiquant_offset", km, c.key.dk, -1});
    p.v_offset =
        param_view(c, {o.value_antiquant_offset, "value_antiquant_offset", vm, c.key.dv, -1});
  }
  c.key.key_antiquant_mode = km;
  c.key.value_antiquant_mode = vm;
}

void check_combined(FiaPlan& c) {
  FiaParams& p = c.header;
  const FiaOptions& o = c.o;
  const std::int64_t m = o.antiquant_mode;
  NG_CHECK_ARG(m == 0 || m == 1, kOp, "antiquant_mode = ", m, ": must be 0 (per-channel or "
               "per-tensor) or 1 (per-token)");
  NG_CHECK_ARG(o.antiquant_scale.defined(), kOp, "antiquant_scale = undefined: needed with "
               "antiquant_offset (an offset without a scale has no meaning)");
  check_same_device(o.antiquant_scale, "antiquant_scale", c.q);
  NG_CHECK_ARG(m == 1 || c.key.dk == c.key.dv || o.antiquant_scale.numel() == 2, kOp,
               "antiquant_scale = ", TensorText{o.antiquant_scale},
               ": per-channel parameters for key and value together need the key's D (",
               c.key.dk, ") to equal the value's (", c.key.dv, "); use key_/value_antiquant_scale");
  p.k_scale = param_view(c, {o.antiquant_scale, "antiquant_scale", m, c.key.dk, 0});
  p.v_scale = param_view(c, {o.antiquant_scale, "antiquant_scale", m, c.key.dv, 1});
  if (o.antiquant_offset.defined()) {
    check_same_device(o.antiquant_offset, "antiquant_offset", c.q);
    check_offset_matches(o.antiquant_offset, "antiquant_offset", o.antiquant_scale,
                         "antiquant_scale");
    p.k_offset = param_view(c, {o.antiquant_offset, "antiquant_offset", m, c.key.dk, 0});
    p.v_offset = param_view(c, {o.antiquant_offset, "antiquant_offset", m, c.key.dv, 1});
  }
  c.key.antiquant_mode = m;
  // The separate modes of the kernel: the combined per-token mode is mode 1 for both.
  c.key.key_antiquant_mode = c.key.value_antiquant_mode = m;
}

void check_antiquant(FiaPlan& c) {
  const FiaOptions& o = c.o;
  const bool separate = o.key_antiquant_scale.defined() || o.key_antiquant_offset.defined() ||
                        o.value_antiquant_scale.defined() || o.value_antiquant_offset.defined();
  const bool combined = o.antiquant_scale.defined() || o.antiquant_offset.defined();
  if (!c.int8_kv) {
    const Tensor& given = separate ? (o.key_antiquant_scale.defined() ? o.key_antiquant_scale
                                                                      : o.value_antiquant_scale)
                                   : o.antiquant_scale;
    NG_CHECK_ARG(!separate && !combined, kOp,
                 separate ? "key_/value_antiquant parameters = " : "antiquant_scale/offset = ",
                 TensorText{given}, ": antiquant parameters need int8 key/value (key is ",
                 dtype_name(c.kv_dtype), ")");
    return;
  }
  NG_CHECK_ARG(!c.token, kOp, "key = ", TensorText{c.k},
               ": int8 key/value (antiquant) are not supported with input_layout ",
               o.input_layout);
  NG_CHECK_ARG(separate || combined, kOp, "key = ", TensorText{c.k},
               ": int8 key/value need antiquant_scale, or key_antiquant_scale and "
               "value_antiquant_scale");
  // Separate parameters win over the combined ones (torch_npu).
  if (separate) check_separate(c);
  else check_combined(c);
  const bool per_token = c.key.key_antiquant_mode != 0 && c.key.key_antiquant_mode != 2;
  const bool v_per_token = c.key.value_antiquant_mode != 0 && c.key.value_antiquant_mode != 2;
  NG_CHECK_ARG(!(c.prefix && (per_token || v_per_token)), kOp, "key_shared_prefix = ",
               TensorText{o.key_shared_prefix},
               ": a shared prefix is not supported with per-token antiquant parameters");
}

void check_quant_out(FiaPlan& c) {
  FiaParams& p = c.header;
  const FiaOptions& o = c.o;
  const Tensor& s = o.quant_scale2;
  const Tensor& z = o.quant_offset2;
  if (!s.defined()) {
    NG_CHECK_ARG(!z.defined(), kOp, "quant_offset2 = ", TensorText{z},
                 ": needs quant_scale2 (the int8 output's scale)");
    return;
  }
  check_same_device(s, "quant_scale2", c.q);
  NG_CHECK_ARG(s.dtype() == DType::f32 || (s.dtype() == DType::bf16 && c.q_dtype == DType::bf16),
               kOp, "quant_scale2 = ", TensorText{s},
               ": must be float32 (or bfloat16 with a bfloat16 query)");
  const std::int64_t channels = c.key.heads * c.key.dv;
  NG_CHECK_ARG(s.numel() == 1 || s.numel() == channels, kOp, "quant_scale2 = ", TensorText{s},
               ": must hold 1 value (per-tensor) or N * D = ", channels,
               " values (per-channel, channel n * D + d)");
  NG_CHECK_ARG(s.is_contiguous(), kOp, "quant_scale2 = ", TensorText{s}, ": must be contiguous");
  const bool per_channel = s.numel() != 1;
  NG_CHECK_ARG(!(per_channel && (c.q_padding || c.kv_padding)), kOp, "quant_scale2 = ",
               TensorText{s}, ": per-channel output quantisation is not supported with left "
               "padding (query_padding_size/kv_padding_size)");
  p.out_scale.data = s.data();
  if (per_channel) {
    p.out_scale.stride[1] = c.key.dv;
    p.out_scale.stride[3] = 1;
  }
  if (z.defined()) {
    check_same_device(z, "quant_offset2", c.q);
    check_offset_matches(z, "quant_offset2", s, "quant_scale2");
    NG_CHECK_ARG(z.is_contiguous(), kOp, "quant_offset2 = ", TensorText{z},
                 ": must be contiguous");
    p.out_offset = p.out_scale;
    p.out_offset.data = z.data();
  }
  c.key.out_int8 = 1;
}

}  // namespace

void plan_quant(FiaPlan& c) {
  const FiaOptions& o = c.o;
  NG_CHECK_ARG(o.antiquant_mode == 0 || o.antiquant_mode == 1, kOp, "antiquant_mode = ",
               o.antiquant_mode, ": must be 0 (per-channel or per-tensor) or 1 (per-token)");
  check_antiquant(c);
  check_quant_out(c);
  set_sig(c, FiaArg::antiquant_scale, o.antiquant_scale);
  set_sig(c, FiaArg::antiquant_offset, o.antiquant_offset);
  set_sig(c, FiaArg::key_antiquant_scale, o.key_antiquant_scale);
  set_sig(c, FiaArg::key_antiquant_offset, o.key_antiquant_offset);
  set_sig(c, FiaArg::value_antiquant_scale, o.value_antiquant_scale);
  set_sig(c, FiaArg::value_antiquant_offset, o.value_antiquant_offset);
  set_sig(c, FiaArg::quant_scale2, o.quant_scale2);
  set_sig(c, FiaArg::quant_offset2, o.quant_offset2);
  if (!c.int8_kv) {
    c.key.antiquant_mode = o.antiquant_mode;
    c.key.key_antiquant_mode = o.key_antiquant_mode;
    c.key.value_antiquant_mode = o.value_antiquant_mode;
  }
}

}  // namespace npugraph::ops::attention
