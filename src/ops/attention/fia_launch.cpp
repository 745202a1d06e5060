// FIA's CPU kernel entry (fia_cpu_kernel) and its launch view (Note [FIA launch view] in
// fia_launch.hpp): the block decoded into a FiaLaunch, run on the fast kernels (fia_fast.hpp) in
// FiaKernelMode::fast when they cover it, else on the simple kernel (fia_kernel_simple.cpp), counting
// the path (fia_kernel_mode.hpp); and writing a row.
#include "ops/attention/fia_launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>

#include "ops/attention/fia_fast.hpp"
#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/attention/fia_kernel_util.hpp"
#include "ops/attention/softmax_state.hpp"
#include "ops/convert/float_rows.hpp"

namespace npugraph::ops::attention {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
void write_values(const FiaView& o, std::int64_t base, std::int64_t dv, const float* acc,
                  float sum) {
  if constexpr (!std::is_same_v<T, float>) {
    if (acc && o.stride[3] == 1 && dv <= kMaxHeadDim) {  // Note [Exact float rows]: the same bits
      float x[kMaxHeadDim];
      for (std::int64_t d = 0; d < dv; ++d) x[d] = acc[d] / sum;
      return store_row_f32(x, dv, static_cast<T*>(o.data) + base, dtype_v<T>);
    }
  }
  for (std::int64_t d = 0; d < dv; ++d) {
    const float x = acc ? acc[d] / sum : 0.0f;
    if constexpr (std::is_same_v<T, float>) static_cast<float*>(o.data)[base + d * o.stride[3]] = x;
    else static_cast<T*>(o.data)[base + d * o.stride[3]] = T(x);
  }
}

// Reads an effective left padding (< 0 reads as 0) and checks every batch's start (the tensor may
// have changed since the op checked it). -1 when there is no padding tensor.
std::int64_t read_padding(const std::int64_t* pad, const char* name, std::int64_t seq,
                          const std::int64_t* actual, std::int64_t batch) {
  if (!pad) return -1;
  const std::int64_t x = std::max<std::int64_t>(0, *pad);
  for (std::int64_t b = 0; b < batch; ++b)
    if (seq - x - actual[b] < 0)
      NG_THROW(TaskError, kOp, name, " = ", x, ": batch ", b, "'s valid rows would start at ",
               seq, " - ", x, " - ", actual[b], " < 0 when the kernel ran");
  return x;
}

}  // namespace

FiaLaunch::FiaLaunch(const void* params, std::size_t size) : p(header_), key(header_.key) {
  const auto block = std::span(static_cast<const std::byte*>(params), size);
  const std::int64_t B = fia_block_batch(block);
  if (B == 0) NG_THROW(TaskError, kOp, "malformed parameter block (", size, " bytes)");
  std::memcpy(&header_, params, sizeof(FiaParams));
  // The eager form's placeholder softmax_lse first: it holds 0 even when a check below fails.
  if (header_.lse_zero) std::memset(header_.lse_zero, 0, static_cast<std::size_t>(header_.lse_zero_bytes));
  // The tail (4*B int64) is copied when it is not aligned; it is small next to the work.
  const std::byte* tail = block.data() + sizeof(FiaParams);
  const auto* values = reinterpret_cast<const std::int64_t*>(tail);
  if (reinterpret_cast<std::uintptr_t>(tail) % alignof(std::int64_t) != 0) {
    const std::size_t count = kFiaTailArrays * static_cast<std::size_t>(B);
    std::int64_t* dst = local_;
    if (count > std::size(local_)) {
      heap_.resize(count);
      dst = heap_.data();
    }
    std::memcpy(dst, tail, count * sizeof(std::int64_t));
    values = dst;
  }
  aq = values;
  akv = values + B;
  q_start = values + 2 * B;
  kv_start = values + 3 * B;

  group = key.heads / key.kv_heads;
  token = key.token();
  paged = key.paged();
  q_pad = read_padding(p.q_padding, "query_padding_size", key.q_seq, aq, B);
  kv_pad = read_padding(p.kv_padding, "kv_padding_size", key.kv_seq, akv, B);
  q_t = key.of(FiaArg::query).dtype;
  kv_t = key.of(FiaArg::key).dtype;
  pse_t = key.of(FiaArg::pse_shift).dtype;
  out_scale_t = key.of(FiaArg::quant_scale2).dtype;
  sink_t = key.of(FiaArg::learnable_sink).dtype;
  if (kv_t == DType::i8) {
    // Separate parameters win over the combined ones (docs/fia.md, Antiquant).
    const bool separate = key.of(FiaArg::key_antiquant_scale).rank >= 0;
    auto t = [&](FiaArg a) { return key.of(a).dtype; };
    kdq = {p.k_scale, p.k_offset,
           t(separate ? FiaArg::key_antiquant_scale : FiaArg::antiquant_scale),
           t(separate ? FiaArg::key_antiquant_offset : FiaArg::antiquant_offset)};
    vdq = {p.v_scale, p.v_offset,
           t(separate ? FiaArg::value_antiquant_scale : FiaArg::antiquant_scale),
           t(separate ? FiaArg::value_antiquant_offset : FiaArg::antiquant_offset)};
    // Key and value modes are both paged or neither (value mode 1 goes only with key mode 0).
    dq_paged = key.key_antiquant_mode >= 4;
  }
  const auto addr = reinterpret_cast<std::uintptr_t>(p.workspace);
  base = p.workspace + ((kWorkspaceAlign - addr % kWorkspaceAlign) % kWorkspaceAlign);
}

void FiaLaunch::bad_block_id(std::int64_t b, std::int64_t index, std::int64_t id) const {
  NG_THROW(TaskError, kOp, "block_table[", b, "][", index, "] = ", id,
           " is outside the key cache's ", key.num_blocks, " blocks when the kernel ran");
}

void FiaLaunch::finish(const Row& r, const float* acc, float max, float sum) const {
  bool empty = max == -kInf || !acc;
  if (empty) acc = nullptr;
  float with_sink[kMaxHeadDim];
  if (p.sink.data && valid_row(r.b, r.s)) {  // Note [FIA learnable sink]
    const SoftmaxState row = empty ? SoftmaxState{} : SoftmaxState{max, sum};
    const SoftmaxState sink{load_f32(p.sink.data, sink_t, r.n * p.sink.stride[1]), 1.0f};
    float row_factor, sink_factor;
    const SoftmaxState st = SoftmaxState::merge(row, sink, row_factor, sink_factor);
    if (!st.empty()) {  // else a -inf sink on an empty row: the empty row
      for (std::int64_t d = 0; d < key.dv; ++d) with_sink[d] = acc ? acc[d] * row_factor : 0.0f;
      acc = with_sink;
      max = st.max;
      sum = st.sum;
      empty = false;
    }
  }
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
      case DType::f16: write_values<half>(o, base0, key.dv, acc, sum); break;
      case DType::bf16: write_values<bfloat16>(o, base0, key.dv, acc, sum); break;
      default: write_values<float>(o, base0, key.dv, acc, sum); break;
    }
  }
  if (p.lse) {
    float* lse = p.lse + r.b * p.lse_stride[0] + r.n * p.lse_stride[1] + r.s * p.lse_stride[2];
    *lse = empty ? kInf : max + std::log(sum);
  }
}

void fia_cpu_kernel(const void* params, std::size_t size, const ExecContext& ctx) {
  const FiaLaunch l(params, size);
  if (fia_kernel_mode() == FiaKernelMode::fast) {
    if (fast::fia_fast_covers(l.p)) {
      // The decode kernel counts its own path (tiles or direct: a per-target choice).
      if (l.p.plan.fast_splits > 0) return fast::run_fast_decode(l, ctx);
      count_fia_path(FiaPath::prefill);
      return fast::run_fast_prefill(l, ctx);
    }
    count_fia_path(FiaPath::fallback);
  } else {
    count_fia_path(FiaPath::simple);
  }
  run_simple_kernel(l, ctx);
}

}  // namespace npugraph::ops::attention
