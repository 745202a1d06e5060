// The host side of the fast FIA kernels (fia_fast.hpp, Note [FIA fast kernels]): the query and bias
// as float32, the antiquant parameters of a run, and the coverage (runs as addresses, run_at, are
// with the launch view in fia_launch.cpp).
#include "ops/attention/fia_fast.hpp"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <utility>

#include "ops/attention/fia_kernel_util.hpp"
#include "ops/convert/float_rows.hpp"

namespace npugraph::ops::attention::fast {

void load_q(const FiaLaunch& l, const Row& r, float* dst, std::int64_t padded) {
  auto one = [&](const FiaView& v, std::int64_t D, float* out) {
    const std::int64_t base0 = r.b * v.stride[0] + r.n * v.stride[1] + r.s * v.stride[2];
    if (v.stride[3] == 1 && is_floating(l.q_t))  // Note [Exact float rows]: the same bits
      return load_row_f32(static_cast<const std::byte*>(v.data) +
                              base0 * static_cast<std::int64_t>(dtype_size(l.q_t)),
                          l.q_t, D, out);
    for (std::int64_t d = 0; d < D; ++d) out[d] = load_f32(v.data, l.q_t, base0 + d * v.stride[3]);
  };
  one(l.p.q, l.key.dk, dst);
  if (l.key.dr) one(l.p.q_rope, l.key.dr, dst + l.key.dk);
  std::fill(dst + l.key.dk + l.key.dr, dst + padded, 0.0f);
}

void bias(const FiaLaunch& l, const Row& r, std::int64_t j0, std::int64_t n, float* score) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const FiaParams& p = l.p;
  if (l.key.mask_kind == static_cast<std::int64_t>(FiaMaskKind::full)) {
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
      if (score[j] != -kInf) score[j] += load_f32(p.pse.data, l.pse_t, row0 + (j0 + j) * ps);
  }
}

void dequant(const Dequant& q, const KvRun& r, std::int64_t h, std::int64_t cols, std::int64_t D,
             DqRun& out) {
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
    out.scale[c] = load_f32(q.scale.data, q.scale_t, sb + c * q.scale.stride[2]);
    out.offset[c] =
        q.offset.data ? load_f32(q.offset.data, q.offset_t, ob + c * q.offset.stride[2]) : 0.0f;
  }
}

bool fia_fast_covers(const FiaParams& p) {
  if (p.key.of(FiaArg::key).dtype == DType::i8) {
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

}  // namespace npugraph::ops::attention::fast
