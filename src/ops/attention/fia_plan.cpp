// FIA planning: the workspace plan, host values (actual lengths, shared-prefix length, the paged
// block ids), the outputs' contracts, and the parameter block (Note [FIA parameter block]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <new>
#include <thread>

#include "ops/attention/fia_args.hpp"

namespace npugraph::ops::attention {

std::int64_t fast_slot_count() {
  static const std::int64_t n =
      std::clamp<std::int64_t>(std::thread::hardware_concurrency(), 1, kFastSlots);
  return n;
}

FiaWorkspacePlan plan_workspace(const FiaShapeKey& key) {
  FiaWorkspacePlan p;
  const bool token = key.layout_in == static_cast<std::int64_t>(FiaLayout::tnd) ||
                     key.layout_in == static_cast<std::int64_t>(FiaLayout::ntd);
  const std::int64_t rows = token ? key.heads * key.q_seq : key.batch * key.heads * key.q_seq;
  const std::int64_t kv_seq = key.kv_seq + key.prefix_seq;
  const std::int64_t dk = key.dk, dr = key.dr, dv = key.dv;
  p.rows = rows;
  // Simple kernel. Work per row: a dot product of Dk + Dr and an axpy of Dv for each of up to
  // kv_seq columns.
  const std::int64_t row_flops = std::max<std::int64_t>(1, 2 * kv_seq * (dk + dr + dv));
  const std::int64_t min_grain = ceil_div(kMinChunkFlops, row_flops);
  p.grain = std::max<std::int64_t>(1, std::min(rows, std::max(ceil_div(rows, kMaxChunks), min_grain)));
  p.chunks = ceil_div(rows, p.grain);
  constexpr std::int64_t f = sizeof(float);
  std::int64_t at = 0;
  auto take = [&](std::int64_t floats) {
    const std::int64_t off = at;
    at += align_up(std::max<std::int64_t>(floats, 1) * f, kWorkspaceAlign);
    return off;
  };
  p.q_offset = take(dk);
  p.q_rope_offset = take(dr);
  p.k_offset = take(dk);
  p.k_rope_offset = take(dr);
  p.v_offset = take(dv);
  p.acc_offset = take(dv);
  p.score_offset = take(kKvBlock);
  p.chunk_bytes = at;
  const std::int64_t simple_bytes = p.chunks * p.chunk_bytes;

  // Fast kernels (Note [FIA fast kernels]).
  const std::int64_t group = std::max<std::int64_t>(1, key.heads / std::max<std::int64_t>(1, key.kv_heads));
  const bool decode = !token && key.q_seq <= kDecodeMaxSeq;
  if (decode) {
    p.fast_rows = group * key.q_seq;
    p.fast_splits = std::clamp<std::int64_t>(ceil_div(kv_seq, kMinSplit), 1, kMaxSplits);
  } else {
    p.fast_tile = std::max<std::int64_t>(1, kPrefillRows / group);
    p.fast_rows = group * p.fast_tile;
  }
  p.fast_dk = align_up(std::max<std::int64_t>(dk + dr, 1), kFastPad);
  p.fast_dv = align_up(std::max<std::int64_t>(dv, 1), kFastPad);
  at = 0;
  p.fast_q_offset = take(p.fast_rows * p.fast_dk);
  p.fast_acc_offset = take(p.fast_rows * p.fast_dv);
  p.fast_state_offset = take(p.fast_rows * 2);
  p.fast_score_offset = take(p.fast_rows * kFastChunk);
  p.fast_k_offset = take(kFastChunk * p.fast_dk);
  p.fast_v_offset = take(kFastChunk * p.fast_dv);
  p.fast_slot_bytes = at;
  p.fast_slots = fast_slot_count();
  p.fast_partial_offset = p.fast_slots * p.fast_slot_bytes;
  p.fast_partial_bytes = (p.fast_dv + kFastPad) * f;
  const std::int64_t fast_bytes =
      p.fast_partial_offset + rows * p.fast_splits * p.fast_partial_bytes;
  p.total_bytes = std::max(simple_bytes, fast_bytes) + kWorkspaceAlign;
  return p;
}

FiaParams& FiaParamBuffer::reset(std::int64_t batch) {
  batch_ = batch;
  size_ = fia_block_bytes(batch);
  if (batch <= kInlineBatch) {
    heap_.clear();
    heap_.shrink_to_fit();
  } else {
    heap_.assign(size_ / sizeof(std::int64_t), 0);
  }
  return *::new (static_cast<void*>(base())) FiaParams{};
}

namespace {

// B as check_core_shapes finds it: the number of lengths for TND/NTD, 1 for NSD, else query dim 0
// (clamped: check_core_shapes rejects B > 65536 before the tail would be used).
std::int64_t batch_of(const Tensor& q, const FiaOptions& o) {
  const std::string& l = o.input_layout;
  std::int64_t b = 1;
  if (l.starts_with("TND") || l.starts_with("NTD")) b = static_cast<std::int64_t>(o.actual_seq_lengths.size());
  else if (l != "NSD" && q.defined() && q.dim() > 0) b = q.size(0);
  return std::clamp<std::int64_t>(b, 1, 65537);
}

// Validates the static part of a call: everything but the outputs and the host values.
void check_static(FiaCall& c, FiaParams& p) {
  check_core_shapes(c);
  check_mask_shapes(c);
  check_quant_shapes(c, p);
  c.key.lse_flag = c.o.softmax_lse_flag ? 1 : 0;
}

FiaWorkspacePlan plan_of(const FiaCall& c) {
  return plan_workspace(c.key);
}

// Per-batch lengths: empty = `full`, one value broadcasts, >= batch values use the first `batch`.
// `bound` < 0: values are not bounded (decode's query lengths).
void resolve_lengths(const std::vector<std::int64_t>& values, const char* name,
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
void resolve_cumulative(const std::vector<std::int64_t>& values, const char* name,
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

void resolve_host_lengths(const FiaCall& c, FiaParamBuffer& buf) {
  const FiaOptions& o = c.o;
  const FiaShapeKey& k = c.key;
  const std::int64_t B = k.batch;
  std::int64_t* aq = buf.actual_q();
  std::int64_t* akv = buf.actual_kv();
  std::fill(buf.q_start(), buf.q_start() + B, std::int64_t{0});
  std::fill(buf.kv_start(), buf.kv_start() + B, std::int64_t{0});
  if (c.token) {
    resolve_cumulative(o.actual_seq_lengths, "actual_seq_lengths", B, k.q_seq, aq, buf.q_start());
  } else {
    resolve_lengths(o.actual_seq_lengths, "actual_seq_lengths", "the query's S dimension", B,
                    k.q_seq, c.decode ? -1 : k.q_seq, aq);
    if (c.decode) std::fill(aq, aq + B, std::int64_t{1});  // Note [FIA decode]
  }
  if (c.paged) {
    NG_CHECK_ARG(!o.actual_seq_lengths_kv.empty(), kOp,
                 "actual_seq_lengths_kv = []: paged KV (block_table) needs the KV lengths");
    resolve_lengths(o.actual_seq_lengths_kv, "actual_seq_lengths_kv",
                    "block_table's capacity max_blocks * block_size", B, k.kv_seq, k.kv_seq, akv);
  } else if (c.token) {
    NG_CHECK_ARG(!o.actual_seq_lengths_kv.empty(), kOp, "actual_seq_lengths_kv = []: with "
                 "input_layout ", o.input_layout, " it is required (cumulative KV lengths)");
    resolve_cumulative(o.actual_seq_lengths_kv, "actual_seq_lengths_kv", B, k.kv_seq, akv,
                       buf.kv_start());
  } else {
    resolve_lengths(o.actual_seq_lengths_kv, "actual_seq_lengths_kv", "the key's S dimension", B,
                    k.kv_seq, k.kv_seq, akv);
  }
}

std::int64_t resolve_prefix_len(const FiaCall& c) {
  const auto& v = c.o.actual_shared_prefix_len;
  if (!c.prefix) return 0;
  if (v.empty()) return c.key.prefix_seq;
  NG_CHECK_ARG(v.size() == 1 && v[0] >= 0 && v[0] <= c.key.prefix_seq, kOp,
               "actual_shared_prefix_len = ", ListText{v},
               ": must be 1 value in [0, the shared prefix's S = ", c.key.prefix_seq, "]");
  return v[0];
}

// The block ids the actual lengths use must address the cache (the kernel checks again).
void check_block_ids(const FiaCall& c, const std::int64_t* akv) {
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
void check_memory(const FiaCall& c, const Tensor& workspace, const Tensor& out, const Tensor& lse) {
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
      {&o.quant_offset2, "quant_offset2"}};
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
  const std::size_t n_out = o.softmax_lse_flag ? 3 : 2;
  const Named* outs[] = {&outputs[0], o.softmax_lse_flag ? &outputs[1] : &outputs[2], &outputs[2]};
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

FiaOutputInfo plan_outputs(const Tensor& query, const Tensor& key, const Tensor& value,
                           const FiaOptions& options) {
  FiaParams scratch;
  FiaCall c{query, key, value, options, scratch.key};
  check_static(c, scratch);
  FiaOutputInfo r;
  r.plan = plan_of(c);
  r.out_shape = output_shape(c);
  r.lse_shape = lse_shape(c);
  r.out_dtype = c.key.out_int8 ? DType::i8 : c.q_dtype;
  return r;
}

void build_fia_params(const Tensor& query, const Tensor& key, const Tensor& value,
                      const FiaOptions& options, const Tensor& workspace,
                      const Tensor& attention_out, const Tensor& softmax_lse, float* lse_zero,
                      FiaParamBuffer& buffer) {
  // The header is written in place; B (the tail's size) is read up front the way
  // check_core_shapes reads it (a call it rejects never launches, whatever B this guessed).
  FiaParams& p = buffer.reset(batch_of(query, options));
  FiaCall c{query, key, value, options, p.key};
  check_core_shapes(c);
  NG_CHECK_AS(InternalError, c.key.batch == buffer.batch(), kOp, "batch ", c.key.batch,
              " != the block's ", buffer.batch());
  check_mask_shapes(c);
  check_quant_shapes(c, p);
  c.key.lse_flag = options.softmax_lse_flag ? 1 : 0;
  const float scale = static_cast<float>(options.scale);
  NG_CHECK_ARG(std::isfinite(scale), kOp, "scale = ", options.scale,
               ": must be finite in float32");

  // Outputs.
  const DType out_dtype = c.key.out_int8 ? DType::i8 : c.q_dtype;
  check_output(attention_out, "attention_out", query);
  NG_CHECK_ARG(attention_out.dtype() == out_dtype, kOp, "attention_out = ",
               TensorText{attention_out},
               c.key.out_int8 ? ": must be int8 (quant_scale2 is given)" : ": must have the query's dtype ",
               c.key.out_int8 ? "" : dtype_name(out_dtype));
  const Shape out_shape = output_shape(c);
  NG_CHECK_ARG(attention_out.shape() == out_shape, kOp, "attention_out = ",
               TensorText{attention_out}, ": must have the shape ", out_shape.str(),
               " (the output layout, value's D)");
  check_defined(softmax_lse, "softmax_lse");
  if (options.softmax_lse_flag) {
    check_output(softmax_lse, "softmax_lse", query);
    const Shape want = lse_shape(c);
    NG_CHECK_ARG(softmax_lse.dtype() == DType::f32 && softmax_lse.shape() == want, kOp,
                 "softmax_lse = ", TensorText{softmax_lse},
                 ": with softmax_lse_flag it must be float32 ",
                 c.token ? "[T, N, 1] = " : "[B, N, Sq, 1] = ", want.str());
  }
  check_output(workspace, "workspace", query);
  NG_CHECK_ARG(workspace.dtype() == DType::u8, kOp, "workspace = ", TensorText{workspace},
               ": must be a uint8 tensor");
  const FiaWorkspacePlan plan = plan_of(c);
  NG_CHECK_ARG(static_cast<std::int64_t>(workspace.nbytes()) >= plan.total_bytes, kOp,
               "workspace = ", TensorText{workspace}, ": workspace has ", workspace.nbytes(),
               " bytes; these arguments need ", plan.total_bytes,
               " (size it with fia_max_workspace)");
  check_memory(c, workspace, attention_out, softmax_lse);

  // Host values (Note [FIA parameter block]).
  resolve_host_lengths(c, buffer);
  const std::int64_t prefix_len = resolve_prefix_len(c);
  if (c.paged) check_block_ids(c, buffer.actual_kv());
  const FiaBand band = finish_mask(c, buffer.actual_q(), buffer.actual_kv(), prefix_len, p);
  finish_quant(c, band, buffer.actual_q(), buffer.actual_kv(), prefix_len);

  // The block.
  make_core_views(c, attention_out, p);
  p.plan = plan;
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
  p.lse_zero = options.softmax_lse_flag ? nullptr : lse_zero;
  p.workspace = static_cast<std::byte*>(workspace.data());
  p.workspace_bytes = static_cast<std::int64_t>(workspace.nbytes());
  p.prefix_len = prefix_len;
  p.scale = scale;
}

}  // namespace npugraph::ops::attention
