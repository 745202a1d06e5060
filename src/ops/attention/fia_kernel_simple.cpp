// FIA's simple CPU kernel (FiaKernelMode::simple, and the launches the fast kernels do not cover):
// one query row at a time, online softmax over blocks of kKvBlock KV columns, float32 throughout,
// written to be obviously right rather than fast. It reads the launch through FiaLaunch only
// (Note [FIA launch view]) and writes only the outputs and its chunk's workspace scratch (Note
// [FIA workspace]).
//
// Determinism: each row is computed by the same sequence of float operations whatever chunk or
// thread computes it, so equal blocks give bitwise equal outputs (eager, replayed, or updated).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/attention/fia_fast.hpp"
#include "ops/attention/fia_kernel_util.hpp"
#include "ops/attention/softmax_state.hpp"

namespace npugraph::ops::attention {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
inline float to_f32(T x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return static_cast<float>(x);
}

// sum_d a[d] * b[d] in float32, in a fixed order: 8 interleaved partial sums, combined pairwise.
// (Fixed order keeps results bitwise reproducible; 8 lanes let the compiler vectorise.)
inline float dot(const float* a, const float* b, std::int64_t n) {
  float lane[8] = {};
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int l = 0; l < 8; ++l) lane[l] += a[d + l] * b[d + l];
  for (int l = 0; d < n; ++d, ++l) lane[l] += a[d] * b[d];
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

template <class QT, class KT>
struct Kernel {
  const FiaLaunch& l;

  // Loads the row of KV column `pos` of a key/value/rope tensor (head kvh, D elements) into dst
  // as float32, dequantised (x + offset) * scale when the KV is int8.
  template <class T>
  void load_row(float* dst, const FiaView& view, const FiaView& prefix, const KvPos& pos,
                std::int64_t kvh, std::int64_t D, const Dequant& dq) const {
    const FiaView& src = pos.prefix ? prefix : view;
    const T* row = static_cast<const T*>(src.data) + pos.outer * src.stride[0] +
                   kvh * src.stride[1] + pos.row * src.stride[2];
    const std::int64_t sd = src.stride[3];
    if constexpr (std::is_same_v<T, std::int8_t>) {
      const std::int64_t sbase = pos.dq_o * dq.scale.stride[0] + kvh * dq.scale.stride[1] +
                                 pos.dq_s * dq.scale.stride[2];
      const std::int64_t obase = pos.dq_o * dq.offset.stride[0] + kvh * dq.offset.stride[1] +
                                 pos.dq_s * dq.offset.stride[2];
      for (std::int64_t d = 0; d < D; ++d) {
        const float sc = load_f32(dq.scale.data, dq.scale_t, sbase + d * dq.scale.stride[3]);
        const float off = dq.offset.data
                              ? load_f32(dq.offset.data, dq.offset_t, obase + d * dq.offset.stride[3])
                              : 0.0f;
        dst[d] = (static_cast<float>(row[d * sd]) + off) * sc;
      }
    } else {
      for (std::int64_t d = 0; d < D; ++d) dst[d] = to_f32(row[d * sd]);
    }
  }

  // Query row r (Note [FIA workspace] for the row order).
  Row row_of(std::int64_t r) const {
    const FiaShapeKey& k = l.key;
    if (l.token) {
      const std::int64_t s = r / k.heads;  // the token
      const std::int64_t b = (std::upper_bound(l.q_start, l.q_start + k.batch, s) - l.q_start) - 1;
      return l.row(b, r % k.heads, s);
    }
    const std::int64_t bn = r / k.q_seq;
    return l.row(bn / k.heads, bn % k.heads, r % k.q_seq);
  }

  // Computes query row r with the chunk's scratch.
  void run(std::int64_t r, std::byte* scratch) const {
    const FiaParams& p = l.p;
    const FiaShapeKey& k = l.key;
    const Row row = row_of(r);
    if (!row.active()) return l.finish(row, nullptr, -kInf, 0.0f);
    const std::int64_t b = row.b, n = row.n, s = row.s, i = row.i;

    const FiaWorkspacePlan& plan = p.plan;
    float* qf = reinterpret_cast<float*>(scratch + plan.q_offset);
    float* qr = reinterpret_cast<float*>(scratch + plan.q_rope_offset);
    float* kf = reinterpret_cast<float*>(scratch + plan.k_offset);
    float* kr = reinterpret_cast<float*>(scratch + plan.k_rope_offset);
    float* vf = reinterpret_cast<float*>(scratch + plan.v_offset);
    float* acc = reinterpret_cast<float*>(scratch + plan.acc_offset);
    float* score = reinterpret_cast<float*>(scratch + plan.score_offset);
    const QT* q = static_cast<const QT*>(p.q.data) + b * p.q.stride[0] + n * p.q.stride[1] +
                  s * p.q.stride[2];
    for (std::int64_t d = 0; d < k.dk; ++d) qf[d] = to_f32(q[d * p.q.stride[3]]);
    if (k.dr) {
      const QT* q2 = static_cast<const QT*>(p.q_rope.data) + b * p.q_rope.stride[0] +
                     n * p.q_rope.stride[1] + s * p.q_rope.stride[2];
      for (std::int64_t d = 0; d < k.dr; ++d) qr[d] = to_f32(q2[d * p.q_rope.stride[3]]);
    }
    std::fill(acc, acc + k.dv, 0.0f);

    const std::int64_t kvh = n / l.group;
    const bool full_mask = k.mask_kind == static_cast<std::int64_t>(FiaMaskKind::full);
    const auto* mask = full_mask ? static_cast<const std::uint8_t*>(p.mask.data) +
                                       b * p.mask.stride[0] + i * p.mask.stride[2]
                                 : nullptr;
    const std::int64_t pse_row = b * p.pse.stride[0] + n * p.pse.stride[1] + i * p.pse.stride[2];

    SoftmaxState st;
    for (std::int64_t j0 = row.lo; j0 < row.hi; j0 += kKvBlock) {
      const std::int64_t j1 = std::min(row.hi, j0 + kKvBlock);
      float block_max = -kInf;
      for (std::int64_t j = j0; j < j1; ++j) {
        if (full_mask && mask[j * p.mask.stride[3]] != 0) {
          score[j - j0] = -kInf;
          continue;
        }
        const KvPos pos = l.kv_at(b, j, 1);
        load_row<KT>(kf, p.k, p.k_prefix, pos, kvh, k.dk, l.kdq);
        float qk = dot(qf, kf, k.dk);
        if (k.dr) {
          load_row<KT>(kr, p.k_rope, p.k_rope, pos, kvh, k.dr, l.kdq);
          qk += dot(qr, kr, k.dr);
        }
        float sc = p.scale * qk;
        if (p.pse.data) sc += load_f32(p.pse.data, l.pse_t, pse_row + j * p.pse.stride[3]);
        score[j - j0] = sc;
        if (!(sc <= block_max)) block_max = sc;  // NaN wins (SoftmaxState: NaN in, NaN out)
      }
      const float factor = st.raise_max(block_max);
      if (st.empty()) continue;  // every score so far is -inf: weight 0
      if (factor != 1.0f)
        for (std::int64_t d = 0; d < k.dv; ++d) acc[d] *= factor;
      for (std::int64_t j = j0; j < j1; ++j) {
        if (score[j - j0] == -kInf) continue;  // masked (or exp(-inf) = 0)
        const float w = st.add(score[j - j0]);
        load_row<KT>(vf, p.v, p.v_prefix, l.kv_at(b, j, 1), kvh, k.dv, l.vdq);
        for (std::int64_t d = 0; d < k.dv; ++d) acc[d] += w * vf[d];
      }
    }
    l.finish(row, acc, st.max, st.sum);  // an empty state writes the empty row
  }
};

template <class QT, class KT>
void run_rows(const FiaLaunch& l, const ExecContext& ctx) {
  const Kernel<QT, KT> kern{l};
  const FiaWorkspacePlan& plan = l.p.plan;
  ctx.parallel_for(plan.rows, plan.grain, [&](std::int64_t begin, std::int64_t end) {
    std::byte* scratch = l.base + (begin / plan.grain) * plan.chunk_bytes;
    for (std::int64_t r = begin; r < end; ++r) kern.run(r, scratch);
  });
}

template <class QT>
void dispatch_kv(const FiaLaunch& l, const ExecContext& ctx) {
  if (l.kv_t == DType::i8) run_rows<QT, std::int8_t>(l, ctx);
  else if constexpr (std::is_same_v<QT, float>) {  // a float32 query over a float16 / bfloat16 cache
    if (l.kv_t == DType::f16) run_rows<float, half>(l, ctx);
    else if (l.kv_t == DType::bf16) run_rows<float, bfloat16>(l, ctx);
    else run_rows<float, float>(l, ctx);
  } else {
    run_rows<QT, QT>(l, ctx);
  }
}

}  // namespace

void run_simple_kernel(const FiaLaunch& l, const ExecContext& ctx) {
  switch (l.q_t) {
    case DType::f32: return dispatch_kv<float>(l, ctx);
    case DType::f16: return dispatch_kv<half>(l, ctx);
    case DType::bf16: return dispatch_kv<bfloat16>(l, ctx);
    default:
      NG_THROW(TaskError, kOp, "unsupported query dtype ", dtype_name(l.q_t),
               " in the parameter block");
  }
}

}  // namespace npugraph::ops::attention
