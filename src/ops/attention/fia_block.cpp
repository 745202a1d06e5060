// The block stage (Note [FIA plan] in fia_plan.hpp): the outputs and the workspace checked against
// the plan, and everything the host values decide: the tail (resolved lengths and starts), the
// shared-prefix length, the block ids the lengths use, the left-padding starts, the band, the
// mask/pse extents the lengths need, and the int8 output's rule on rows a band leaves empty.
// Runs on every launch and every update: nothing here allocates for batches up to
// FiaParamBuffer::kInlineBatch, and message parts are only formatted when a check fails.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>

#include "ops/attention/fia_plan.hpp"

namespace npugraph::ops::attention {
namespace {

// ---- Lengths (Note [FIA parameter block]).

// Per-batch lengths: empty = `full`, one value broadcasts, >= batch values use the first `batch`.
// `bound` < 0: values are not bounded (decode's query lengths).
void resolve_lengths(std::span<const std::int64_t> values, const char* name,
                     const char* bound_text, std::int64_t batch, std::int64_t full,
                     std::int64_t bound, std::int64_t* dst) {
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  if (n == 0) {
    std::fill(dst, dst + batch, full);
    return;
  }
  NG_CHECK_ARG(n == 1 || n >= batch, kOp, name, " = ", ListText{values},
               ": must hold 1 value or at least B = ", batch, " values");
  const std::int64_t used = n == 1 ? 1 : batch;
  for (std::int64_t b = 0; b < used; ++b) {
    const std::int64_t x = values[static_cast<std::size_t>(b)];
    NG_CHECK_ARG(x >= 0, kOp, name, "[", b, "] = ", x, ": must be >= 0");
    NG_CHECK_ARG(bound < 0 || x <= bound, kOp, name, "[", b, "] = ", x, ": must be <= ",
                 bound_text, " (", bound, ")");
    dst[b] = x;
  }
  if (n == 1) std::fill(dst + 1, dst + batch, dst[0]);
}

// TND/NTD: cumulative lengths, one per batch; batch b owns tokens [start[b], start[b] + len[b]).
void resolve_cumulative(std::span<const std::int64_t> values, const char* name,
                        std::int64_t batch, std::int64_t tokens, std::int64_t* len,
                        std::int64_t* start) {
  NG_CHECK_ARG(static_cast<std::int64_t>(values.size()) == batch, kOp, name, " = ",
               ListText{values}, ": with a TND/NTD layout it must hold one cumulative length per "
               "batch (B = ", batch, ", the number of actual_seq_lengths)");
  std::int64_t prev = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t x = values[static_cast<std::size_t>(b)];
    NG_CHECK_ARG(x >= prev, kOp, name, "[", b, "] = ", x,
                 ": cumulative lengths must be >= 0 and non-decreasing (the previous is ", prev,
                 ")");
    NG_CHECK_ARG(x <= tokens, kOp, name, "[", b, "] = ", x, ": must be <= the T dimension (",
                 tokens, ")");
    start[b] = prev;
    len[b] = x - prev;
    prev = x;
  }
}

void resolve_host_lengths(const FiaPlan& c, FiaParamBuffer& buf) {
  const FiaHostValues& h = c.host;
  const FiaShapeKey& k = c.key;
  const std::int64_t B = k.batch;
  std::int64_t* aq = buf.actual_q();
  std::int64_t* akv = buf.actual_kv();
  std::fill(buf.q_start(), buf.q_start() + B, std::int64_t{0});
  std::fill(buf.kv_start(), buf.kv_start() + B, std::int64_t{0});
  if (c.token) {
    resolve_cumulative(h.actual_seq_lengths, "actual_seq_lengths", B, k.q_seq, aq, buf.q_start());
  } else {
    resolve_lengths(h.actual_seq_lengths, "actual_seq_lengths", "the query's S dimension", B,
                    k.q_seq, c.decode ? -1 : k.q_seq, aq);
    if (c.decode) std::fill(aq, aq + B, std::int64_t{1});  // Note [FIA decode]
  }
  if (c.paged) {
    NG_CHECK_ARG(!h.actual_seq_lengths_kv.empty(), kOp,
                 "actual_seq_lengths_kv = []: paged KV (block_table) needs the KV lengths");
    resolve_lengths(h.actual_seq_lengths_kv, "actual_seq_lengths_kv",
                    "block_table's capacity max_blocks * block_size", B, k.kv_seq, k.kv_seq, akv);
  } else if (c.token) {
    NG_CHECK_ARG(!h.actual_seq_lengths_kv.empty(), kOp, "actual_seq_lengths_kv = []: with "
                 "input_layout ", c.o.input_layout, " it is required (cumulative KV lengths)");
    resolve_cumulative(h.actual_seq_lengths_kv, "actual_seq_lengths_kv", B, k.kv_seq, akv,
                       buf.kv_start());
  } else {
    resolve_lengths(h.actual_seq_lengths_kv, "actual_seq_lengths_kv", "the key's S dimension", B,
                    k.kv_seq, k.kv_seq, akv);
  }
}

std::int64_t resolve_prefix_len(const FiaPlan& c) {
  const std::span<const std::int64_t> v = c.host.actual_shared_prefix_len;
  if (!c.prefix) return 0;
  if (v.empty()) return c.key.prefix_seq;
  NG_CHECK_ARG(v.size() == 1 && v[0] >= 0 && v[0] <= c.key.prefix_seq, kOp,
               "actual_shared_prefix_len = ", ListText{v},
               ": must be 1 value in [0, the shared prefix's S = ", c.key.prefix_seq, "]");
  return v[0];
}

// The block ids the actual lengths use must address the cache (the kernel checks again).
void check_block_ids(const FiaPlan& c, const std::int64_t* akv) {
  const Tensor& bt = c.o.block_table;
  const auto* table = bt.data_ptr<std::int32_t>();
  const std::int64_t s0 = bt.stride(0), s1 = bt.stride(1), blocks = c.key.num_blocks;
  for (std::int64_t b = 0; b < c.key.batch; ++b) {
    const std::int64_t used = ceil_div(akv[b], c.key.block_size);
    for (std::int64_t i = 0; i < used; ++i) {
      const std::int64_t id = table[b * s0 + i * s1];
      NG_CHECK_ARG(id >= 0 && id < blocks, kOp, "block_table[", b, "][", i, "] = ", id,
                   ": must be in [0, ", blocks, ") (the key cache's block count); batch ", b,
                   " uses ", used, " blocks for ", akv[b], " tokens");
    }
  }
}

// ---- Left padding, the band, the extents the lengths need.

// The left padding is effective with its lengths (torch_npu: "otherwise right padding"); query
// padding is ignored by decode.
bool q_padding_effective(const FiaPlan& c) {
  return c.q_padding && !c.decode && !c.host.actual_seq_lengths.empty();
}
bool kv_padding_effective(const FiaPlan& c) {
  return c.kv_padding && !c.host.actual_seq_lengths_kv.empty();
}

void check_padding_values(const FiaPlan& c, const Tensor& t, const char* name,
                          const char* lengths_name, std::int64_t seq, const std::int64_t* actual) {
  const std::int64_t pad = std::max<std::int64_t>(0, *t.data_ptr<std::int64_t>());
  for (std::int64_t b = 0; b < c.key.batch; ++b)
    NG_CHECK_ARG(seq - pad - actual[b] >= 0, kOp, name, " = ", pad,
                 ": batch ", b, "'s valid rows would start at S - ", name, " - ", lengths_name,
                 "[", b, "] = ", seq, " - ", pad, " - ", actual[b], " < 0");
}

// The band of sparse_mode for these options (before clamping): pre', next' and whether they are
// anchored bottom right. Decode: unbounded.
struct FiaBand {
  std::int64_t pre = kBandLimit, next = kBandLimit;
  bool anchor = false;
};

FiaBand resolve_band(const FiaPlan& c) {
  FiaBand band;
  if (c.decode) return band;
  const FiaOptions& o = c.o;
  switch (o.sparse_mode) {
    case 0:
      // pre/next apply with a full mask only, and not under left padding (torch_npu).
      if (o.atten_mask.defined() && !q_padding_effective(c) && !kv_padding_effective(c)) {
        band.pre = c.host.pre_tokens;
        band.next = c.host.next_tokens;
      }
      break;
    case 2: band.next = 0; break;
    case 3: band.next = 0; band.anchor = true; break;
    case 4:
      band.pre = c.host.pre_tokens;
      band.next = c.host.next_tokens;
      band.anchor = true;
      break;
    default: break;
  }
  return band;
}

// The mask's or pse's KV extent the kernel may index: the shared prefix plus the key (paged: the
// blocks the actual lengths use).
std::int64_t kv_extent(const FiaPlan& c, const std::int64_t* actual_kv, std::int64_t prefix_len) {
  if (!c.paged) return prefix_len + c.key_s;
  std::int64_t most = 0;
  for (std::int64_t b = 0; b < c.key.batch; ++b) most = std::max(most, actual_kv[b]);
  return ceil_div(most, c.key.block_size) * c.key.block_size;
}

// Effective padding, the clamped band, and the mask/pse extents (their views are the plan's).
FiaBand finish_mask(const FiaPlan& c, const std::int64_t* actual_q, const std::int64_t* actual_kv,
                    std::int64_t prefix_len, FiaParams& p) {
  const FiaOptions& o = c.o;
  if (q_padding_effective(c)) {
    check_padding_values(c, o.query_padding_size, "query_padding_size", "actual_seq_lengths",
                         c.key.q_seq, actual_q);
    p.q_padding = o.query_padding_size.data_ptr<std::int64_t>();
  }
  if (kv_padding_effective(c)) {
    check_padding_values(c, o.kv_padding_size, "kv_padding_size", "actual_seq_lengths_kv",
                         c.key_s, actual_kv);
    p.kv_padding = o.kv_padding_size.data_ptr<std::int64_t>();
  }

  const FiaBand band = resolve_band(c);
  p.pre_tokens = std::clamp(band.pre, -kBandLimit, kBandLimit);
  p.next_tokens = std::clamp(band.next, -kBandLimit, kBandLimit);

  const Tensor& m = o.atten_mask;
  const Tensor& pse = o.pse_shift;
  const bool full_mask = static_cast<FiaMaskKind>(c.key.mask_kind) == FiaMaskKind::full;
  if (!full_mask && !pse.defined()) return band;
  const std::int64_t extent = kv_extent(c, actual_kv, prefix_len);
  const char* need = c.paged ? "the blocks the actual KV lengths use ("
                             : "the shared prefix plus the key's S (";
  if (full_mask)
    NG_CHECK_ARG(m.size(-1) >= extent, kOp, "atten_mask = ", TensorText{m},
                 ": its Skv dimension (", m.size(-1), ") must be >= ", need, extent, ")");
  if (pse.defined())
    NG_CHECK_ARG(pse.size(3) >= extent, kOp, "pse_shift = ", TensorText{pse},
                 ": its Skv dimension (", pse.size(3), ") must be >= ", need, extent, ")");
  return band;
}

// ---- The int8 output.

// Host-value checks of the quantised output (rows a band would leave empty).
void finish_quant(const FiaPlan& c, const FiaBand& band, const std::int64_t* actual_q,
                  const std::int64_t* actual_kv, std::int64_t prefix_len) {
  if (!c.key.out_int8 || c.decode) return;
  const FiaOptions& o = c.o;
  const FiaHostValues& h = c.host;
  if (o.sparse_mode == 4)
    NG_CHECK_ARG(h.pre_tokens >= 0 && h.next_tokens >= 0, kOp, "pre_tokens = ", h.pre_tokens,
                 ", next_tokens = ", h.next_tokens,
                 ": sparse_mode 4 with an int8 output (quant_scale2) needs both >= 0");
  if (!o.quant_offset2.defined()) return;
  // With an offset, a valid row that sees nothing would not quantise to the offset: torch_npu
  // rejects the band settings that leave such rows; the band slides with i, so rows 0 and
  // Lq - 1 are the worst.
  for (std::int64_t b = 0; b < c.key.batch; ++b) {
    const std::int64_t lq = actual_q[b], lkv = prefix_len + actual_kv[b];
    if (lq == 0 || lkv == 0) continue;
    const std::int64_t shift = band.anchor ? lkv - lq : 0;
    const std::int64_t pre = std::clamp(band.pre, -kBandLimit, kBandLimit);
    const std::int64_t next = std::clamp(band.next, -kBandLimit, kBandLimit);
    const bool first_ok = shift + next >= 0;
    const bool last_ok = lq - 1 + shift - pre <= lkv - 1;
    const bool width_ok = pre + next >= 0;
    NG_CHECK_ARG(first_ok && last_ok && width_ok, kOp, "quant_offset2 = ",
                 TensorText{o.quant_offset2}, ": with sparse_mode = ", o.sparse_mode,
                 ", pre_tokens = ", h.pre_tokens, ", next_tokens = ", h.next_tokens,
                 " some query rows of batch ", b, " (actual lengths ", lq, " and ", lkv,
                 ") see no key; an int8 output with quant_offset2 does not allow that");
  }
}

// ---- Outputs and memory.

struct ByteRange {
  std::uintptr_t lo = 0, hi = 0;  // [lo, hi); empty when lo == hi
};
ByteRange byte_range(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  const auto base = reinterpret_cast<std::uintptr_t>(t.data());
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < t.dim(); ++i) {
    const std::int64_t span = (t.shape()[i] - 1) * t.strides()[i];
    (span < 0 ? lo : hi) += span;
  }
  const auto es = static_cast<std::int64_t>(t.element_size());
  return {base + static_cast<std::uintptr_t>(lo * es), base + static_cast<std::uintptr_t>((hi + 1) * es)};
}

struct Named {
  const Tensor* t;
  const char* name;
};

void check_output(const Tensor& t, const char* name, const Tensor& q) {
  check_defined(t, name);
  check_same_device(t, name, q);
  NG_CHECK_ARG(t.is_contiguous(), kOp, name, " = ", TensorText{t}, ": must be contiguous");
}

void check_aligned(const Tensor& t, const char* name) {
  if (!t.defined()) return;
  // Element sizes are powers of two; an empty tensor may have any address.
  NG_CHECK_ARG((reinterpret_cast<std::uintptr_t>(t.data()) & (t.element_size() - 1)) == 0 ||
                   t.numel() == 0,
               kOp, name,
               " = ", TensorText{t}, ": its data address must be aligned to its element size (",
               t.element_size(), " bytes)");
}

// Alignment of every tensor, and no output overlapping an input or another output. Only the
// defined tensors take part (most optional ones are undefined: this runs on every update).
void check_memory(const FiaPlan& c, const Tensor& workspace, const Tensor& out, const Tensor& lse) {
  const FiaOptions& o = c.o;
  const Named all_inputs[] = {
      {&c.q, "query"}, {&c.k, "key"}, {&c.v, "value"}, {&o.query_rope, "query_rope"},
      {&o.key_rope, "key_rope"}, {&o.key_shared_prefix, "key_shared_prefix"},
      {&o.value_shared_prefix, "value_shared_prefix"}, {&o.pse_shift, "pse_shift"},
      {&o.atten_mask, "atten_mask"}, {&o.block_table, "block_table"},
      {&o.query_padding_size, "query_padding_size"}, {&o.kv_padding_size, "kv_padding_size"},
      {&o.antiquant_scale, "antiquant_scale"}, {&o.antiquant_offset, "antiquant_offset"},
      {&o.key_antiquant_scale, "key_antiquant_scale"},
      {&o.key_antiquant_offset, "key_antiquant_offset"},
      {&o.value_antiquant_scale, "value_antiquant_scale"},
      {&o.value_antiquant_offset, "value_antiquant_offset"}, {&o.quant_scale2, "quant_scale2"},
      {&o.quant_offset2, "quant_offset2"}, {&o.learnable_sink, "learnable_sink"}};
  constexpr std::size_t kInputs = std::size(all_inputs);
  const Named* inputs[kInputs];
  ByteRange in_range[kInputs];
  std::size_t n_in = 0;
  for (const Named& x : all_inputs) {
    if (!x.t->defined()) continue;
    check_aligned(*x.t, x.name);
    inputs[n_in] = &x;
    in_range[n_in++] = byte_range(*x.t);
  }
  const Named outputs[] = {{&out, "attention_out"}, {&lse, "softmax_lse"}, {&workspace, "workspace"}};
  // softmax_lse is written also without softmax_lse_flag (its first element is set to 0), unless empty.
  const bool lse_written = o.softmax_lse_flag || lse.numel() > 0;
  const std::size_t n_out = lse_written ? 3 : 2;
  const Named* outs[] = {&outputs[0], lse_written ? &outputs[1] : &outputs[2], &outputs[2]};
  ByteRange out_range[3];
  for (std::size_t i = 0; i < n_out; ++i) {
    check_aligned(*outs[i]->t, outs[i]->name);
    out_range[i] = byte_range(*outs[i]->t);
  }
  auto overlap = [](const ByteRange& a, const ByteRange& b) {
    return a.lo != a.hi && b.lo != b.hi && a.lo < b.hi && b.lo < a.hi;
  };
  for (std::size_t i = 0; i < n_out; ++i) {
    for (std::size_t j = 0; j < n_in; ++j)
      NG_CHECK_ARG(!overlap(out_range[i], in_range[j]), kOp, outs[i]->name, " = ",
                   TensorText{*outs[i]->t}, ": must not overlap ", inputs[j]->name);
    for (std::size_t j = 0; j < i; ++j)
      NG_CHECK_ARG(!overlap(out_range[i], out_range[j]), kOp, outs[i]->name, " = ",
                   TensorText{*outs[i]->t}, ": must not overlap ", outs[j]->name);
  }
}

}  // namespace

void bind_outputs(const FiaPlan& c, const Tensor& workspace, const Tensor& attention_out,
                  const Tensor& softmax_lse, FiaParams& p) {
  const FiaOptions& options = c.o;
  check_output(attention_out, "attention_out", c.q);
  NG_CHECK_ARG(attention_out.dtype() == c.out_dtype, kOp, "attention_out = ",
               TensorText{attention_out},
               c.key.out_int8 ? ": must be int8 (quant_scale2 is given)" : ": must have the query's dtype ",
               c.key.out_int8 ? "" : dtype_name(c.out_dtype));
  NG_CHECK_ARG(attention_out.shape() == c.out_shape, kOp, "attention_out = ",
               TensorText{attention_out}, ": must have the shape ", c.out_shape.str(),
               " (the output layout, value's D)");
  check_defined(softmax_lse, "softmax_lse");
  if (options.softmax_lse_flag) {
    check_output(softmax_lse, "softmax_lse", c.q);
    NG_CHECK_ARG(softmax_lse.dtype() == DType::f32 && softmax_lse.shape() == c.lse_shape, kOp,
                 "softmax_lse = ", TensorText{softmax_lse},
                 ": with softmax_lse_flag it must be float32 ",
                 c.token ? "[T, N, 1] = " : "[B, N, Sq, 1] = ", c.lse_shape.str());
  }
  check_output(workspace, "workspace", c.q);
  NG_CHECK_ARG(workspace.dtype() == DType::u8, kOp, "workspace = ", TensorText{workspace},
               ": must be a uint8 tensor");
  const std::int64_t need = c.workspace().total_bytes;
  NG_CHECK_ARG(static_cast<std::int64_t>(workspace.nbytes()) >= need, kOp,
               "workspace = ", TensorText{workspace}, ": workspace has ", workspace.nbytes(),
               " bytes; these arguments need ", need, " (size it with fia_max_workspace)");
  check_memory(c, workspace, attention_out, softmax_lse);

  p.out = view_of(attention_out, c.out, c.key.dv);
  if (options.softmax_lse_flag) {
    p.lse = softmax_lse.data_ptr<float>();
    const std::int64_t N = c.key.heads, S = c.key.q_seq;
    if (c.token) {
      p.lse_stride[1] = 1;
      p.lse_stride[2] = N;
    } else {
      p.lse_stride[0] = N * S;
      p.lse_stride[1] = S;
      p.lse_stride[2] = 1;
    }
  }
  if (!options.softmax_lse_flag && softmax_lse.numel() > 0) {
    p.lse_zero = static_cast<unsigned char*>(softmax_lse.data());
    p.lse_zero_bytes = static_cast<std::int64_t>(softmax_lse.element_size());
  }
  p.workspace = static_cast<std::byte*>(workspace.data());
  p.workspace_bytes = static_cast<std::int64_t>(workspace.nbytes());
}

void check_scale(const FiaPlan& c) {
  NG_CHECK_ARG(std::isfinite(static_cast<float>(c.host.scale)), kOp, "scale = ", c.host.scale,
               ": must be finite in float32");
}

void resolve_host_values(const FiaPlan& c, FiaParamBuffer& buffer) {
  FiaParams& p = buffer.header();
  buffer.size_tail(c.key.batch);
  resolve_host_lengths(c, buffer);
  const std::int64_t prefix_len = resolve_prefix_len(c);
  if (c.paged) check_block_ids(c, buffer.actual_kv());
  const FiaBand band = finish_mask(c, buffer.actual_q(), buffer.actual_kv(), prefix_len, p);
  finish_quant(c, band, buffer.actual_q(), buffer.actual_kv(), prefix_len);
  p.prefix_len = prefix_len;
  p.scale = static_cast<float>(c.host.scale);
}

void build_block(const FiaPlan& c, const Tensor& workspace, const Tensor& attention_out,
                 const Tensor& softmax_lse, FiaParamBuffer& buffer) {
  check_scale(c);
  bind_outputs(c, workspace, attention_out, softmax_lse, buffer.header());
  resolve_host_values(c, buffer);
  buffer.attach_dims(c.dims);
}

void replan_block(const FiaPlan& captured, const FiaParams* bound, const FiaHostValues& host,
                  const Tensor& workspace, const Tensor& attention_out, const Tensor& softmax_lse,
                  FiaParamBuffer& buffer) {
  FiaPlan plan(captured.q, captured.k, captured.v, captured.o,
               buffer.start(bound ? *bound : captured.header));
  static_cast<FiaFindings&>(plan) = captured;
  plan.host = host;
  check_scale(plan);
  if (!bound) bind_outputs(plan, workspace, attention_out, softmax_lse, buffer.header());
  resolve_host_values(plan, buffer);
}

}  // namespace npugraph::ops::attention
