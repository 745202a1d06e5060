// FIA CPU kernel entry (fia_cpu_kernel) and the simple kernel: the entry runs the fast kernels
// (fia_fast_launch.hpp) in FiaKernelMode::fast and this file's simple kernel otherwise.
//
// The simple kernel: one query row at a time, online softmax over blocks of kKvBlock KV columns,
// float32 throughout. Reads only its parameter block (Note [FIA parameter block]), the tensors it
// points at and the ExecContext, and writes only the outputs and its chunk's workspace scratch
// (Note [FIA workspace]).
//
// Determinism: each row is computed by the same sequence of float operations whatever chunk or
// thread computes it, so equal blocks give bitwise equal outputs (eager, replayed, or updated).
//
// Safety: the tensors the block points at are read when the task runs, so the kernel re-checks
// what their contents decide: every block id it reads from block_table and the left-padding
// starts. A violation is a TaskError, never an out-of-bounds read.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "npugraph/error.hpp"
#include "ops/attention/fia_kernel_util.hpp"
#include "ops/attention/fia_fast_launch.hpp"
#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/attention/fia_params.hpp"
#include "ops/attention/softmax_state.hpp"

namespace npugraph::ops::attention {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr const char* kOp = "fused_infer_attention_score: ";

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

// An antiquant parameter pair (scale, optional offset) of key or value.
struct Dequant {
  FiaView scale, offset;
  DType scale_t = DType::f32, offset_t = DType::f32;
  bool paged = false;  // modes 4/5: indexed by (block, row) instead of (batch, token)
};

// Where logical KV column j of a batch lives.
struct Pos {
  bool prefix;
  std::int64_t outer;  // batch (contiguous KV) or block id (paged)
  std::int64_t row;    // the S index in the prefix / key tensor, or the row in the block
  std::int64_t t;      // the key token's logical position (after the prefix)
};

template <class QT, class KT>
struct Kernel {
  const FiaParams& p;
  const FiaShapeKey& k;
  const std::int64_t* aq;
  const std::int64_t* akv;
  const std::int64_t* q_start;
  const std::int64_t* kv_start;
  std::int64_t group;   // query heads per KV head
  std::int64_t q_pad;   // effective left padding (>= 0), or -1
  std::int64_t kv_pad;
  Dequant kdq, vdq;
  DType out_scale_t = DType::f32;

  // The block id of batch b's block `index`, checked against the cache.
  std::int64_t block_id(std::int64_t b, std::int64_t index) const {
    const auto* table = static_cast<const std::int32_t*>(p.block_table.data);
    const std::int64_t id = table[b * p.block_table.stride[0] + index * p.block_table.stride[2]];
    if (id < 0 || id >= k.num_blocks) [[unlikely]]
      NG_THROW(TaskError, kOp, "block_table[", b, "][", index, "] = ", id,
               " is outside the key cache's ", k.num_blocks, " blocks when the kernel ran");
    return id;
  }

  Pos locate(std::int64_t b, std::int64_t j, std::int64_t kv_begin) const {
    if (j < p.prefix_len) return {true, 0, j, 0};
    const std::int64_t t = j - p.prefix_len;
    if (k.kv_store != static_cast<std::int64_t>(FiaKvStore::contiguous))
      return {false, block_id(b, t / k.block_size), t % k.block_size, t};
    return {false, b, kv_begin + t, t};
  }

  // Loads row `pos` of a key/value/rope tensor (head kvh, D elements) into dst as float32,
  // dequantised (x + offset) * scale when the KV is int8.
  template <class T>
  void load_row(float* dst, const FiaView& view, const FiaView& prefix, const Pos& pos,
                std::int64_t b, std::int64_t kvh, std::int64_t D, const Dequant* dq) const {
    const FiaView& src = pos.prefix ? prefix : view;
    const T* row = static_cast<const T*>(src.data) + pos.outer * src.stride[0] +
                   kvh * src.stride[1] + pos.row * src.stride[2];
    const std::int64_t sd = src.stride[3];
    if constexpr (std::is_same_v<T, std::int8_t>) {
      // Parameter coordinates: (block, row) for the paged modes, else (batch, token position).
      const std::int64_t o = dq->paged ? pos.outer : b;
      const std::int64_t s = dq->paged ? pos.row
                             : k.kv_store != static_cast<std::int64_t>(FiaKvStore::contiguous) ? pos.t
                                                                                                : pos.row;
      const std::int64_t sbase = o * dq->scale.stride[0] + kvh * dq->scale.stride[1] + s * dq->scale.stride[2];
      const std::int64_t obase = o * dq->offset.stride[0] + kvh * dq->offset.stride[1] + s * dq->offset.stride[2];
      for (std::int64_t d = 0; d < D; ++d) {
        const float sc = load_f32(dq->scale.data, dq->scale_t, sbase + d * dq->scale.stride[3]);
        const float off = dq->offset.data
                              ? load_f32(dq->offset.data, dq->offset_t, obase + d * dq->offset.stride[3])
                              : 0.0f;
        dst[d] = (static_cast<float>(row[d * sd]) + off) * sc;
      }
    } else {
      for (std::int64_t d = 0; d < D; ++d) dst[d] = to_f32(row[d * sd]);
    }
  }

  void write_empty(std::int64_t b, std::int64_t n, std::int64_t s, float* lse) const {
    const std::int64_t base = b * p.out.stride[0] + n * p.out.stride[1] + s * p.out.stride[2];
    for (std::int64_t d = 0; d < k.dv; ++d) {
      if (k.out_int8) static_cast<std::int8_t*>(p.out.data)[base + d * p.out.stride[3]] = 0;
      else static_cast<QT*>(p.out.data)[base + d * p.out.stride[3]] = from_f32<QT>(0.0f);
    }
    if (lse) *lse = kInf;
  }

  void write_row(std::int64_t b, std::int64_t n, std::int64_t s, const float* acc,
                 float sum) const {
    const std::int64_t base = b * p.out.stride[0] + n * p.out.stride[1] + s * p.out.stride[2];
    for (std::int64_t d = 0; d < k.dv; ++d) {
      const float x = acc[d] / sum;
      if (k.out_int8) {
        const std::int64_t c = n * p.out_scale.stride[1] + d * p.out_scale.stride[3];
        float y = x * load_f32(p.out_scale.data, out_scale_t, c);
        if (p.out_offset.data) y += load_f32(p.out_offset.data, out_scale_t, c);
        static_cast<std::int8_t*>(p.out.data)[base + d * p.out.stride[3]] = quantize_i8(y);
      } else {
        static_cast<QT*>(p.out.data)[base + d * p.out.stride[3]] = from_f32<QT>(x);
      }
    }
  }

  // Computes query row r (Note [FIA workspace] for the row order) with the chunk's scratch.
  void run(std::int64_t r, std::byte* scratch) const {
    std::int64_t b = 0, n, s, i;
    bool valid;
    if (k.layout_in == static_cast<std::int64_t>(FiaLayout::tnd) ||
        k.layout_in == static_cast<std::int64_t>(FiaLayout::ntd)) {
      s = r / k.heads;  // the token
      n = r % k.heads;
      b = (std::upper_bound(q_start, q_start + k.batch, s) - q_start) - 1;
      i = s - q_start[b];
      valid = i < aq[b];
    } else {
      s = r % k.q_seq;
      const std::int64_t bn = r / k.q_seq;
      b = bn / k.heads;
      n = bn % k.heads;
      i = s - (q_pad >= 0 ? k.q_seq - q_pad - aq[b] : 0);
      valid = i >= 0 && i < aq[b];
    }
    float* lse = p.lse ? p.lse + b * p.lse_stride[0] + n * p.lse_stride[1] + s * p.lse_stride[2]
                       : nullptr;
    const std::int64_t lq = aq[b], lkv = p.prefix_len + akv[b];
    const std::int64_t shift = k.anchor ? lkv - lq : 0;
    const std::int64_t lo = std::max<std::int64_t>(0, i + shift - p.pre_tokens);
    const std::int64_t hi = std::min<std::int64_t>(lkv, i + shift + p.next_tokens + 1);
    if (!valid || lo >= hi) return write_empty(b, n, s, lse);

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

    const std::int64_t kvh = n / group;
    const bool token = k.layout_in == static_cast<std::int64_t>(FiaLayout::tnd) ||
                       k.layout_in == static_cast<std::int64_t>(FiaLayout::ntd);
    const std::int64_t kv_begin =
        token ? kv_start[b] : (kv_pad >= 0 ? k.kv_seq - kv_pad - akv[b] : 0);
    const bool full_mask = k.mask_kind == static_cast<std::int64_t>(FiaMaskKind::full);
    const auto* mask = full_mask ? static_cast<const std::uint8_t*>(p.mask.data) +
                                       b * p.mask.stride[0] + i * p.mask.stride[2]
                                 : nullptr;
    const DType pse_t = k.sig[static_cast<int>(FiaArg::pse_shift)].dtype;
    const std::int64_t pse_row = b * p.pse.stride[0] + n * p.pse.stride[1] + i * p.pse.stride[2];

    SoftmaxState st;
    for (std::int64_t j0 = lo; j0 < hi; j0 += kKvBlock) {
      const std::int64_t j1 = std::min(hi, j0 + kKvBlock);
      float block_max = -kInf;
      for (std::int64_t j = j0; j < j1; ++j) {
        if (full_mask && mask[j * p.mask.stride[3]] != 0) {
          score[j - j0] = -kInf;
          continue;
        }
        const Pos pos = locate(b, j, kv_begin);
        load_row<KT>(kf, p.k, p.k_prefix, pos, b, kvh, k.dk, &kdq);
        float qk = dot(qf, kf, k.dk);
        if (k.dr) {
          load_row<KT>(kr, p.k_rope, p.k_rope, pos, b, kvh, k.dr, &kdq);
          qk += dot(qr, kr, k.dr);
        }
        float sc = p.scale * qk;
        if (p.pse.data) sc += load_f32(p.pse.data, pse_t, pse_row + j * p.pse.stride[3]);
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
        load_row<KT>(vf, p.v, p.v_prefix, locate(b, j, kv_begin), b, kvh, k.dv, &vdq);
        for (std::int64_t d = 0; d < k.dv; ++d) acc[d] += w * vf[d];
      }
    }
    if (st.empty()) return write_empty(b, n, s, lse);
    write_row(b, n, s, acc, st.sum);
    if (lse) *lse = st.lse();
  }
};

template <class QT, class KT>
void run_kernel(const FiaParams& p, const std::int64_t* tail, const ExecContext& ctx) {
  const FiaShapeKey& key = p.key;
  const std::int64_t B = key.batch;
  Kernel<QT, KT> kern{p, key, tail, tail + B, tail + 2 * B, tail + 3 * B,
                      key.heads / key.kv_heads, -1, -1, {}, {}};
  kern.q_pad = read_padding(p.q_padding, "query_padding_size", key.q_seq, kern.aq, B);
  kern.kv_pad = read_padding(p.kv_padding, "kv_padding_size", key.kv_seq, kern.akv, B);
  const bool separate = key.sig[static_cast<int>(FiaArg::key_antiquant_scale)].rank >= 0;
  const FiaArg ks = separate ? FiaArg::key_antiquant_scale : FiaArg::antiquant_scale;
  const FiaArg ko = separate ? FiaArg::key_antiquant_offset : FiaArg::antiquant_offset;
  const FiaArg vs = separate ? FiaArg::value_antiquant_scale : FiaArg::antiquant_scale;
  const FiaArg vo = separate ? FiaArg::value_antiquant_offset : FiaArg::antiquant_offset;
  kern.kdq = {p.k_scale, p.k_offset, key.sig[static_cast<int>(ks)].dtype,
              key.sig[static_cast<int>(ko)].dtype, key.key_antiquant_mode >= 4};
  kern.vdq = {p.v_scale, p.v_offset, key.sig[static_cast<int>(vs)].dtype,
              key.sig[static_cast<int>(vo)].dtype, key.value_antiquant_mode >= 4};
  kern.out_scale_t = key.sig[static_cast<int>(FiaArg::quant_scale2)].dtype;

  const auto base_addr = reinterpret_cast<std::uintptr_t>(p.workspace);
  std::byte* base = p.workspace + ((kWorkspaceAlign - base_addr % kWorkspaceAlign) % kWorkspaceAlign);
  ctx.parallel_for(p.plan.rows, p.plan.grain, [&](std::int64_t begin, std::int64_t end) {
    std::byte* scratch = base + (begin / p.plan.grain) * p.plan.chunk_bytes;
    for (std::int64_t r = begin; r < end; ++r) kern.run(r, scratch);
  });
}

template <class QT>
void dispatch_kv(const FiaParams& p, const std::int64_t* tail, const ExecContext& ctx) {
  if (p.key.sig[static_cast<int>(FiaArg::key)].dtype == DType::i8)
    run_kernel<QT, std::int8_t>(p, tail, ctx);
  else
    run_kernel<QT, QT>(p, tail, ctx);
}

}  // namespace

// Copies the header out of a block (the block's storage need not be aligned for FiaParams).
bool read_fia_header(const void* params, std::size_t size, FiaParams& p) {
  if (size < sizeof(FiaParams)) return false;
  std::memcpy(&p, params, sizeof(FiaParams));
  return p.magic == kFiaMagic && p.header_bytes == sizeof(FiaParams) && p.key.batch >= 1 &&
         size == fia_block_bytes(p.key.batch);
}

void fia_cpu_kernel(const void* params, std::size_t size, const ExecContext& ctx) {
  FiaParams p;
  if (!read_fia_header(params, size, p))
    NG_THROW(TaskError, kOp, "malformed parameter block (", size, " bytes)");
  // The tail (4*B int64) is copied to keep its reads aligned; it is small next to the work.
  const std::byte* tail = static_cast<const std::byte*>(params) + sizeof(FiaParams);
  const auto* values = reinterpret_cast<const std::int64_t*>(tail);
  const std::size_t count = kFiaTailArrays * static_cast<std::size_t>(p.key.batch);
  std::int64_t local[kFiaTailArrays * FiaParamBuffer::kInlineBatch];
  std::vector<std::int64_t> heap;
  if (reinterpret_cast<std::uintptr_t>(tail) % alignof(std::int64_t) != 0) {
    std::int64_t* dst = local;
    if (count > std::size(local)) {
      heap.resize(count);
      dst = heap.data();
    }
    std::memcpy(dst, tail, count * sizeof(std::int64_t));
    values = dst;
  }
  if (p.lse_zero) *p.lse_zero = 0.0f;
  // Fast kernels unless the mode says simple or they do not cover the launch (Note [FIA fast
  // kernels] in fia_fast_launch.hpp).
  if (fia_kernel_mode() == FiaKernelMode::fast && fast::fia_fast_kernel(p, values, ctx)) return;
  switch (p.key.sig[static_cast<int>(FiaArg::query)].dtype) {
    case DType::f32: dispatch_kv<float>(p, values, ctx); break;
    case DType::f16: dispatch_kv<half>(p, values, ctx); break;
    case DType::bf16: dispatch_kv<bfloat16>(p, values, ctx); break;
    default:
      NG_THROW(TaskError, kOp, "unsupported query dtype ",
               dtype_name(p.key.sig[static_cast<int>(FiaArg::query)].dtype),
               " in the parameter block");
  }
}

}  // namespace npugraph::ops::attention
