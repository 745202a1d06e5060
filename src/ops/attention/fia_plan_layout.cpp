// The plan's first stage (Note [FIA plan]): parsing input_layout, reading query/key/value (and
// rope, shared prefix, paged caches) as (b, n, s, d), and the views the kernel indexes them with.
#include <initializer_list>
#include <limits>
#include <string_view>
#include <utility>

#include "ops/attention/fia_plan.hpp"

namespace npugraph::ops::attention {
namespace {

struct LayoutPair {
  std::string_view name;
  FiaLayout in, out;
};
constexpr LayoutPair kLayouts[] = {
    {"BSH", FiaLayout::bsh, FiaLayout::bsh},          {"BSND", FiaLayout::bsnd, FiaLayout::bsnd},
    {"BNSD", FiaLayout::bnsd, FiaLayout::bnsd},       {"NSD", FiaLayout::nsd, FiaLayout::nsd},
    {"TND", FiaLayout::tnd, FiaLayout::tnd},          {"NTD", FiaLayout::ntd, FiaLayout::ntd},
    {"BNSD_BSND", FiaLayout::bnsd, FiaLayout::bsnd},  {"BSH_BNSD", FiaLayout::bsh, FiaLayout::bnsd},
    {"BSND_BNSD", FiaLayout::bsnd, FiaLayout::bnsd},  {"NTD_TND", FiaLayout::ntd, FiaLayout::tnd},
    {"TND_NTD", FiaLayout::tnd, FiaLayout::ntd},      {"BSH_NBSD", FiaLayout::bsh, FiaLayout::nbsd},
    {"BSND_NBSD", FiaLayout::bsnd, FiaLayout::nbsd},  {"BNSD_NBSD", FiaLayout::bnsd, FiaLayout::nbsd},
};

}  // namespace

bool parse_layout(std::string_view name, FiaLayout& in, FiaLayout& out) {
  for (const LayoutPair& l : kLayouts)
    if (l.name == name) {
      in = l.in;
      out = l.out;
      return true;
    }
  return false;
}

namespace {

const char* rank_text(FiaLayout l) {
  switch (l) {
    case FiaLayout::bsh: return "3-D [B, S, H]";
    case FiaLayout::bsnd: return "4-D [B, S, N, D]";
    case FiaLayout::bnsd: return "4-D [B, N, S, D]";
    case FiaLayout::nsd: return "3-D [N, S, D]";
    case FiaLayout::tnd: return "3-D [T, N, D]";
    case FiaLayout::ntd: return "3-D [N, T, D]";
    case FiaLayout::nbsd: return "4-D [N, B, S, D]";
  }
  return "?";
}

int layout_rank(FiaLayout l) {
  return l == FiaLayout::bsnd || l == FiaLayout::bnsd || l == FiaLayout::nbsd ? 4 : 3;
}

struct Dims {
  std::int64_t b = 1, n = 0, s = 0, d = 0;
};

// Reads t as (b, n, s, d) in layout l with `heads` heads (BSH: d = H / heads). S may be 0.
Dims split(const Tensor& t, const char* name, FiaLayout l, std::int64_t heads,
           const char* heads_name) {
  const int rank = layout_rank(l);
  NG_CHECK_ARG(t.dim() == rank, kOp, name, " = ", TensorText{t}, ": with input_layout ",
               layout_name(l), " it must be ", rank_text(l));
  for (int i = 0; i < rank; ++i)
    NG_CHECK_ARG(t.shape()[i] >= 0, kOp, name, " = ", TensorText{t},
                 ": dimensions must be >= 0");
  const Shape& s = t.shape();
  Dims r;
  switch (l) {
    case FiaLayout::bsh:
      NG_CHECK_ARG(s[2] % heads == 0, kOp, name, " = ", TensorText{t}, ": H = ", s[2],
                   " must be a multiple of ", heads_name, " = ", heads);
      r = {s[0], heads, s[1], s[2] / heads};
      break;
    case FiaLayout::bsnd: r = {s[0], s[2], s[1], s[3]}; break;
    case FiaLayout::bnsd: r = {s[0], s[1], s[2], s[3]}; break;
    case FiaLayout::nsd: r = {1, s[0], s[1], s[2]}; break;
    case FiaLayout::tnd: r = {1, s[1], s[0], s[2]}; break;
    case FiaLayout::ntd: r = {1, s[0], s[1], s[2]}; break;
    case FiaLayout::nbsd: r = {s[1], s[0], s[2], s[3]}; break;
  }
  NG_CHECK_ARG(r.n == heads, kOp, name, " = ", TensorText{t}, ": its N dimension (", r.n,
               ") must equal ", heads_name, " = ", heads);
  NG_CHECK_ARG(r.b >= 1, kOp, name, " = ", TensorText{t}, ": its B dimension must be >= 1");
  NG_CHECK_ARG(r.d >= 1, kOp, name, " = ", TensorText{t}, ": its head dim D must be >= 1");
  NG_CHECK_ARG(r.d <= 512, kOp, name, " = ", TensorText{t}, ": head dim D = ", r.d,
               " must be <= 512");
  return r;
}

// Reads a paged cache [blocks, block_size, N * D] or [blocks, N, block_size, D] as
// (blocks, n, block_size, d).
Dims split_paged(const Tensor& t, const char* name, FiaKvStore store, std::int64_t heads,
                 std::int64_t block_size) {
  const bool bsh = store == FiaKvStore::paged_bsh;
  NG_CHECK_ARG(t.dim() == (bsh ? 3 : 4), kOp, name, " = ", TensorText{t},
               ": a paged cache must be [blocks, block_size, H] or [blocks, KV_N, block_size, D], "
               "the same form for key, value and key_rope");
  const Shape& s = t.shape();
  Dims r;
  if (bsh) {
    NG_CHECK_ARG(s[2] % heads == 0, kOp, name, " = ", TensorText{t}, ": H = ", s[2],
                 " must be a multiple of num_key_value_heads = ", heads);
    r = {s[0], heads, s[1], s[2] / heads};
  } else {
    r = {s[0], s[1], s[2], s[3]};
    NG_CHECK_ARG(r.n == heads, kOp, name, " = ", TensorText{t}, ": its N dimension (", r.n,
                 ") must equal num_key_value_heads = ", heads);
  }
  NG_CHECK_ARG(r.b >= 1, kOp, name, " = ", TensorText{t}, ": the cache must hold >= 1 block");
  NG_CHECK_ARG(r.s == block_size, kOp, name, " = ", TensorText{t}, ": its block_size dimension (",
               r.s, ") must equal block_size = ", block_size);
  NG_CHECK_ARG(r.d >= 1 && r.d <= 512, kOp, name, " = ", TensorText{t}, ": head dim D = ", r.d,
               " must be in [1, 512]");
  return r;
}

void check_dtypes(FiaPlan& c) {
  const DType qt = c.q.dtype();
  NG_CHECK_ARG(qt != DType::i8, kOp, "query = ", TensorText{c.q},
               ": an int8 query (full quantisation with dequant_scale1, quant_scale1, "
               "dequant_scale2) is not supported on CPU");
  NG_CHECK_ARG(is_floating(qt), kOp, "query = ", TensorText{c.q},
               ": dtype must be float32, float16 or bfloat16");
  const DType kt = c.k.dtype();
  // A float32 query may read a float16 / bfloat16 cache (our extension, as llama.cpp keeps its KV
  // in float16 beside float32 activations): the keys are widened as they are loaded.
  const bool half_kv = qt == DType::f32 && (kt == DType::f16 || kt == DType::bf16);
  NG_CHECK_ARG(kt == qt || kt == DType::i8 || half_kv, kOp, "key = ", TensorText{c.k}, ": dtype ",
               dtype_name(kt), " must equal the query's dtype ", dtype_name(qt),
               ", be int8 (with antiquant parameters), or be float16 / bfloat16 under a float32 query");
  NG_CHECK_ARG(c.v.dtype() == kt, kOp, "value = ", TensorText{c.v}, ": dtype ",
               dtype_name(c.v.dtype()), " must equal the key's dtype ", dtype_name(kt));
  c.q_dtype = qt;
  c.kv_dtype = kt;
  c.int8_kv = kt == DType::i8;
  for (const auto& [t, name] : {std::pair{&c.o.dequant_scale1, "dequant_scale1"},
                                std::pair{&c.o.quant_scale1, "quant_scale1"},
                                std::pair{&c.o.dequant_scale2, "dequant_scale2"}})
    NG_CHECK_ARG(!t->defined(), kOp, name, " = ", TensorText{*t},
                 ": belongs to an int8 query (full quantisation), which is not supported on CPU");
}

void check_heads(FiaPlan& c) {
  const FiaOptions& o = c.o;
  NG_CHECK_ARG(o.num_heads >= 1 && o.num_heads <= 256, kOp, "num_heads = ", o.num_heads,
               ": must be in [1, 256]");
  NG_CHECK_ARG(o.num_key_value_heads >= 0 && o.num_key_value_heads <= o.num_heads, kOp,
               "num_key_value_heads = ", o.num_key_value_heads, ": must be in [0, num_heads = ",
               o.num_heads, "] (0 means num_heads)");
  c.key.heads = o.num_heads;
  c.key.kv_heads = o.num_key_value_heads == 0 ? o.num_heads : o.num_key_value_heads;
  NG_CHECK_ARG(c.key.heads % c.key.kv_heads == 0, kOp, "num_key_value_heads = ", c.key.kv_heads,
               ": must divide num_heads = ", c.key.heads);
  NG_CHECK_ARG(c.key.heads / c.key.kv_heads <= 64, kOp, "num_key_value_heads = ",
               c.key.kv_heads, ": num_heads / num_key_value_heads = ",
               c.key.heads / c.key.kv_heads, " must be <= 64");
}

// Paged KV: block_table and block_size together; the table's shape; the block_size rule.
void check_paged(FiaPlan& c) {
  const FiaOptions& o = c.o;
  c.paged = o.block_table.defined();
  if (!c.paged) {
    NG_CHECK_ARG(o.block_size == 0, kOp, "block_size = ", o.block_size,
                 ": must be 0 without block_table (paged KV needs both)");
    c.key.kv_store = static_cast<std::int64_t>(FiaKvStore::contiguous);
    return;
  }
  const Tensor& bt = o.block_table;
  check_same_device(bt, "block_table", c.q);
  NG_CHECK_ARG(bt.dtype() == DType::i32 && bt.dim() == 2 && bt.size(1) >= 1, kOp,
               "block_table = ", TensorText{bt},
               ": must be int32 [B, max_blocks] with max_blocks >= 1");
  NG_CHECK_ARG(bt.size(0) == c.key.batch, kOp, "block_table = ", TensorText{bt},
               ": its first dimension must equal B = ", c.key.batch);
  NG_CHECK_ARG(!(c.int8_kv && !c.decode), kOp, "key = ", TensorText{c.k},
               ": paged int8 KV (antiquant) is only supported for decode (query S == 1)");
  const bool small = c.decode || c.rope;
  const std::int64_t bs = o.block_size;
  if (small) {
    const std::int64_t align = c.int8_kv ? 32 : 16;
    NG_CHECK_ARG(bs > 0 && bs % align == 0, kOp, "block_size = ", bs,
                 ": with paged KV it must be a positive multiple of ", align,
                 c.int8_kv ? " (int8 KV)" : "");
  } else {
    NG_CHECK_ARG(bs >= 128 && bs <= 512 && bs % 128 == 0, kOp, "block_size = ", bs,
                 ": with paged KV and query S > 1 it must be a multiple of 128 in [128, 512]");
  }
  c.key.block_size = bs;
  c.key.max_blocks = bt.size(1);
  c.key.kv_store = static_cast<std::int64_t>(c.k.dim() == 3 ? FiaKvStore::paged_bsh
                                                            : FiaKvStore::paged_bnsd);
}

// key/value (contiguous or paged): KV_N, S, D of key and D of value.
void check_kv(FiaPlan& c) {
  const std::int64_t kvh = c.key.kv_heads;
  Dims kd, vd;
  if (c.paged) {
    const auto store = static_cast<FiaKvStore>(c.key.kv_store);
    kd = split_paged(c.k, "key", store, kvh, c.key.block_size);
    vd = split_paged(c.v, "value", store, kvh, c.key.block_size);
    NG_CHECK_ARG(vd.b == kd.b, kOp, "value = ", TensorText{c.v}, ": its block count (", vd.b,
                 ") must equal the key's (", kd.b, ")");
    c.key.num_blocks = kd.b;
    std::int64_t capacity = 0;
    NG_CHECK_ARG(!__builtin_mul_overflow(c.key.max_blocks, c.key.block_size, &capacity) &&
                     capacity <= std::numeric_limits<std::int32_t>::max(),
                 kOp, "block_table = ", TensorText{c.o.block_table}, " with block_size = ", c.key.block_size,
                 ": its capacity max_blocks * block_size must be at most 2147483647 tokens");
    c.key.kv_seq = capacity;
    c.key_s = 0;
  } else {
    kd = split(c.k, "key", c.in, kvh, "num_key_value_heads");
    vd = split(c.v, "value", c.in, kvh, "num_key_value_heads");
    if (!c.token)
      NG_CHECK_ARG(kd.b == c.key.batch, kOp, "key = ", TensorText{c.k}, ": its B dimension (",
                   kd.b, ") must equal the query's (", c.key.batch, ")");
    NG_CHECK_ARG(vd.b == kd.b && vd.s == kd.s, kOp, "value = ", TensorText{c.v},
                 ": its B and S must equal the key's (", kd.b, ", ", kd.s,
                 "); only D may differ");
    c.key.kv_seq = kd.s;
    c.key_s = kd.s;
  }
  NG_CHECK_ARG(kd.d == c.key.dk, kOp, "key = ", TensorText{c.k}, ": its head dim D = ", kd.d,
               " must equal the query's (", c.key.dk, ")");
  c.key.dv = vd.d;
}

// query_rope / key_rope: the query's / key's shapes with their own D.
void check_rope(FiaPlan& c) {
  const FiaOptions& o = c.o;
  NG_CHECK_ARG(!o.key_rope_antiquant_scale.defined(), kOp, "key_rope_antiquant_scale = ",
               TensorText{o.key_rope_antiquant_scale},
               ": is reserved by torch_npu and must be undefined (None)");
  NG_CHECK_ARG(o.query_rope.defined() == o.key_rope.defined(), kOp,
               o.query_rope.defined() ? "key_rope = undefined" : "query_rope = undefined",
               ": query_rope and key_rope must be given together (both or neither)");
  if (!c.rope) return;
  const Tensor& qr = o.query_rope;
  const Tensor& kr = o.key_rope;
  check_same_device(qr, "query_rope", c.q);
  check_same_device(kr, "key_rope", c.q);
  NG_CHECK_ARG(qr.dtype() == c.q_dtype, kOp, "query_rope = ", TensorText{qr},
               ": must have the query's dtype ", dtype_name(c.q_dtype));
  NG_CHECK_ARG(!c.int8_kv, kOp, "key_rope = ", TensorText{kr},
               ": rope is not supported with int8 key/value");
  NG_CHECK_ARG(kr.dtype() == c.kv_dtype, kOp, "key_rope = ", TensorText{kr},
               ": must have the key's dtype ", dtype_name(c.kv_dtype));
  const Dims qd = split(qr, "query_rope", c.in, c.key.heads, "num_heads");
  const Dims qdims = split(c.q, "query", c.in, c.key.heads, "num_heads");
  NG_CHECK_ARG(qd.b == qdims.b && qd.s == qdims.s, kOp, "query_rope = ", TensorText{qr},
               ": must have the query's shape except D");
  c.key.dr = qd.d;
  Dims kd;
  if (c.paged) {
    kd = split_paged(kr, "key_rope", static_cast<FiaKvStore>(c.key.kv_store), c.key.kv_heads,
                     c.key.block_size);
    NG_CHECK_ARG(kd.b == c.key.num_blocks, kOp, "key_rope = ", TensorText{kr},
                 ": must have the key's shape except D");
  } else {
    kd = split(kr, "key_rope", c.in, c.key.kv_heads, "num_key_value_heads");
    const Dims kdims = split(c.k, "key", c.in, c.key.kv_heads, "num_key_value_heads");
    NG_CHECK_ARG(kd.b == kdims.b && kd.s == kdims.s, kOp, "key_rope = ", TensorText{kr},
                 ": must have the key's shape except D");
  }
  NG_CHECK_ARG(kd.d == c.key.dr, kOp, "key_rope = ", TensorText{kr}, ": its D (", kd.d,
               ") must equal query_rope's (", c.key.dr, ")");
}

// key_shared_prefix / value_shared_prefix: the key's layout with B = 1, the key's dtype.
void check_prefix(FiaPlan& c) {
  const FiaOptions& o = c.o;
  const Tensor& kp = o.key_shared_prefix;
  const Tensor& vp = o.value_shared_prefix;
  NG_CHECK_ARG(kp.defined() == vp.defined(), kOp,
               kp.defined() ? "value_shared_prefix = undefined" : "key_shared_prefix = undefined",
               ": key_shared_prefix and value_shared_prefix must be given together");
  if (!c.prefix) {
    NG_CHECK_ARG(o.actual_shared_prefix_len.empty(), kOp, "actual_shared_prefix_len = ",
                 ListText{o.actual_shared_prefix_len},
                 ": needs key_shared_prefix and value_shared_prefix");
    return;
  }
  check_same_device(kp, "key_shared_prefix", c.q);
  check_same_device(vp, "value_shared_prefix", c.q);
  NG_CHECK_ARG(!c.token, kOp, "key_shared_prefix = ", TensorText{kp},
               ": a shared prefix is not supported with input_layout ", o.input_layout);
  NG_CHECK_ARG(!c.paged, kOp, "key_shared_prefix = ", TensorText{kp},
               ": a shared prefix is not supported with paged KV (block_table)");
  NG_CHECK_ARG(!c.rope, kOp, "key_shared_prefix = ", TensorText{kp},
               ": a shared prefix is not supported with query_rope/key_rope");
  NG_CHECK_ARG(kp.dtype() == c.kv_dtype, kOp, "key_shared_prefix = ", TensorText{kp},
               ": must have the key's dtype ", dtype_name(c.kv_dtype));
  NG_CHECK_ARG(vp.dtype() == c.kv_dtype, kOp, "value_shared_prefix = ", TensorText{vp},
               ": must have the value's dtype ", dtype_name(c.kv_dtype));
  const Dims kd = split(kp, "key_shared_prefix", c.in, c.key.kv_heads, "num_key_value_heads");
  const Dims vd = split(vp, "value_shared_prefix", c.in, c.key.kv_heads, "num_key_value_heads");
  NG_CHECK_ARG(kd.b == 1, kOp, "key_shared_prefix = ", TensorText{kp},
               ": its B dimension must be 1");
  NG_CHECK_ARG(vd.b == 1, kOp, "value_shared_prefix = ", TensorText{vp},
               ": its B dimension must be 1");
  NG_CHECK_ARG(kd.d == c.key.dk, kOp, "key_shared_prefix = ", TensorText{kp},
               ": its D must equal the key's (", c.key.dk, ")");
  NG_CHECK_ARG(vd.d == c.key.dv, kOp, "value_shared_prefix = ", TensorText{vp},
               ": its D must equal the value's (", c.key.dv, ")");
  NG_CHECK_ARG(vd.s == kd.s, kOp, "value_shared_prefix = ", TensorText{vp},
               ": its S must equal key_shared_prefix's (", kd.s, ")");
  c.key.prefix_seq = kd.s;
}

}  // namespace

// The element strides of t as (b, n, s, d) in layout l (BSH: d = H / N).
FiaView view_of(const Tensor& t, FiaLayout l, std::int64_t d) {
  FiaView v;
  if (!t.defined()) return v;
  v.data = t.data();
  const Shape& st = t.strides();
  auto set = [&](std::int64_t b, std::int64_t n, std::int64_t s, std::int64_t dd) {
    v.stride[0] = b; v.stride[1] = n; v.stride[2] = s; v.stride[3] = dd;
  };
  switch (l) {
    case FiaLayout::bsh: set(st[0], d * st[2], st[1], st[2]); break;
    case FiaLayout::bsnd: set(st[0], st[2], st[1], st[3]); break;
    case FiaLayout::bnsd: set(st[0], st[1], st[2], st[3]); break;
    case FiaLayout::nsd: set(0, st[0], st[1], st[2]); break;
    case FiaLayout::tnd: set(0, st[1], st[0], st[2]); break;
    case FiaLayout::ntd: set(0, st[0], st[1], st[2]); break;
    case FiaLayout::nbsd: set(st[1], st[0], st[2], st[3]); break;
  }
  return v;
}

namespace {

// A KV-side tensor: the input layout, or a paged cache (block, n, row, d).
FiaView kv_view_of(const FiaPlan& c, const Tensor& t, std::int64_t d) {
  switch (static_cast<FiaKvStore>(c.key.kv_store)) {
    case FiaKvStore::contiguous: return view_of(t, c.in, d);
    case FiaKvStore::paged_bsh: return view_of(t, FiaLayout::bsh, d);
    case FiaKvStore::paged_bnsd: return view_of(t, FiaLayout::bnsd, d);
  }
  return {};
}

// The views of query, key, value, rope, prefix and block_table (Note [FIA views]).
void make_input_views(const FiaPlan& c) {
  const FiaShapeKey& k = c.key;
  FiaParams& p = c.header;
  p.q = view_of(c.q, c.in, k.dk);
  p.q_rope = view_of(c.o.query_rope, c.in, k.dr);
  p.k = kv_view_of(c, c.k, k.dk);
  p.v = kv_view_of(c, c.v, k.dv);
  p.k_rope = kv_view_of(c, c.o.key_rope, k.dr);
  p.k_prefix = view_of(c.o.key_shared_prefix, c.in, k.dk);
  p.v_prefix = view_of(c.o.value_shared_prefix, c.in, k.dv);
  if (c.paged) {
    p.block_table.data = c.o.block_table.data();
    p.block_table.stride[0] = c.o.block_table.stride(0);
    p.block_table.stride[2] = c.o.block_table.stride(1);
  }
}

}  // namespace

void plan_layout(FiaPlan& c) {
  const FiaOptions& o = c.o;
  NG_CHECK_ARG(parse_layout(o.input_layout, c.in, c.out), kOp, "input_layout = \"", o.input_layout,
               "\": must be BSH, BSND, BNSD, NSD, TND, NTD, or one of the output forms "
               "BNSD_BSND, BSH_BNSD, BSND_BNSD, NTD_TND, TND_NTD, BSH_NBSD, BSND_NBSD, BNSD_NBSD");
  c.token = is_token_layout(c.in);
  c.key.layout_in = static_cast<std::int64_t>(c.in);
  c.key.layout_out = static_cast<std::int64_t>(c.out);
  check_heads(c);

  check_defined(c.q, "query");
  check_defined(c.k, "key");
  check_defined(c.v, "value");
  check_same_device(c.k, "key", c.q);
  check_same_device(c.v, "value", c.q);
  check_dtypes(c);

  const Dims qd = split(c.q, "query", c.in, c.key.heads, "num_heads");
  c.key.dk = qd.d;
  c.key.q_seq = qd.s;
  if (c.token) {
    NG_CHECK_ARG(!o.actual_seq_lengths.empty(), kOp,
                 "actual_seq_lengths = []: with input_layout ", o.input_layout,
                 " it is required (cumulative query lengths; their count is B)");
    c.key.batch = static_cast<std::int64_t>(o.actual_seq_lengths.size());
  } else {
    c.key.batch = qd.b;
  }
  NG_CHECK_ARG(c.key.batch <= 65536, kOp, "query = ", TensorText{c.q}, ": B = ", c.key.batch,
               " must be <= 65536");
  c.decode = !c.token && qd.s == 1;
  c.key.decode = c.decode ? 1 : 0;
  c.rope = o.query_rope.defined();
  c.prefix = o.key_shared_prefix.defined();
  check_paged(c);
  check_kv(c);
  check_rope(c);
  check_prefix(c);
  set_sig(c, FiaArg::query, c.q);
  set_sig(c, FiaArg::key, c.k);
  set_sig(c, FiaArg::value, c.v);
  set_sig(c, FiaArg::query_rope, o.query_rope);
  set_sig(c, FiaArg::key_rope, o.key_rope);
  set_sig(c, FiaArg::key_shared_prefix, o.key_shared_prefix);
  set_sig(c, FiaArg::value_shared_prefix, o.value_shared_prefix);
  set_sig(c, FiaArg::block_table, o.block_table);
  make_input_views(c);
}

}  // namespace npugraph::ops::attention
