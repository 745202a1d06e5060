// FIA CPU kernel: one query row at a time, online softmax over blocks of kKvBlock KV columns,
// float32 throughout. Reads only its parameter block (Note [FIA parameter block]) and the
// ExecContext, and writes only the outputs and its chunk's workspace scratch (Note [FIA workspace]).
//
// Determinism: each row is computed by the same sequence of float operations whatever chunk or
// thread computes it, so equal blocks give bitwise equal outputs (eager, replayed, or updated).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "npugraph/error.hpp"
#include "ops/attention/fia_params.hpp"
#include "ops/attention/softmax_state.hpp"

namespace npugraph::ops::attention {
namespace {

template <class T>
inline float to_f32(T x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return static_cast<float>(x);
}

template <class T>
inline T from_f32(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return T(x);
}

// sum_d a[d] * x[d * stride] in float32, in a fixed order: 8 interleaved partial sums, combined
// pairwise. (Fixed order keeps results bitwise reproducible; 8 lanes let the compiler vectorise.)
template <class T>
inline float dot(const float* a, const T* x, std::int64_t stride, std::int64_t n) {
  float lane[8] = {};
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int l = 0; l < 8; ++l) lane[l] += a[d + l] * to_f32(x[(d + l) * stride]);
  for (int l = 0; d < n; ++d, ++l) lane[l] += a[d] * to_f32(x[d * stride]);
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
struct Row {
  const FiaParams& p;
  const std::int64_t* actual_q;
  const std::int64_t* actual_kv;
  std::int64_t group;  // query heads per KV head

  void zero(T* out) const {
    const std::int64_t sd = p.out.stride[3];
    for (std::int64_t d = 0; d < p.head_dim; ++d) out[d * sd] = from_f32<T>(0.0f);
  }

  // Computes query row (b, n, i) with the chunk's scratch.
  void run(std::int64_t b, std::int64_t n, std::int64_t i, std::byte* scratch) const {
    const std::int64_t D = p.head_dim;
    T* out = static_cast<T*>(p.out.data) + b * p.out.stride[0] + n * p.out.stride[1] +
             i * p.out.stride[2];
    float* lse = p.lse ? p.lse + (b * p.heads + n) * p.q_seq + i : nullptr;

    const std::int64_t akv = actual_kv[b];
    // Visible columns: j - i <= next and i - j <= pre, within [0, akv).
    const std::int64_t lo = std::max<std::int64_t>(0, i - p.pre_tokens);
    const std::int64_t hi = std::min<std::int64_t>(akv, i + p.next_tokens + 1);
    if (i >= actual_q[b] || lo >= hi) {  // past the actual length, or nothing visible
      zero(out);
      if (lse) *lse = kInf;
      return;
    }

    float* qf = reinterpret_cast<float*>(scratch + p.plan.q_offset);
    float* acc = reinterpret_cast<float*>(scratch + p.plan.acc_offset);
    float* score = reinterpret_cast<float*>(scratch + p.plan.score_offset);
    const T* q = static_cast<const T*>(p.q.data) + b * p.q.stride[0] + n * p.q.stride[1] +
                 i * p.q.stride[2];
    for (std::int64_t d = 0; d < D; ++d) {
      qf[d] = to_f32(q[d * p.q.stride[3]]);
      acc[d] = 0.0f;
    }
    const std::int64_t kvh = n / group;
    const T* k = static_cast<const T*>(p.k.data) + b * p.k.stride[0] + kvh * p.k.stride[1];
    const T* v = static_cast<const T*>(p.v.data) + b * p.v.stride[0] + kvh * p.v.stride[1];
    const std::int64_t ks = p.k.stride[2], kd = p.k.stride[3];
    const std::int64_t vs = p.v.stride[2], vd = p.v.stride[3];

    SoftmaxState st;
    for (std::int64_t j0 = lo; j0 < hi; j0 += kKvBlock) {
      const std::int64_t j1 = std::min(hi, j0 + kKvBlock);
      float block_max = -kInf;
      for (std::int64_t j = j0; j < j1; ++j) {
        const float s = p.scale * dot(qf, k + j * ks, kd, D);
        score[j - j0] = s;
        if (!(s <= block_max)) block_max = s;  // NaN wins (SoftmaxState: NaN in, NaN out)
      }
      const float factor = st.raise_max(block_max);
      if (st.empty()) continue;  // every score so far is -inf: weight 0
      if (factor != 1.0f)
        for (std::int64_t d = 0; d < D; ++d) acc[d] *= factor;
      for (std::int64_t j = j0; j < j1; ++j) {
        const float w = st.add(score[j - j0]);
        const T* vj = v + j * vs;
        for (std::int64_t d = 0; d < D; ++d) acc[d] += w * to_f32(vj[d * vd]);
      }
    }
    if (st.empty()) {
      zero(out);
      if (lse) *lse = kInf;
      return;
    }
    const std::int64_t od = p.out.stride[3];
    for (std::int64_t d = 0; d < D; ++d) out[d * od] = from_f32<T>(acc[d] / st.sum);
    if (lse) *lse = st.lse();
  }
};

template <class T>
void run_kernel(const FiaParams& p, const std::int64_t* actual_q, const std::int64_t* actual_kv,
                const ExecContext& ctx) {
  const Row<T> row{p, actual_q, actual_kv, p.heads / p.kv_heads};
  const auto base_addr = reinterpret_cast<std::uintptr_t>(p.workspace);
  std::byte* base = p.workspace + ((kWorkspaceAlign - base_addr % kWorkspaceAlign) % kWorkspaceAlign);
  ctx.parallel_for(p.plan.rows, p.plan.grain, [&](std::int64_t begin, std::int64_t end) {
    std::byte* scratch = base + (begin / p.plan.grain) * p.plan.chunk_bytes;
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t i = r % p.q_seq;
      const std::int64_t bn = r / p.q_seq;
      row.run(bn / p.heads, bn % p.heads, i, scratch);
    }
  });
}

// Copies the header out of a block (the block's storage need not be aligned for FiaParams).
bool read_header(const void* params, std::size_t size, FiaParams& p) {
  if (size < sizeof(FiaParams)) return false;
  std::memcpy(&p, params, sizeof(FiaParams));
  return p.magic == kFiaMagic && p.header_bytes == sizeof(FiaParams) && p.batch >= 1 &&
         size == fia_block_bytes(p.batch);
}

// The kernel-facing shape of a tensor of the block, in its layout, for messages.
std::string shape_text(const FiaParams& p, bool query) {
  const std::int64_t n = query ? p.heads : p.kv_heads, s = query ? p.q_seq : p.kv_seq;
  switch (p.layout) {
    case FiaLayout::bsh: return detail::cat('[', p.batch, ", ", s, ", ", n * p.head_dim, ']');
    case FiaLayout::bsnd: return detail::cat('[', p.batch, ", ", s, ", ", n, ", ", p.head_dim, ']');
    case FiaLayout::bnsd: return detail::cat('[', p.batch, ", ", n, ", ", s, ", ", p.head_dim, ']');
  }
  return "?";
}

}  // namespace

void fia_cpu_kernel(const void* params, std::size_t size, const ExecContext& ctx) {
  FiaParams p;
  if (!read_header(params, size, p))
    NG_THROW(TaskError, "fused_infer_attention_score: malformed parameter block (", size,
             " bytes)");
  // The tail (2*B int64) is copied to keep its reads aligned; it is small next to the work.
  const std::byte* tail = static_cast<const std::byte*>(params) + sizeof(FiaParams);
  const auto* lengths = reinterpret_cast<const std::int64_t*>(tail);
  std::int64_t local[2 * FiaParamBuffer::kInlineBatch];
  std::vector<std::int64_t> heap;
  if (reinterpret_cast<std::uintptr_t>(tail) % alignof(std::int64_t) != 0) {
    std::int64_t* dst = local;
    if (p.batch > FiaParamBuffer::kInlineBatch) {
      heap.resize(static_cast<std::size_t>(2 * p.batch));
      dst = heap.data();
    }
    std::memcpy(dst, tail, static_cast<std::size_t>(2 * p.batch) * sizeof(std::int64_t));
    lengths = dst;
  }
  if (p.lse_zero) *p.lse_zero = 0.0f;
  switch (p.dtype) {
    case DType::f32: run_kernel<float>(p, lengths, lengths + p.batch, ctx); break;
    case DType::f16: run_kernel<half>(p, lengths, lengths + p.batch, ctx); break;
    case DType::bf16: run_kernel<bfloat16>(p, lengths, lengths + p.batch, ctx); break;
    default:
      NG_THROW(TaskError, "fused_infer_attention_score: unsupported dtype ", dtype_name(p.dtype),
               " in the parameter block");
  }
}

std::string fia_check_update(std::span<const std::byte> captured,
                             std::span<const std::byte> updated) {
  FiaParams a, b;
  if (!read_header(captured.data(), captured.size(), a))
    return "the captured parameter block is not a fused_infer_attention_score block";
  if (!read_header(updated.data(), updated.size(), b))
    return "the new parameter block is not a fused_infer_attention_score block";
  if (a.layout != b.layout)
    return detail::cat("input_layout changed from ", layout_name(a.layout), " to ",
                       layout_name(b.layout));
  if (a.dtype != b.dtype)
    return detail::cat("dtype changed from ", dtype_name(a.dtype), " to ", dtype_name(b.dtype));
  if (a.heads != b.heads)
    return detail::cat("num_heads changed from ", a.heads, " to ", b.heads);
  if (a.kv_heads != b.kv_heads)
    return detail::cat("num_key_value_heads changed from ", a.kv_heads, " to ", b.kv_heads);
  if (a.batch != b.batch || a.q_seq != b.q_seq || a.head_dim != b.head_dim)
    return detail::cat("query shape changed from ", shape_text(a, true), " to ",
                       shape_text(b, true));
  if (a.kv_seq != b.kv_seq)
    return detail::cat("key/value shape changed from ", shape_text(a, false), " to ",
                       shape_text(b, false));
  if (a.lse_flag != b.lse_flag)
    return detail::cat("softmax_lse_flag changed from ", a.lse_flag ? "true" : "false", " to ",
                       b.lse_flag ? "true" : "false");
  // Equal shapes give equal plans (plan_workspace is a pure function of them); checked anyway so
  // that a replay can never index past the captured workspace.
  if (std::memcmp(&a.plan, &b.plan, sizeof(FiaWorkspacePlan)) != 0 ||
      b.workspace_bytes < b.plan.total_bytes)
    return "the workspace plan changed (size the workspace with fia_max_workspace)";
  return {};
}

}  // namespace npugraph::ops::attention
