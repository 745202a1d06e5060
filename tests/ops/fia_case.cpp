#include "ops/fia_case.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace fia_test {
namespace {

namespace ng = npugraph;
using I64 = std::vector<std::int64_t>;

const char* antiquant_name(Antiquant a) {
  switch (a) {
    case Antiquant::none: return "";
    case Antiquant::tensor: return "_aqTensor";
    case Antiquant::channel: return "_aqChannel";
    case Antiquant::token: return "_aqToken";
    case Antiquant::sep_tensor: return "_kvTensor";
    case Antiquant::sep_channel: return "_kvChannel";
    case Antiquant::sep_token: return "_kvToken";
    case Antiquant::sep_head: return "_kvHead";
    case Antiquant::sep_token_head: return "_kvTokenHead";
    case Antiquant::sep_paged_token: return "_kvPagedToken";
    case Antiquant::sep_paged_token_head: return "_kvPagedTokenHead";
    case Antiquant::key_channel_value_token: return "_kChannelVToken";
  }
  return "?";
}

const char* quant_name(OutQuant q) {
  switch (q) {
    case OutQuant::none: return "";
    case OutQuant::tensor: return "_int8Tensor";
    case OutQuant::channel: return "_int8Channel";
    case OutQuant::tensor_offset: return "_int8TensorOffset";
    case OutQuant::channel_offset: return "_int8ChannelOffset";
  }
  return "?";
}

RefTensor ref_of(const std::vector<double>& values, const Shape& shape) {
  return {values, I64(shape.begin(), shape.end())};
}

// A random 0/1 mask with about 20% ones.
Tensor random_mask(std::vector<double>& values, const Shape& shape, DType dtype, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  values.resize(static_cast<std::size_t>(shape.numel()));
  for (double& x : values) x = u(gen) < 0.2 ? 1 : 0;
  return host_tensor(values, shape, dtype);
}

std::int64_t per_batch(const I64& values, std::int64_t b, std::int64_t full) {
  if (values.empty()) return full;
  return values.size() == 1 ? values[0] : values[static_cast<std::size_t>(b)];
}

I64 cumulative(const I64& lens) {
  I64 r(lens.size());
  std::partial_sum(lens.begin(), lens.end(), r.begin());
  return r;
}

}  // namespace

Shape layout_shape(const std::string& layout, std::int64_t B, std::int64_t heads, std::int64_t seq,
                   std::int64_t D) {
  if (layout == "BNSD") return {B, heads, seq, D};
  if (layout == "BSND") return {B, seq, heads, D};
  if (layout == "BSH") return {B, seq, heads * D};
  if (layout == "NSD" || layout == "NTD") return {heads, seq, D};
  if (layout == "TND") return {seq, heads, D};
  if (layout == "NBSD") return {heads, B, seq, D};
  throw std::invalid_argument("layout_shape: " + layout);
}

const Tensor& compressed_mask() {
  static const Tensor mask = [] {
    constexpr std::int64_t S = 2048;
    Tensor t = filled_tensor({S, S}, DType::boolean, 0);
    auto* p = static_cast<std::uint8_t*>(t.data());
    for (std::int64_t i = 0; i < S; ++i)
      for (std::int64_t j = i + 1; j < S; ++j) p[i * S + j] = 1;
    return t;
  }();
  return mask;
}

std::string FiaCase::name() const {
  std::string s = layout + "_" + std::string(ng::dtype_name(dtype)) + "_gqa" + std::to_string(gqa);
  if (decode) s += mode >= 0 ? "_decodeMask" : "_decode";
  else s += mode < 0 ? "_noMask" : mode == 0 ? "_m0Band" : "_m" + std::to_string(mode);
  s += kv == Kv::contiguous ? "_contig" : kv == Kv::paged_bsh ? "_pagedBSH" : "_pagedBNSD";
  s += padding ? "_leftPad" : "";
  s += lengths == Lengths::full ? "_full" : lengths == Lengths::ragged ? "_ragged" : "_broadcast";
  if (pse) s += "_pse";
  if (prefix) s += "_prefix";
  if (rope) s += "_rope";
  if (dv) s += "_dv8";
  s += antiquant_name(antiquant);
  s += quant_name(quant);
  if (sink) s += "_sink";
  return s;
}

FiaBuilt build_case(const FiaCase& c) {
  FiaBuilt r;
  RefArgs& a = r.ref;
  ng::ops::FiaOptions& o = r.opt;
  const std::string lin = c.layout.substr(0, c.layout.find('_'));
  const bool token = lin == "TND" || lin == "NTD";
  const bool paged = c.kv != Kv::contiguous;
  const bool int8 = c.antiquant != Antiquant::none;
  const DType kv_dtype = int8 ? DType::i8 : c.dtype;
  const std::uint32_t seed = c.seed * 97;
  a.layout = c.layout;
  a.B = lin == "NSD" ? 1 : 3;
  a.N = 4;
  a.KVN = a.N / c.gqa;
  a.Dk = 12;
  a.Dv = c.dv ? 8 : 12;
  a.Dr = c.rope ? 4 : 0;
  a.scale = 0.9;
  const std::int64_t B = a.B, N = a.N, KVN = a.KVN;

  // Lengths.
  I64 ql, kl;  // the option lists
  std::int64_t kv_capacity = 0;
  if (paged) {
    a.block_size = c.decode ? 32 : 128;
    a.max_blocks = c.decode ? 3 : 2;
    kv_capacity = a.block_size * a.max_blocks;
    kl = c.lengths == Lengths::ragged      ? (c.decode ? I64{57, 0, 41} : I64{150, 0, 41})
         : c.lengths == Lengths::broadcast ? (c.decode ? I64{41} : I64{130})
                                           : I64(3, kv_capacity);
  }
  if (token) {
    const I64 lens = c.lengths == Lengths::ragged ? I64{6, 3, 0}
                     : c.lengths == Lengths::full ? I64{7, 7, 7} : I64{5, 5, 5};
    ql = cumulative(lens);
    a.Sq = ql.back() + 2;  // two rows past the last batch: zero-filled
    if (!paged) {
      const I64 kv_lens = c.lengths == Lengths::ragged ? I64{57, 0, 41}
                          : c.lengths == Lengths::full ? I64{70, 70, 70} : I64{41, 41, 41};
      kl = cumulative(kv_lens);
      a.Skv = kl.back() + 1;
    }
  } else {
    a.Sq = c.decode ? 1 : c.padding ? 9 : 7;
    if (c.decode) {
      ql = c.lengths == Lengths::ragged ? I64{100, 0, 1}
           : c.lengths == Lengths::broadcast ? I64{100} : I64{};
    } else {
      ql = c.lengths == Lengths::ragged ? I64{6, 3, 0}
           : c.lengths == Lengths::broadcast ? I64{5}
           : c.padding ? I64{7, 7, 7} : I64{};
    }
    if (!paged) {
      a.Skv = c.padding ? 73 : 70;
      kl = c.lengths == Lengths::ragged ? I64{57, 0, 41}
           : c.lengths == Lengths::broadcast ? I64{41}
           : c.padding ? I64{70, 70, 70} : I64{};
    }
  }
  a.actual_seq_lengths = o.actual_seq_lengths = ql;
  a.actual_seq_lengths_kv = o.actual_seq_lengths_kv = kl;
  if (c.padding) {
    a.query_padding_size = 2;
    a.kv_padding_size = 3;
    o.query_padding_size = int_tensor({2}, {1}, DType::i64);
    o.kv_padding_size = int_tensor({3}, {1}, DType::i64);
  }

  // query, key, value (and the paged table).
  const double kv_lo = int8 ? -127 : -1, kv_hi = int8 ? 127 : 1;
  r.q = random_tensor(r.in.q, layout_shape(lin, B, N, a.Sq, a.Dk), c.dtype, seed + 1);
  Shape kshape, vshape, krshape;
  if (paged) {
    a.num_blocks = B * a.max_blocks + 2;
    a.cache_4d = c.kv == Kv::paged_bnsd;
    I64 ids(static_cast<std::size_t>(a.num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed + 2));
    a.block_table.assign(static_cast<std::size_t>(B * a.max_blocks), -1);  // unused: -1
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t used = (per_batch(kl, b, 0) + a.block_size - 1) / a.block_size;
      for (std::int64_t i = 0; i < used; ++i)
        a.block_table[b * a.max_blocks + i] = ids[b * a.max_blocks + i];
    }
    o.block_table = int_tensor(a.block_table, {B, a.max_blocks}, DType::i32);
    o.block_size = a.block_size;
    auto cache = [&](std::int64_t d) {
      return a.cache_4d ? Shape{a.num_blocks, KVN, a.block_size, d}
                        : Shape{a.num_blocks, a.block_size, KVN * d};
    };
    kshape = cache(a.Dk);
    vshape = cache(a.Dv);
    krshape = cache(a.Dr);
    a.Skv = kv_capacity;
  } else {
    kshape = layout_shape(lin, B, KVN, a.Skv, a.Dk);
    vshape = layout_shape(lin, B, KVN, a.Skv, a.Dv);
    krshape = layout_shape(lin, B, KVN, a.Skv, a.Dr);
  }
  r.k = random_tensor(r.in.k, kshape, kv_dtype, seed + 3, kv_lo, kv_hi);
  r.v = random_tensor(r.in.v, vshape, kv_dtype, seed + 4, kv_lo, kv_hi);

  // Shared prefix, rope.
  const std::int64_t Sp = 5;
  if (c.prefix) {
    a.prefix_seq = Sp;
    std::vector<double> x;
    o.key_shared_prefix = random_tensor(a.key_shared_prefix, layout_shape(lin, 1, KVN, Sp, a.Dk),
                                        kv_dtype, seed + 5, kv_lo, kv_hi);
    o.value_shared_prefix = random_tensor(a.value_shared_prefix,
                                          layout_shape(lin, 1, KVN, Sp, a.Dv), kv_dtype,
                                          seed + 6, kv_lo, kv_hi);
    if (c.seed % 2) a.actual_shared_prefix_len = o.actual_shared_prefix_len = {4};
  }
  if (c.rope) {
    o.query_rope = random_tensor(r.in.q_rope, layout_shape(lin, B, N, a.Sq, a.Dr), c.dtype, seed + 7);
    o.key_rope = random_tensor(r.in.k_rope, krshape, kv_dtype, seed + 8);
  }

  // Masks and the band.
  const std::int64_t skv_extent = paged ? kv_capacity : a.Skv + (c.prefix ? Sp : 0);
  const DType mask_dtype = c.seed % 3 == 0 ? DType::boolean : c.seed % 3 == 1 ? DType::u8 : DType::i8;
  a.pre_tokens = 0;  // ignored unless mode 0 with a mask, or mode 4
  a.next_tokens = -5;
  std::vector<double> mv;
  if (c.decode) {
    if (c.mode >= 0) {
      const Shape shapes[] = {{B, skv_extent}, {B, 1, skv_extent}, {1, 1, 1, skv_extent}};
      const Shape& s = shapes[c.seed % 3];
      o.atten_mask = random_mask(mv, s, mask_dtype, seed + 9);
      a.atten_mask = ref_of(mv, s);
    }
  } else if (c.mode == 0 || c.mode == 1) {
    const std::int64_t sq = a.Sq + static_cast<std::int64_t>(c.seed % 2);  // padded dims allowed
    const std::int64_t skv = skv_extent + static_cast<std::int64_t>(c.seed % 2) * 3;
    const Shape shapes[] = {{sq, skv}, {B, sq, skv}, {1, 1, sq, skv}, {B, 1, sq, skv}};
    const Shape& s = token ? shapes[0] : shapes[c.seed % 4];
    o.atten_mask = random_mask(mv, s, mask_dtype, seed + 9);
    a.atten_mask = ref_of(mv, s);
    if (c.mode == 0) {
      a.pre_tokens = 4;
      a.next_tokens = 1;
    }
  } else if (c.mode >= 2) {
    o.atten_mask = compressed_mask();
    a.atten_mask = {{}, {2048, 2048}};
    if (c.mode == 4) {
      a.pre_tokens = 5;
      a.next_tokens = 2;
    }
  }
  a.sparse_mode = o.sparse_mode = c.decode ? 0 : std::max(0, c.mode);
  o.pre_tokens = a.pre_tokens;
  o.next_tokens = a.next_tokens;
  if (c.pse) {
    const Shape s{c.seed % 2 ? 1 : B, N, a.Sq, skv_extent};
    std::vector<double> pv;
    o.pse_shift = random_tensor(pv, s, c.dtype, seed + 10);
    a.pse_shift = ref_of(pv, s);
  }

  // Antiquant parameters.
  const DType sep_dtype = c.seed % 2 ? DType::f32 : c.dtype;
  const std::int64_t S_tok = a.Skv;  // the key's S (paged: the capacity)
  auto param = [&](RefTensor& ref, Tensor& t, const Shape& shape, DType dt, bool offset,
                   std::uint32_t s) {
    std::vector<double> x;
    t = offset ? random_tensor(x, shape, dt, s, -3, 3) : random_tensor(x, shape, dt, s, 0.004, 0.012);
    ref = ref_of(x, shape);
  };
  auto pair = [&](RefTensor& rs, Tensor& ts, RefTensor& ro, Tensor& to, const Shape& shape,
                  DType dt, std::uint32_t s) {
    param(rs, ts, shape, dt, false, s);
    if (c.seed % 4 != 3) param(ro, to, shape, dt, true, s + 1);  // every 4th: symmetric
  };
  auto sep = [&](std::int64_t km, const Shape& ks, std::int64_t vm, const Shape& vs, DType dt) {
    a.key_antiquant_mode = o.key_antiquant_mode = km;
    a.value_antiquant_mode = o.value_antiquant_mode = vm;
    pair(a.key_antiquant_scale, o.key_antiquant_scale, a.key_antiquant_offset,
         o.key_antiquant_offset, ks, km == 0 || km == 2 ? dt : DType::f32, seed + 20);
    pair(a.value_antiquant_scale, o.value_antiquant_scale, a.value_antiquant_offset,
         o.value_antiquant_offset, vs, vm == 0 || vm == 2 ? dt : DType::f32, seed + 30);
  };
  const Shape tok_shape = c.seed % 2 ? Shape{1, B, S_tok} : Shape{B, S_tok};
  switch (c.antiquant) {
    case Antiquant::none: break;
    case Antiquant::tensor:
      pair(a.antiquant_scale, o.antiquant_scale, a.antiquant_offset, o.antiquant_offset, {2},
           c.dtype, seed + 20);
      break;
    case Antiquant::channel: {
      const Shape shapes[] = {{2, KVN, a.Dk}, {2, KVN, 1, a.Dk}, {2, KVN * a.Dk}};
      pair(a.antiquant_scale, o.antiquant_scale, a.antiquant_offset, o.antiquant_offset,
           shapes[c.seed % 3], c.dtype, seed + 20);
      break;
    }
    case Antiquant::token:
      a.antiquant_mode = o.antiquant_mode = 1;
      pair(a.antiquant_scale, o.antiquant_scale, a.antiquant_offset, o.antiquant_offset,
           {2, B, S_tok}, DType::f32, seed + 20);
      break;
    case Antiquant::sep_tensor: sep(0, {1}, 0, {1}, sep_dtype); break;
    case Antiquant::sep_channel:
      sep(0, c.seed % 2 ? Shape{KVN, a.Dk} : Shape{1, KVN, 1, a.Dk}, 0,
          c.seed % 2 ? Shape{KVN, a.Dv} : Shape{1, KVN, 1, a.Dv}, sep_dtype);
      break;
    case Antiquant::sep_token: sep(1, tok_shape, 1, tok_shape, sep_dtype); break;
    case Antiquant::sep_head: sep(2, {KVN}, 2, {KVN}, sep_dtype); break;
    case Antiquant::sep_token_head: sep(3, {B, KVN, S_tok}, 3, {B, KVN, S_tok}, sep_dtype); break;
    case Antiquant::sep_paged_token:
      sep(4, {a.num_blocks, a.block_size}, 4, {a.num_blocks, a.block_size}, sep_dtype);
      break;
    case Antiquant::sep_paged_token_head:
      sep(5, {a.num_blocks, KVN, a.block_size}, 5, {a.num_blocks, KVN, a.block_size}, sep_dtype);
      break;
    case Antiquant::key_channel_value_token:
      sep(0, {KVN * a.Dk}, 1, tok_shape, sep_dtype);
      break;
  }

  // Quantised output.
  if (c.quant != OutQuant::none) {
    const bool channel = c.quant == OutQuant::channel || c.quant == OutQuant::channel_offset;
    const Shape s = !channel ? Shape{1} : c.seed % 2 ? Shape{N, a.Dv} : Shape{1, 1, N * a.Dv};
    const DType dt = c.dtype == DType::bf16 && c.seed % 2 ? DType::bf16 : DType::f32;
    std::vector<double> x;
    o.quant_scale2 = random_tensor(x, s, dt, seed + 40, 60, 120);
    a.quant_scale2 = ref_of(x, s);
    if (c.quant == OutQuant::tensor_offset || c.quant == OutQuant::channel_offset) {
      o.quant_offset2 = random_tensor(x, s, dt, seed + 41, -5, 5);
      a.quant_offset2 = ref_of(x, s);
    }
  }

  if (c.sink) {
    const DType dt = c.seed % 3 == 0 ? DType::f32 : c.seed % 3 == 1 ? DType::f16 : DType::bf16;
    o.learnable_sink = random_tensor(a.learnable_sink, {N}, dt, seed + 50, -2, 2);
  }

  o.num_heads = N;
  o.num_key_value_heads = c.gqa == 1 ? 0 : KVN;
  o.scale = a.scale;
  o.input_layout = c.layout;
  o.softmax_lse_flag = true;
  return r;
}

double out_bound(DType t) {
  switch (t) {
    case DType::f32: return 1e-5;
    case DType::f16: return 5e-4;
    case DType::bf16: return 4e-3;
    default: return 0;
  }
}

void expect_matches(const FiaBuilt& b, const Tensor& out_t, const Tensor& lse_t) {
  const RefResult ref = fia_reference(b.ref, b.in);
  const std::vector<double> out = read_back(out_t);
  const std::vector<double> lse = read_back(lse_t);
  ASSERT_EQ(out.size(), ref.out.size());
  ASSERT_EQ(lse.size(), ref.lse.size());
  const bool int8 = out_t.dtype() == DType::i8;
  const double eps = out_bound(b.q.dtype());
  int failures = 0;
  for (std::size_t i = 0; i < out.size() && failures < 10; ++i) {
    const double bound = int8 ? 1.0 : eps * std::max(1.0, std::abs(ref.out[i]));
    if (!(std::abs(out[i] - ref.out[i]) <= bound)) {
      ADD_FAILURE() << "attention_out[" << i << "] = " << out[i] << ", reference " << ref.out[i]
                    << ", bound " << bound;
      ++failures;
    }
  }
  for (std::size_t i = 0; i < lse.size() && failures < 10; ++i) {
    const bool ok = std::isinf(ref.lse[i])
                        ? lse[i] == ref.lse[i]
                        : std::abs(lse[i] - ref.lse[i]) <= 1e-5 * (1 + std::abs(ref.lse[i]));
    if (!ok) {
      ADD_FAILURE() << "softmax_lse[" << i << "] = " << lse[i] << ", reference " << ref.lse[i];
      ++failures;
    }
  }
}

void expect_parity(const FiaBuilt& b) {
  const auto r = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  ng::current_stream().synchronize();
  EXPECT_EQ(r.attention_out.shape(), ng::ops::fia_output_shape(b.q, b.k, b.v, b.opt));
  EXPECT_EQ(r.softmax_lse.shape(), ng::ops::fia_lse_shape(b.q, b.k, b.v, b.opt));
  EXPECT_EQ(r.attention_out.dtype(), b.opt.quant_scale2.defined() ? DType::i8 : b.q.dtype());
  EXPECT_EQ(r.attention_out.dtype(), ng::ops::fia_output_dtype(b.q, b.k, b.v, b.opt));
  expect_matches(b, r.attention_out, r.softmax_lse);
}

}  // namespace fia_test
