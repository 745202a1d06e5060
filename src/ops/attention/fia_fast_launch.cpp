// The host side of the fast FIA kernels (fia_fast_launch.hpp, Note [FIA fast kernels]).
#include "ops/attention/fia_fast_launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "npugraph/error.hpp"
#include "ops/attention/fia_kernel_util.hpp"

namespace npugraph::ops::attention::fast {
namespace {

constexpr const char* kOp = "fused_infer_attention_score: ";
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
void write_values(const Launch& l, std::int64_t base, const float* acc, float sum) {
  const FiaView& o = l.p.out;
  for (std::int64_t d = 0; d < l.key.dv; ++d) {
    const float x = acc ? acc[d] / sum : 0.0f;
    if constexpr (std::is_same_v<T, float>) static_cast<float*>(o.data)[base + d * o.stride[3]] = x;
    else static_cast<T*>(o.data)[base + d * o.stride[3]] = T(x);
  }
}

}  // namespace

Launch::Launch(const FiaParams& params, const std::int64_t* tail)
    : p(params), key(params.key), aq(tail), akv(tail + params.key.batch),
      q_start(tail + 2 * params.key.batch), kv_start(tail + 3 * params.key.batch) {
  group = key.heads / key.kv_heads;
  token = key.layout_in == static_cast<std::int64_t>(FiaLayout::tnd) ||
          key.layout_in == static_cast<std::int64_t>(FiaLayout::ntd);
  q_pad = read_padding(p.q_padding, "query_padding_size", key.q_seq, aq, key.batch);
  kv_pad = read_padding(p.kv_padding, "kv_padding_size", key.kv_seq, akv, key.batch);
  q_t = key.sig[static_cast<int>(FiaArg::query)].dtype;
  kv_t = key.sig[static_cast<int>(FiaArg::key)].dtype;
  pse_t = key.sig[static_cast<int>(FiaArg::pse_shift)].dtype;
  out_scale_t = key.sig[static_cast<int>(FiaArg::quant_scale2)].dtype;
  if (kv_t == DType::i8) {
    // The simple kernel's choice of parameters (fia_kernel.cpp, run_kernel).
    const bool separate = key.sig[static_cast<int>(FiaArg::key_antiquant_scale)].rank >= 0;
    auto t = [&](FiaArg a) { return key.sig[static_cast<int>(a)].dtype; };
    kdq = {p.k_scale, p.k_offset,
           t(separate ? FiaArg::key_antiquant_scale : FiaArg::antiquant_scale),
           t(separate ? FiaArg::key_antiquant_offset : FiaArg::antiquant_offset)};
    vdq = {p.v_scale, p.v_offset,
           t(separate ? FiaArg::value_antiquant_scale : FiaArg::antiquant_scale),
           t(separate ? FiaArg::value_antiquant_offset : FiaArg::antiquant_offset)};
    dq_paged = key.key_antiquant_mode >= 4;
  }
  const auto addr = reinterpret_cast<std::uintptr_t>(p.workspace);
  base = p.workspace + ((kWorkspaceAlign - addr % kWorkspaceAlign) % kWorkspaceAlign);
}

Row Launch::row(std::int64_t b, std::int64_t n, std::int64_t s) const {
  Row r;
  r.b = b;
  r.n = n;
  r.s = s;
  const std::int64_t i = token ? s - q_start[b] : s - q_first(b);
  r.i = i;
  if (i < 0 || i >= aq[b]) return r;  // lo = hi = 0: inactive
  const std::int64_t l = lkv(b);
  const std::int64_t shift = key.anchor ? l - aq[b] : 0;
  r.lo = std::max<std::int64_t>(0, i + shift - p.pre_tokens);
  r.hi = std::min<std::int64_t>(l, i + shift + p.next_tokens + 1);
  if (r.lo >= r.hi) r.lo = r.hi = 0;
  return r;
}

std::int64_t Launch::block_id(std::int64_t b, std::int64_t index) const {
  const auto* table = static_cast<const std::int32_t*>(p.block_table.data);
  const std::int64_t id = table[b * p.block_table.stride[0] + index * p.block_table.stride[2]];
  if (id < 0 || id >= key.num_blocks) [[unlikely]]
    NG_THROW(TaskError, kOp, "block_table[", b, "][", index, "] = ", id,
             " is outside the key cache's ", key.num_blocks, " blocks when the kernel ran");
  return id;
}

KvRun Launch::run_at(std::int64_t b, std::int64_t h, std::int64_t j, std::int64_t max_len) const {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(kv_t));
  auto at = [&](const FiaView& v, std::int64_t outer, std::int64_t row) {
    return static_cast<const std::byte*>(v.data) +
           (outer * v.stride[0] + h * v.stride[1] + row * v.stride[2]) * es;
  };
  KvRun r;
  std::int64_t outer, row;
  const FiaView *kv, *vv, *krv = &p.k_rope;
  if (j < p.prefix_len) {
    outer = 0;
    row = j;
    kv = &p.k_prefix;
    vv = &p.v_prefix;
    r.len = std::min(max_len, p.prefix_len - j);
  } else {
    const std::int64_t t = j - p.prefix_len;
    if (key.kv_store != static_cast<std::int64_t>(FiaKvStore::contiguous)) {
      outer = block_id(b, t / key.block_size);
      row = t % key.block_size;
      r.len = std::min(max_len, key.block_size - row);
    } else {
      outer = b;
      row = (token ? kv_start[b] : (kv_pad >= 0 ? key.kv_seq - kv_pad - akv[b] : 0)) + t;
      r.len = max_len;
    }
    kv = &p.k;
    vv = &p.v;
  }
  r.len = std::min(r.len, lkv(b) - j);
  if (kv_t == DType::i8) {
    // fia_kernel.cpp's load_row: (block, row) in the paged modes, else (batch, token position),
    // where the position is the tensor row for a contiguous cache and the logical token (0 for
    // the prefix) for a paged one.
    const bool paged_store = key.kv_store != static_cast<std::int64_t>(FiaKvStore::contiguous);
    const bool prefix = j < p.prefix_len;
    r.dq_o = dq_paged ? outer : b;
    if (dq_paged || !paged_store) {
      r.dq_s = row;
      r.dq_step = 1;
    } else {
      r.dq_s = prefix ? 0 : j - p.prefix_len;
      r.dq_step = prefix ? 0 : 1;
    }
  }
  r.k = at(*kv, outer, row);
  r.v = at(*vv, outer, row);
  r.k_stride = kv->stride[2];
  r.v_stride = vv->stride[2];
  if (key.dr) {
    r.kr = at(*krv, outer, row);
    r.kr_stride = krv->stride[2];
  }
  return r;
}

void Launch::load_q(const Row& r, float* dst, std::int64_t padded) const {
  auto one = [&](const FiaView& v, std::int64_t D, float* out) {
    const std::int64_t base0 = r.b * v.stride[0] + r.n * v.stride[1] + r.s * v.stride[2];
    for (std::int64_t d = 0; d < D; ++d) out[d] = load_f32(v.data, q_t, base0 + d * v.stride[3]);
  };
  one(p.q, key.dk, dst);
  if (key.dr) one(p.q_rope, key.dr, dst + key.dk);
  std::fill(dst + key.dk + key.dr, dst + padded, 0.0f);
}

void Launch::bias(const Row& r, std::int64_t j0, std::int64_t n, float* score) const {
  if (key.mask_kind == static_cast<std::int64_t>(FiaMaskKind::full)) {
    const auto* mask = static_cast<const std::uint8_t*>(p.mask.data) + r.b * p.mask.stride[0] +
                       r.i * p.mask.stride[2];
    const std::int64_t ms = p.mask.stride[3];
    for (std::int64_t j = 0; j < n; ++j)
      if (mask[(j0 + j) * ms] != 0) score[j] = -kInf;
  }
  if (p.pse.data) {
    const std::int64_t row0 = r.b * p.pse.stride[0] + r.n * p.pse.stride[1] + r.i * p.pse.stride[2];
    const std::int64_t ps = p.pse.stride[3];
    for (std::int64_t j = 0; j < n; ++j)
      if (score[j] != -kInf) score[j] += load_f32(p.pse.data, pse_t, row0 + (j0 + j) * ps);
  }
}

void Launch::dequant(const Dequant& q, const KvRun& r, std::int64_t h, std::int64_t cols,
                     std::int64_t D, DqRun& out) const {
  auto first = [&](const FiaView& v) {
    return r.dq_o * v.stride[0] + h * v.stride[1] + r.dq_s * v.stride[2];
  };
  const std::int64_t sb = first(q.scale), ob = first(q.offset);
  if (q.per_channel()) {
    // Constant along the tokens: read once per (batch/block, head) while the runs share it.
    const std::byte* at = static_cast<const std::byte*>(q.scale.data) +
                          sb * static_cast<std::int64_t>(dtype_size(q.scale_t));
    if (out.loaded == at) return;
    out.loaded = at;
    for (std::int64_t d = 0; d < D; ++d) {
      out.scale[d] = load_f32(q.scale.data, q.scale_t, sb + d * q.scale.stride[3]);
      out.offset[d] =
          q.offset.data ? load_f32(q.offset.data, q.offset_t, ob + d * q.offset.stride[3]) : 0.0f;
    }
    std::fill(out.scale + D, out.scale + D + kFastPad, 0.0f);
    std::fill(out.offset + D, out.offset + D + kFastPad, 0.0f);
    return;
  }
  out.loaded = nullptr;
  for (std::int64_t c = 0; c < cols; ++c) {
    const std::int64_t s = c * r.dq_step;
    out.scale[c] = load_f32(q.scale.data, q.scale_t, sb + s * q.scale.stride[2]);
    out.offset[c] =
        q.offset.data ? load_f32(q.offset.data, q.offset_t, ob + s * q.offset.stride[2]) : 0.0f;
  }
}

void Launch::finish(const Row& r, const float* acc, float max, float sum) const {
  const bool empty = max == -kInf;
  if (empty) acc = nullptr;
  const FiaView& o = p.out;
  const std::int64_t base0 = r.b * o.stride[0] + r.n * o.stride[1] + r.s * o.stride[2];
  if (key.out_int8) {
    auto* out = static_cast<std::int8_t*>(o.data);
    for (std::int64_t d = 0; d < key.dv; ++d) {
      if (!acc) {
        out[base0 + d * o.stride[3]] = 0;
        continue;
      }
      const float x = acc[d] / sum;
      const std::int64_t c = r.n * p.out_scale.stride[1] + d * p.out_scale.stride[3];
      float y = x * load_f32(p.out_scale.data, out_scale_t, c);
      if (p.out_offset.data) y += load_f32(p.out_offset.data, out_scale_t, c);
      out[base0 + d * o.stride[3]] = quantize_i8(y);
    }
  } else {
    switch (q_t) {
      case DType::f16: write_values<half>(*this, base0, acc, sum); break;
      case DType::bf16: write_values<bfloat16>(*this, base0, acc, sum); break;
      default: write_values<float>(*this, base0, acc, sum); break;
    }
  }
  if (p.lse) {
    float* lse = p.lse + r.b * p.lse_stride[0] + r.n * p.lse_stride[1] + r.s * p.lse_stride[2];
    *lse = empty ? kInf : max + std::log(sum);
  }
}

bool fia_fast_covers(const FiaParams& p) {
  if (p.key.sig[static_cast<int>(FiaArg::key)].dtype == DType::i8) {
    if (p.key.dr) return false;
    // Each parameter pair constant along the tokens or along D (Dequant::per_channel).
    for (const auto& [s, o] :
         {std::pair{&p.k_scale, &p.k_offset}, std::pair{&p.v_scale, &p.v_offset}}) {
      const bool channel = s->stride[3] != 0 || (o->data && o->stride[3] != 0);
      const bool token = s->stride[2] != 0 || (o->data && o->stride[2] != 0);
      if (channel && token) return false;
    }
  }
  for (const FiaView* v : {&p.k, &p.v, &p.k_rope, &p.k_prefix, &p.v_prefix})
    if (v->data && v->stride[3] != 1) return false;
  return true;
}

bool fia_fast_kernel(const FiaParams& p, const std::int64_t* tail, const ExecContext& ctx) {
  if (!fia_fast_covers(p)) return false;
  const Launch l(p, tail);
  if (p.plan.fast_splits > 0) run_fast_decode(l, ctx);
  else run_fast_prefill(l, ctx);
  return true;
}

}  // namespace npugraph::ops::attention::fast
