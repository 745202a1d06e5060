// libFuzzer harness for the argument surface of fused_infer_attention_score (FIA).
//
// The input is decoded into one call: dtypes, a layout (the six input layouts, the X_Y output forms
// and a few invalid names), B / N / KV_N / Sq / Skv / D / Dv, actual lengths (per batch or
// cumulative), paged KV (block_table, block_size, both cache forms), sparse_mode with a full or the
// compressed mask, pse_shift, pre/next tokens, left padding, antiquant (combined and separate, every
// mode), the int8 output, a shared prefix, rope, inner_precise, scale, and the `.out` form's
// workspace / attention_out / softmax_lse (sized right, or perturbed). Most inputs decode to an
// almost-valid call, so the checks and both CPU kernels (fast and simple) are reached.
//
// Findings: any crash or sanitizer report, any exception that is not an npugraph::Error (or is an
// InternalError), and, in the graph mode, a broken promise of docs/semantics.md §6:
//   - eager and replayed results are bitwise equal, before and after a task update;
//   - fia_workspace_bytes never depends on host values;
//   - the eager form's outputs have fia_output_shape / fia_lse_shape.
// Tensors are small and live in exact-size heap buffers (ASan sees every stray access).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "npugraph/npugraph.hpp"
#include "ops/attention/fia_kernel_mode.hpp"

namespace {

namespace ng = npugraph;
using ng::DType;
using ng::Shape;
using ng::Tensor;
using ng::ops::FiaOptions;
using ngfuzz::Input;
using ngfuzz::Rng;
using ngfuzz::exact_tensor;

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

const char* const kLayouts[] = {"BSH",      "BSND",     "BNSD",     "NSD",       "TND",
                                "NTD",      "BNSD_BSND", "BSH_BNSD", "BSND_BNSD", "NTD_TND",
                                "TND_NTD",  "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD"};
const char* const kBadLayouts[] = {"XYZ", "", "bnsd", "BSH_BSND", "TND_BSH", "NBSD", "BNSD_",
                                   "BNSD_BNSD", "NSD_TND"};

// The compressed mask of sparse_mode 2-4: bool [2048, 2048], 1 above the diagonal (torch_npu's).
const Tensor& compressed_mask() {
  static const Tensor m = [] {
    Tensor t = exact_tensor({2048, 2048}, DType::boolean);
    auto* p = t.data_ptr<std::uint8_t>();
    for (int i = 0; i < 2048; ++i)
      for (int j = 0; j < 2048; ++j) p[i * 2048 + j] = j > i ? 1 : 0;
    return t;
  }();
  return m;
}

enum class Lay { bsh, bsnd, bnsd, nsd, tnd, ntd, nbsd };

Lay in_layout(const std::string& name) {
  if (name.starts_with("BSND")) return Lay::bsnd;
  if (name.starts_with("BNSD")) return Lay::bnsd;
  if (name.starts_with("NSD")) return Lay::nsd;
  if (name.starts_with("TND")) return Lay::tnd;
  if (name.starts_with("NTD")) return Lay::ntd;
  return Lay::bsh;
}

// The shape of a (b, n, s, d) tensor in layout l (TND/NTD: s is T; NSD: no b).
Shape shape_in(Lay l, std::int64_t b, std::int64_t n, std::int64_t s, std::int64_t d) {
  switch (l) {
    case Lay::bsh: return {b, s, n * d};
    case Lay::bsnd: return {b, s, n, d};
    case Lay::bnsd: return {b, n, s, d};
    case Lay::nsd: return {n, s, d};
    case Lay::tnd: return {s, n, d};
    case Lay::ntd: return {n, s, d};
    case Lay::nbsd: return {n, b, s, d};
  }
  return {};
}

// Contiguous, or (rarely) with a padded outermost stride: strided inputs are allowed.
Tensor input_tensor(Input& in, Rng& rng, const Shape& shape, DType dtype, double scale = 1.0,
                    bool allow_strided = true) {
  Shape strides = ng::contiguous_strides(shape);
  if (allow_strided && shape.size() >= 2 && in.chance(24)) {
    const std::int64_t pad = in.range(1, 3);
    // Pad dimension 0's stride: the rows of every other dimension stay contiguous.
    strides[0] = strides[0] + pad;
  }
  Tensor t = exact_tensor(shape, strides, dtype);
  ngfuzz::fill_random(t, rng, scale);
  return t;
}

Tensor int64_scalar(std::int64_t v) {
  Tensor t = exact_tensor({1}, DType::i64);
  *t.data_ptr<std::int64_t>() = v;
  return t;
}

DType float_dtype(Input& in) {
  static constexpr DType kFloats[] = {DType::f16, DType::f16, DType::bf16, DType::f32};
  return in.pick(kFloats);
}

DType any_dtype(Input& in) {
  static constexpr DType kAll[] = {DType::f32, DType::f16, DType::bf16, DType::i8,
                                   DType::u8,  DType::i32, DType::i64,  DType::boolean};
  return in.pick(kAll);
}

std::int64_t band_value(Input& in) {
  static constexpr std::int64_t kBand[] = {2147483647, 2147483647, 65535, 0, 1, 2, 3, -1, -2,
                                           4, 7, kI64Max, kI64Min, -2147483648LL, 1LL << 61};
  if (in.chance(40)) return in.range(-10, 10);
  return in.pick(kBand);
}

// Per-batch lengths for a dimension of `full` (0..full, with rare out-of-range values), as a
// count of 0, 1, B, B + 1 or B - 1 values.
std::vector<std::int64_t> lengths(Input& in, std::int64_t batch, std::int64_t full) {
  const int kind = in.u8() % 8;
  std::int64_t count = 0;
  switch (kind) {
    case 0: case 1: count = 0; break;
    case 2: count = 1; break;
    case 3: count = batch + 1; break;
    case 4: count = batch > 1 ? batch - 1 : 1; break;
    default: count = batch; break;
  }
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < count; ++i) {
    if (in.chance(8)) {
      static constexpr std::int64_t kBad[] = {-1, kI64Max, kI64Min, 1LL << 40};
      v.push_back(in.chance(128) ? full + 1 : in.pick(kBad));
    } else {
      v.push_back(in.range(0, full));
    }
  }
  return v;
}

// Cumulative lengths of `batch` batches inside `tokens` tokens.
std::vector<std::int64_t> cumulative(Input& in, std::int64_t batch, std::int64_t tokens) {
  std::vector<std::int64_t> v;
  std::int64_t at = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    at = std::min(tokens, at + in.range(0, std::max<std::int64_t>(1, tokens / batch + 1)));
    if (in.chance(6)) at = in.chance(128) ? at - 2 : tokens + 1;  // not non-decreasing / past T
    v.push_back(at);
  }
  return v;
}

struct Case {
  Tensor q, k, v;
  FiaOptions opt;
  DType q_dtype = DType::f16;
  bool token = false;
};

// Decodes one call. Every choice reads bytes, so the fuzzer can steer each one.
Case decode_case(Input& in, Rng& rng) {
  Case c;
  FiaOptions& o = c.opt;

  // Dtypes.
  c.q_dtype = in.chance(6) ? any_dtype(in) : float_dtype(in);
  const bool int8_kv = in.chance(40);
  DType kv_dtype = int8_kv ? DType::i8 : c.q_dtype;
  if (in.chance(5)) kv_dtype = any_dtype(in);

  // Layout.
  o.input_layout = in.chance(8) ? std::string(in.pick(kBadLayouts)) : std::string(in.pick(kLayouts));
  const Lay lay = in_layout(o.input_layout);
  c.token = lay == Lay::tnd || lay == Lay::ntd;

  // Heads: N, a divisor as KV_N, num_key_value_heads 0 or KV_N.
  static constexpr std::int64_t kHeads[] = {2, 4, 1, 8, 3, 6, 2, 4};
  const std::int64_t N = in.pick(kHeads);
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 1; d <= N; ++d)
    if (N % d == 0) divisors.push_back(d);
  const std::int64_t KVN = divisors[in.u8() % divisors.size()];
  o.num_heads = N;
  o.num_key_value_heads = (KVN == N && in.flag()) ? 0 : KVN;
  if (in.chance(5)) {
    static constexpr std::int64_t kBadHeads[] = {0, -1, 257, 3, 5, 128, 256};
    (in.flag() ? o.num_heads : o.num_key_value_heads) = in.pick(kBadHeads);
  }

  // Sizes. Decode (S == 1) half the time; rarely long KV, so decode splits the KV.
  const std::int64_t B = lay == Lay::nsd && !in.chance(8) ? 1 : in.range(1, 3);
  const bool decode = !c.token && in.flag();
  // KV beyond one 64-column chunk, query tiles beyond one 64-row unit, decode KV splits (> 256).
  std::int64_t Sq = decode ? 1 : in.chance(24) ? in.range(10, 70) : in.range(2, 9);
  if (in.chance(4)) Sq = 0;
  std::int64_t Skv = in.chance(16)   ? in.one_of<std::int64_t>({257, 300, 520, 640})
                     : in.chance(40) ? in.range(21, 150)
                     : in.chance(12) ? 0
                                     : in.range(1, 20);
  if (Sq > 9) Skv = std::min<std::int64_t>(Skv, 80);
  static constexpr std::int64_t kDims[] = {8, 16, 1, 2, 3, 4, 5, 7, 8, 16};
  std::int64_t D = in.pick(kDims);
  if (in.chance(6)) D = in.one_of<std::int64_t>({0, 64, 511, 512, 513});
  const std::int64_t Dv = in.chance(200) ? D : in.pick(kDims);
  if (Skv > 64) D = std::min<std::int64_t>(D, 8);

  // Token layouts: cumulative lengths decide B; T has some slack.
  std::int64_t T = Sq, Tkv = Skv;
  if (c.token) {
    T = in.chance(8) ? 0 : in.range(1, 12);
    Tkv = in.chance(8) ? 0 : in.range(1, 16);
    o.actual_seq_lengths = in.chance(8) ? lengths(in, B, T) : cumulative(in, B, T);
  }

  // Paged KV.
  const bool paged = in.chance(64);
  std::int64_t blocks = 0, block_size = 0, max_blocks = 0;
  bool paged4 = false;
  if (paged) {
    const bool small = decode || in.chance(32);
    block_size = small ? in.one_of<std::int64_t>({16, 32, 16, 64, 48, 8, 0})
                       : in.one_of<std::int64_t>({128, 128, 256, 64, 100});
    blocks = in.range(1, 4);
    max_blocks = in.range(1, 3);
    paged4 = in.flag();
    o.block_size = block_size;
    Tensor bt = exact_tensor({B, max_blocks}, DType::i32);
    auto* ids = bt.data_ptr<std::int32_t>();
    for (std::int64_t i = 0; i < B * max_blocks; ++i)
      ids[i] = in.chance(6) ? in.one_of<std::int32_t>({-1, 1 << 30, -2147483647 - 1})
                            : static_cast<std::int32_t>(in.range(0, blocks - 1 + (in.chance(6) ? 1 : 0)));
    o.block_table = in.chance(6) ? exact_tensor({B + 1, max_blocks}, in.chance(128) ? DType::i64 : DType::i32) : bt;
    o.actual_seq_lengths_kv = lengths(in, B, max_blocks * block_size);
    if (o.actual_seq_lengths_kv.empty() && !in.chance(16)) o.actual_seq_lengths_kv.push_back(in.range(0, max_blocks * block_size));
  } else if (in.chance(6)) {
    o.block_size = in.one_of<std::int64_t>({16, 128, -1});
  }

  // query, key, value.
  const Shape q_shape = c.token ? shape_in(lay, 1, N, T, D) : shape_in(lay, B, N, Sq, D);
  c.q = input_tensor(in, rng, q_shape, c.q_dtype);
  const std::int64_t kv_s = c.token ? Tkv : Skv;
  Shape k_shape, v_shape;
  if (paged) {
    k_shape = paged4 ? Shape{blocks, KVN, block_size, D} : Shape{blocks, block_size, KVN * D};
    v_shape = paged4 ? Shape{blocks, KVN, block_size, Dv} : Shape{blocks, block_size, KVN * Dv};
  } else {
    k_shape = c.token ? shape_in(lay, 1, KVN, kv_s, D) : shape_in(lay, B, KVN, kv_s, D);
    v_shape = c.token ? shape_in(lay, 1, KVN, kv_s, Dv) : shape_in(lay, B, KVN, kv_s, Dv);
  }
  if (in.chance(4)) {
    std::int64_t& dim = k_shape[in.u8() % k_shape.size()];
    dim = std::max<std::int64_t>(0, dim + (in.flag() ? 1 : -1));
  }
  c.k = input_tensor(in, rng, k_shape, kv_dtype);
  c.v = input_tensor(in, rng, v_shape, kv_dtype);
  if (in.chance(40) && c.q_dtype == DType::f32 && c.q.numel() > 0) ngfuzz::store(c.q.data(), 0, DType::f32, NAN);
  if (in.chance(20) && is_floating(kv_dtype) && c.k.numel() > 0) ngfuzz::store(c.k.data(), 0, kv_dtype, INFINITY);

  // Lengths (non-token, non-paged kv).
  if (!c.token && in.chance(160)) o.actual_seq_lengths = lengths(in, B, Sq);
  if (c.token && !paged) o.actual_seq_lengths_kv = in.chance(8) ? lengths(in, B, Tkv) : cumulative(in, B, Tkv);
  else if (!paged && in.chance(160)) o.actual_seq_lengths_kv = lengths(in, B, Skv);

  // sparse_mode, masks, band.
  o.sparse_mode = in.chance(6) ? in.one_of<std::int64_t>({5, 6, 8, -1, 1LL << 40})
                               : in.one_of<std::int64_t>({0, 0, 0, 1, 2, 3, 4});
  o.pre_tokens = band_value(in);
  o.next_tokens = band_value(in);
  std::int64_t prefix_s = 0;
  const bool prefix = in.chance(28);
  if (prefix) prefix_s = in.range(0, 4);
  const std::int64_t kv_extent = paged ? max_blocks * block_size : prefix_s + kv_s;
  const bool compressed = !decode && o.sparse_mode >= 2 && o.sparse_mode <= 4;
  const bool want_mask = compressed ? !in.chance(12) : (o.sparse_mode == 1 ? !in.chance(12) : in.flag());
  if (want_mask) {
    if (compressed && !in.chance(10)) {
      const int form = in.u8() % 3;
      const Tensor& m = compressed_mask();
      o.atten_mask = form == 0 ? m : form == 1 ? m.view({1, 2048, 2048}) : m.view({1, 1, 2048, 2048});
    } else {
      static constexpr DType kMaskTypes[] = {DType::boolean, DType::i8, DType::u8, DType::boolean};
      const DType mt = in.chance(4) ? DType::f16 : in.pick(kMaskTypes);
      const std::int64_t mb = in.flag() ? B : 1;
      const std::int64_t mq = Sq + (in.chance(64) ? in.range(1, 16) : 0);
      const std::int64_t mk = std::max<std::int64_t>(0, kv_extent + (in.chance(32) ? in.range(-1, 16) : 0));
      const int form = in.u8() % 3;
      Shape ms;
      if (decode) ms = form == 0 ? Shape{mb, mk} : form == 1 ? Shape{mb, 1, mk} : Shape{mb, 1, 1, mk};
      else ms = form == 0 ? Shape{mq, mk} : form == 1 ? Shape{mb, mq, mk} : Shape{mb, 1, mq, mk};
      Tensor m = exact_tensor(ms, mt);
      const std::uint8_t density = in.u8();
      auto* p = static_cast<std::uint8_t*>(m.data());
      const std::size_t bytes = m.nbytes();
      for (std::size_t i = 0; i < bytes; ++i)
        p[i] = mt == DType::f16 ? static_cast<std::uint8_t>(rng.next()) : (rng.next() & 0xff) < density ? 1 : 0;
      o.atten_mask = m;
    }
  }
  if (in.chance(36)) {
    const std::int64_t pb = in.flag() ? B : 1;
    const std::int64_t pq = Sq + (in.chance(32) ? 1 : 0);
    const std::int64_t pk = std::max<std::int64_t>(0, kv_extent + (in.chance(32) ? in.range(-1, 3) : 0));
    o.pse_shift = input_tensor(in, rng, {pb, in.chance(6) ? N + 1 : N, pq, pk},
                               in.chance(6) ? any_dtype(in) : c.q_dtype, 2.0);
  }

  // Left padding.
  auto pad_value = [&] {
    static constexpr std::int64_t kPads[] = {0, 1, 2, 3, -1, -5, 100, kI64Max, kI64Min};
    return in.chance(128) ? in.range(0, 4) : in.pick(kPads);
  };
  if (in.chance(24)) o.query_padding_size = in.chance(8) ? exact_tensor({2}, DType::i64) : int64_scalar(pad_value());
  if (in.chance(24)) o.kv_padding_size = in.chance(8) ? exact_tensor({1}, DType::i32) : int64_scalar(pad_value());

  // Rope (MLA).
  if (in.chance(28)) {
    const std::int64_t Dr = in.one_of<std::int64_t>({1, 2, 4, 8});
    const Shape qr = c.token ? shape_in(lay, 1, N, T, Dr) : shape_in(lay, B, N, Sq, Dr);
    Shape kr;
    if (paged) kr = paged4 ? Shape{blocks, KVN, block_size, Dr} : Shape{blocks, block_size, KVN * Dr};
    else kr = c.token ? shape_in(lay, 1, KVN, kv_s, Dr) : shape_in(lay, B, KVN, kv_s, Dr);
    if (in.chance(16)) kr[kr.size() - 1] += 1;
    o.query_rope = input_tensor(in, rng, qr, in.chance(8) ? float_dtype(in) : c.q_dtype);
    if (!in.chance(6)) o.key_rope = input_tensor(in, rng, kr, kv_dtype);
  }

  // Shared prefix.
  if (prefix) {
    const Shape kp = shape_in(lay == Lay::nsd ? Lay::nsd : lay, 1, KVN, prefix_s, D);
    const Shape vp = shape_in(lay == Lay::nsd ? Lay::nsd : lay, 1, KVN, prefix_s, Dv);
    o.key_shared_prefix = input_tensor(in, rng, kp, kv_dtype);
    if (!in.chance(6)) o.value_shared_prefix = input_tensor(in, rng, vp, kv_dtype);
    if (in.flag()) o.actual_shared_prefix_len = {in.chance(16) ? in.range(-1, prefix_s + 2) : in.range(0, prefix_s)};
    if (in.chance(6)) o.actual_shared_prefix_len.push_back(0);
  } else if (in.chance(4)) {
    o.actual_shared_prefix_len = {0};
  }

  // Antiquant.
  if (int8_kv || in.chance(6)) {
    const std::int64_t kvs = paged ? max_blocks * block_size : kv_s;
    const std::int64_t slack = in.chance(16) ? -1 : in.range(0, 1);
    auto scale_of = [&](const Shape& s, DType dt) { return input_tensor(in, rng, s, dt, 0.05, false); };
    if (in.flag()) {  // combined [2, ...]
      o.antiquant_mode = in.chance(6) ? in.one_of<std::int64_t>({2, -1}) : in.range(0, 1);
      const DType dt = in.chance(16) ? DType::f32 : c.q_dtype;
      Shape s;
      if (o.antiquant_mode == 1) {
        s = {2, B, std::max<std::int64_t>(0, kvs + slack)};
      } else {
        const int form = in.u8() % 4;
        s = form == 0 ? Shape{2} : form == 1 ? Shape{2, KVN, 1, D} : form == 2 ? Shape{2, KVN, D} : Shape{2, KVN * D};
      }
      const DType sdt = o.antiquant_mode == 1 ? (in.chance(16) ? c.q_dtype : DType::f32) : dt;
      o.antiquant_scale = scale_of(s, sdt);
      if (in.flag()) o.antiquant_offset = scale_of(in.chance(8) ? Shape{2, 1} : s, sdt);
    } else {  // separate
      const std::int64_t km = in.chance(6) ? in.one_of<std::int64_t>({6, -1}) : in.range(0, 5);
      const std::int64_t vm = km == 0 && in.chance(64) ? 1 : (in.chance(8) ? in.range(0, 5) : km);
      o.key_antiquant_mode = km;
      o.value_antiquant_mode = vm;
      auto param_shape = [&](std::int64_t mode, std::int64_t d) -> Shape {
        switch (mode) {
          case 0: {
            const int form = in.u8() % 7;
            switch (form) {
              case 0: return {1};
              case 1: return {KVN, 1, d};
              case 2: return {KVN, d};
              case 3: return {KVN * d};
              case 4: return {1, KVN, 1, d};
              case 5: return {1, KVN, d};
              default: return {1, KVN * d};
            }
          }
          case 1: return in.flag() ? Shape{B, std::max<std::int64_t>(0, kvs + slack)}
                                   : Shape{1, B, std::max<std::int64_t>(0, kvs + slack)};
          case 2: return {KVN};
          case 3: return {B, KVN, std::max<std::int64_t>(0, kvs + slack)};
          case 4: return {blocks ? blocks : 1, block_size ? block_size : 16};
          case 5: return {blocks ? blocks : 1, KVN, block_size ? block_size : 16};
          default: return {1};
        }
      };
      auto param_dtype = [&](std::int64_t mode) {
        const bool per_token = mode == 1 || mode == 3 || mode == 4 || mode == 5;
        if (in.chance(8)) return any_dtype(in);
        return per_token ? DType::f32 : (in.chance(64) ? DType::f32 : c.q_dtype);
      };
      const Shape ks = param_shape(km, D);
      const DType kdt = param_dtype(km);
      const Shape vs = km == vm && !in.chance(8) ? ks : param_shape(vm, Dv);
      const DType vdt = km == vm ? kdt : param_dtype(vm);
      if (!in.chance(6)) o.key_antiquant_scale = scale_of(ks, kdt);
      if (!in.chance(6)) o.value_antiquant_scale = scale_of(vs, vdt);
      if (in.flag()) {
        o.key_antiquant_offset = scale_of(ks, kdt);
        if (!in.chance(6)) o.value_antiquant_offset = scale_of(vs, vdt);
      }
    }
  }

  // Quantised output.
  if (in.chance(28)) {
    const std::int64_t channels = N * Dv;
    const int form = in.u8() % 4;
    const Shape s = form == 0 ? Shape{1} : form == 1 ? Shape{channels} : form == 2 ? Shape{N, Dv} : Shape{channels + 1};
    const DType dt = c.q_dtype == DType::bf16 && in.flag() ? DType::bf16 : (in.chance(8) ? DType::f16 : DType::f32);
    o.quant_scale2 = input_tensor(in, rng, s, dt, 4.0, in.chance(16));
    if (in.flag()) o.quant_offset2 = input_tensor(in, rng, s, dt, 4.0, false);
  }

  // Reserved and full-quantisation arguments (always errors on CPU).
  if (in.chance(3)) o.dequant_scale1 = exact_tensor({1}, DType::f32);
  if (in.chance(3)) o.quant_scale1 = exact_tensor({1}, DType::f32);
  if (in.chance(3)) o.dequant_scale2 = exact_tensor({1}, DType::f32);
  if (in.chance(3)) o.key_rope_antiquant_scale = exact_tensor({1}, DType::f32);

  // Flags and scalars.
  o.softmax_lse_flag = in.flag();
  o.inner_precise = in.chance(8) ? in.one_of<std::int64_t>({4, -1, 99}) : in.one_of<std::int64_t>({0, 0, 1, 2, 3});
  static constexpr double kScales[] = {1.0, 0.125, 0.08838834764831845, 0.0, -1.0, 2.0, 1e-3,
                                       NAN, INFINITY, -INFINITY, 1e40, 1e-40, 3.5e38};
  o.scale = in.pick(kScales);
  return c;
}

// The `.out` form's buffers: attention_out, softmax_lse, workspace.
struct Outs {
  Tensor out, lse, ws;
};

// Sized from the shape functions (when they accept the arguments), then perturbed by `how`.
Outs make_outs(const Case& c, const FiaOptions& o, int how, Input& in) {
  Outs r;
  Shape out_shape = c.q.shape();
  Shape lse_shape{1};
  std::int64_t ws_bytes = 4096;
  DType out_dtype = o.quant_scale2.defined() ? DType::i8 : c.q_dtype;
  ngfuzz::guarded("fia_output_shape", [&] { out_shape = ng::ops::fia_output_shape(c.q, c.k, c.v, o); });
  ngfuzz::guarded("fia_lse_shape", [&] {
    if (o.softmax_lse_flag) lse_shape = ng::ops::fia_lse_shape(c.q, c.k, c.v, o);
  });
  ngfuzz::guarded("fia_workspace_bytes", [&] { ws_bytes = ng::ops::fia_workspace_bytes(c.q, c.k, c.v, o); });
  if (ws_bytes < 0 || ws_bytes > (64 << 20)) ngfuzz::finding("fia_workspace_bytes = " + std::to_string(ws_bytes));
  DType lse_dtype = DType::f32, ws_dtype = DType::u8;
  switch (how) {
    case 1: ws_bytes = std::max<std::int64_t>(0, ws_bytes - 1); break;
    case 2: ws_bytes = 0; break;
    case 3: ws_dtype = DType::f32; break;
    case 4: out_dtype = out_dtype == DType::f32 ? DType::f16 : DType::f32; break;
    case 5: if (out_shape.size() > 0) out_shape[in.u8() % out_shape.size()] += 1; break;
    case 6: lse_shape = Shape{lse_shape.numel() + 1}; break;
    case 7: lse_dtype = DType::f16; break;
    default: break;
  }
  r.out = exact_tensor(out_shape, out_dtype);
  r.lse = how == 8 ? Tensor() : exact_tensor(lse_shape, lse_dtype);
  r.ws = how == 9 ? Tensor() : exact_tensor({std::max<std::int64_t>(ws_bytes, 0)}, ws_dtype);
  if (how == 10 && r.out.numel() > 1) {  // a non-contiguous attention_out over the same bytes
    Shape st = ng::contiguous_strides(out_shape);
    Shape sh = out_shape;
    sh[0] = std::max<std::int64_t>(1, sh[0] / 2);
    st[0] *= 2;
    r.out = ng::Tensor::from_blob(r.out.data(), sh, st, out_dtype, r.out.storage());
  }
  if (how == 11) {  // attention_out over the query's bytes (must be rejected: overlap)
    const std::size_t need = static_cast<std::size_t>(out_shape.numel()) * ng::dtype_size(out_dtype);
    if (need <= c.q.storage()->nbytes())
      r.out = ng::Tensor::from_blob(c.q.data(), out_shape, out_dtype, c.q.storage());
  }
  if (how == 12 && r.ws.defined() && r.out.nbytes() <= r.ws.nbytes() && r.out.nbytes() > 0)  // out inside the workspace
    r.out = ng::Tensor::from_blob(r.ws.data(), out_shape, out_dtype, r.ws.storage());
  if (how == 13 && r.ws.nbytes() > 5)  // a misaligned workspace / out
    r.out = ng::Tensor::from_blob(static_cast<std::uint8_t*>(r.ws.data()) + 1, {1}, DType::f32, r.ws.storage());
  return r;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::string describe(const Case& c, const FiaOptions& o) {
  std::string s = "layout " + o.input_layout + " q " + c.q.str() + " k " + c.k.str() + " v " +
                  c.v.str() + " N " + std::to_string(o.num_heads) + " KV_N " +
                  std::to_string(o.num_key_value_heads) + " sparse " + std::to_string(o.sparse_mode);
  return s;
}

// Host values an update may change (docs/fia.md, What an update may change): lengths, band, scale, prefix length.
FiaOptions other_host_values(const FiaOptions& o, Input& in) {
  FiaOptions x = o;
  auto shift = [&](std::vector<std::int64_t>& v) {
    if (v.empty()) return;
    std::int64_t lo = *std::min_element(v.begin(), v.end());
    if (lo <= 0) return;
    const std::int64_t d = in.range(0, lo);
    for (auto& e : v) e -= d;
  };
  if (in.flag()) shift(x.actual_seq_lengths);
  if (in.flag()) shift(x.actual_seq_lengths_kv);
  if (in.flag()) x.pre_tokens = band_value(in);
  if (in.flag()) x.next_tokens = band_value(in);
  if (in.flag()) x.scale = o.scale * 0.5 + 0.25;
  if (in.chance(64) && x.actual_shared_prefix_len.size() == 1 && x.actual_shared_prefix_len[0] > 0)
    x.actual_shared_prefix_len[0] -= 1;
  return x;
}

// Streams reused across inputs (each input leaves them idle and in normal mode).
struct Streams {
  ng::Stream eager = ng::Stream::create();
  ng::Stream capture = ng::Stream::create();
  ng::Stream update = ng::Stream::create();
  ng::Stream replay = ng::Stream::create();
};
Streams& streams() {
  static Streams s;
  return s;
}

void expect_idle(const ng::Stream& s, const char* what) {
  if (s.is_capturing() || s.is_updating())
    ngfuzz::finding(std::string(what) + ": " + s.str() + " was left capturing or updating");
}

// The `.out` form into fresh buffers on `stream`, synchronized. False when the library refused.
bool run_out(const Case& c, const FiaOptions& o, const Outs& outs, const ng::Stream& stream) {
  ng::StreamGuard on(stream);
  if (!ngfuzz::guarded("fused_infer_attention_score_out", [&] {
        ng::ops::fused_infer_attention_score_out(c.q, c.k, c.v, o, outs.ws, outs.out, outs.lse);
      })) {
    return false;
  }
  return ngfuzz::guarded("synchronize", [&] { stream.synchronize(); });
}

// Eager vs captured vs updated: bitwise equal (docs/semantics.md §6).
void graph_check(const Case& c, Input& in) {
  Streams& st = streams();
  const FiaOptions& target = c.opt;
  const FiaOptions captured = other_host_values(target, in);
  const ng::UpdateOrder order = in.flag() ? ng::UpdateOrder::launch : ng::UpdateOrder::stream;

  std::int64_t wa = -1, wb = -1;
  ngfuzz::guarded("fia_workspace_bytes", [&] { wa = ng::ops::fia_workspace_bytes(c.q, c.k, c.v, target); });
  ngfuzz::guarded("fia_workspace_bytes", [&] { wb = ng::ops::fia_workspace_bytes(c.q, c.k, c.v, captured); });
  if (wa >= 0 && wb >= 0 && wa != wb)
    ngfuzz::finding("fia_workspace_bytes depends on host values: " + std::to_string(wa) + " vs " +
                    std::to_string(wb) + " for " + describe(c, target));

  // Eager results for both option sets.
  // Every output starts as the same pattern (a region no kernel writes compares equal).
  const Outs eager_t = make_outs(c, target, 0, in);
  const Outs eager_c = make_outs(c, captured, 0, in);
  for (const Outs* o : {&eager_t, &eager_c}) {
    std::memset(o->out.data(), 0x5a, o->out.nbytes());
    std::memset(o->lse.data(), 0x5a, o->lse.nbytes());
  }
  const bool ok_t = run_out(c, target, eager_t, st.eager);
  const bool ok_c = run_out(c, captured, eager_c, st.eager);
  if (!ok_c) return;  // nothing valid to capture

  // Capture `captured` in a task group; its buffers start as garbage (results must not read it).
  Outs g = make_outs(c, captured, 0, in);
  std::memset(g.ws.data(), 0xab, g.ws.nbytes());
  std::memset(g.out.data(), 0x5a, g.out.nbytes());
  std::memset(g.lse.data(), 0x5a, g.lse.nbytes());
  ng::Graph graph;
  ng::TaskGroupHandle handle;
  bool captured_ok = false;
  {
    ng::StreamGuard on(st.capture);
    if (ngfuzz::guarded("capture_begin", [&] { graph.capture_begin(st.capture); })) {
      captured_ok = ngfuzz::guarded("capture", [&] {
        ng::task_group_begin(st.capture);
        ng::ops::fused_infer_attention_score_out(c.q, c.k, c.v, captured, g.ws, g.out, g.lse);
        handle = ng::task_group_end(st.capture);
      });
      if (!ngfuzz::guarded("capture_end", [&] { graph.capture_end(st.capture); })) captured_ok = false;
    }
  }
  expect_idle(st.capture, "capture");
  if (!captured_ok)
    ngfuzz::finding("capturing a call that ran eagerly failed (" + ngfuzz::last_error() + "): " +
                    describe(c, captured));
  ngfuzz::guarded("replay", [&] {
    graph.replay(st.replay);
    st.replay.synchronize();
  });
  if (!same_bytes(g.out, eager_c.out) ||
      (captured.softmax_lse_flag && !same_bytes(g.lse, eager_c.lse)))
    ngfuzz::finding("replay differs from eager: " + describe(c, captured));

  if (!ok_t) {
    // An update with arguments the op refuses must install nothing and free the handle.
    {
      ng::StreamGuard on(st.update);
      ngfuzz::guarded("task_update", [&] {
        ng::task_update_begin(st.update, handle, order);
        ng::ops::fused_infer_attention_score_out(c.q, c.k, c.v, target, g.ws, g.out, g.lse);
        ng::task_update_end(st.update);
      });
      ngfuzz::guarded("task_update_abort", [&] {
        if (st.update.is_updating()) ng::task_update_abort(st.update);
      });
    }
    expect_idle(st.update, "a refused update");
    return;
  }
  bool updated = false;
  {
    ng::StreamGuard on(st.update);
    updated = ngfuzz::guarded("task_update", [&] {
      ng::task_update_begin(st.update, handle, order);
      ng::ops::fused_infer_attention_score_out(c.q, c.k, c.v, target, g.ws, g.out, g.lse);
      ng::task_update_end(st.update);
    });
    ngfuzz::guarded("synchronize", [&] { st.update.synchronize(); });
  }
  expect_idle(st.update, "update");
  if (!updated) return;  // e.g. the batch count of TND changed: refused, which is allowed
  for (int rep = 0; rep < 2; ++rep) {
    ngfuzz::guarded("replay", [&] {
      graph.replay(st.replay);
      st.replay.synchronize();
    });
    if (!same_bytes(g.out, eager_t.out) ||
        (target.softmax_lse_flag && !same_bytes(g.lse, eager_t.lse)))
      ngfuzz::finding("replay after update differs from eager: " + describe(c, target));
  }
}

void eager_check(const Case& c) {
  Streams& st = streams();
  ng::StreamGuard on(st.eager);
  ng::ops::FiaResult r;
  if (!ngfuzz::guarded("fused_infer_attention_score", [&] {
        r = ng::ops::fused_infer_attention_score(c.q, c.k, c.v, c.opt);
      }))
    return;
  ngfuzz::guarded("synchronize", [&] { st.eager.synchronize(); });
  Shape want_out, want_lse{1};
  if (!ngfuzz::guarded("fia_output_shape", [&] {
        want_out = ng::ops::fia_output_shape(c.q, c.k, c.v, c.opt);
        if (c.opt.softmax_lse_flag) want_lse = ng::ops::fia_lse_shape(c.q, c.k, c.v, c.opt);
      }))
    ngfuzz::finding("the shape functions refuse a call the eager form ran: " + describe(c, c.opt));
  if (!(r.attention_out.shape() == want_out) || !(r.softmax_lse.shape() == want_lse))
    ngfuzz::finding("eager outputs " + r.attention_out.str() + ", " + r.softmax_lse.str() +
                    " differ from the shape functions' " + want_out.str() + ", " + want_lse.str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ng::set_diagnostic_handler([](const std::string&) {});
  compressed_mask();
  streams();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  const std::uint8_t mode = in.u8();
  const bool simple_kernel = in.chance(48);
  Rng rng{0x9e3779b97f4a7c15ull ^ in.u32()};
  npugraph::ops::attention::set_fia_kernel_mode(simple_kernel ? npugraph::ops::attention::FiaKernelMode::simple
                                                              : npugraph::ops::attention::FiaKernelMode::fast);
  const Case c = decode_case(in, rng);
  if (ngfuzz::verbose()) std::fprintf(stderr, "mode %d: %s\n", mode % 8, describe(c, c.opt).c_str());
  switch (mode % 8) {
    case 0: case 1: eager_check(c); break;
    case 2: case 3: case 4: {
      const int how = in.chance(96) ? static_cast<int>(in.range(1, 13)) : 0;
      const Outs outs = make_outs(c, c.opt, how, in);
      run_out(c, c.opt, outs, streams().eager);
      break;
    }
    case 5:
      ngfuzz::guarded("fia_max_workspace", [&] { (void)ng::ops::fia_max_workspace(c.q, c.k, c.v, c.opt); });
      ngfuzz::guarded("fia_lse_shape", [&] { (void)ng::ops::fia_lse_shape(c.q, c.k, c.v, c.opt); });
      break;
    default: graph_check(c, in); break;
  }
  Streams& st = streams();
  for (const ng::Stream* s : {&st.eager, &st.capture, &st.update, &st.replay}) {
    ngfuzz::guarded("final synchronize", [&] { s->synchronize(); });
    expect_idle(*s, "end of input");
  }
  npugraph::ops::attention::set_fia_kernel_mode(npugraph::ops::attention::FiaKernelMode::fast);
  return 0;
}
