// FIA's plan (Note [FIA plan] in fia_plan.hpp): the stages in order, the output contract, and the
// one function that sizes and lays out the workspace (Note [FIA workspace] in fia_params.hpp).
#include "ops/attention/fia_plan.hpp"

#include <algorithm>
#include <thread>

namespace npugraph::ops::attention {

std::ostream& operator<<(std::ostream& os, const ListText& l) {
  os << '[';
  for (std::size_t i = 0; i < l.values.size(); ++i) {
    if (i == 16) {
      os << ", ... (" << l.values.size() << " values)";
      break;
    }
    os << (i ? ", " : "") << l.values[i];
  }
  return os << ']';
}

std::ostream& operator<<(std::ostream& os, const TensorText& x) {
  if (!x.t.defined()) return os << "undefined";
  os << dtype_name(x.t.dtype()) << '[';
  for (int i = 0; i < x.t.dim(); ++i) os << (i ? ", " : "") << x.t.shape()[i];
  return os << ']';
}

void set_sig(FiaPlan& c, FiaArg a, const Tensor& t) {
  if (!t.defined()) return;
  FiaTensorSig& s = c.key.sig[static_cast<int>(a)];
  s.rank = static_cast<std::int8_t>(t.dim());
  s.dtype = t.dtype();
  FiaTensorDims& d = c.dims[static_cast<int>(a)];
  for (int i = 0; i < t.dim() && i < 4; ++i) d.d[i] = t.shape()[i];
}

void check_defined(const Tensor& t, const char* name) {
  NG_CHECK_ARG(t.defined(), kOp, name, " = undefined: must be a defined tensor");
}

void check_same_device(const Tensor& t, const char* name, const Tensor& q) {
  NG_CHECK_ARG(t.device() == q.device(), kOp, name, " = ", TensorText{t},
               ": must be on the query's device ", q.device().str(), ", not ", t.device().str());
}

std::int64_t fast_slot_count() {
  static const std::int64_t n =
      std::clamp<std::int64_t>(std::thread::hardware_concurrency(), 1, kFastSlots);
  return n;
}

FiaWorkspacePlan plan_workspace(const FiaShapeKey& key) {
  FiaWorkspacePlan p;
  const bool token = key.token();
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

namespace {

Shape output_shape(const FiaPlan& c) {
  const std::int64_t B = c.key.batch, N = c.key.heads, S = c.key.q_seq, D = c.key.dv;
  switch (c.out) {
    case FiaLayout::bsh: return {B, S, N * D};
    case FiaLayout::bsnd: return {B, S, N, D};
    case FiaLayout::bnsd: return {B, N, S, D};
    case FiaLayout::nsd: return {N, S, D};
    case FiaLayout::tnd: return {S, N, D};
    case FiaLayout::ntd: return {N, S, D};
    case FiaLayout::nbsd: return {N, B, S, D};
  }
  return {};
}

Shape lse_shape(const FiaPlan& c) {
  if (c.token) return {c.key.q_seq, c.key.heads, 1};
  return {c.in == FiaLayout::nsd ? 1 : c.key.batch, c.key.heads, c.key.q_seq, 1};
}

}  // namespace

void plan_fia(FiaPlan& c) {
  plan_layout(c);
  plan_mask(c);
  plan_quant(c);
  if (c.q.device().type() == DeviceType::cuda) [[unlikely]] {
    const std::string why = fia_cuda_unsupported(c, c.q.device());
    if (!why.empty()) NG_THROW(UnsupportedError, why);
  }
  c.key.lse_flag = c.o.softmax_lse_flag ? 1 : 0;
  c.header.plan = plan_workspace(c.key);
  c.out_shape = output_shape(c);
  c.lse_shape = lse_shape(c);
  c.out_dtype = c.key.out_int8 ? DType::i8 : c.q_dtype;
}

bool same_plan_inputs(const FiaPlan& planned, const Tensor& q, const Tensor& k, const Tensor& v,
                      const FiaOptions& o) {
  // Every FiaOptions field is named below, as a tensor, a host value or a static option: a new field
  // changes the size and stops this build until it is sorted here.
  static_assert(sizeof(FiaOptions) == 22 * sizeof(Tensor) + 3 * sizeof(std::vector<std::int64_t>) +
                                          sizeof(std::string) + 12 * sizeof(std::int64_t),
                "FiaOptions changed: sort the new field into same_plan_inputs");
  const FiaOptions& p = planned.o;
  if (!same_tensor(planned.q, q) || !same_tensor(planned.k, k) || !same_tensor(planned.v, v))
    return false;
  for (const auto member :
       {&FiaOptions::pse_shift, &FiaOptions::atten_mask, &FiaOptions::dequant_scale1,
        &FiaOptions::quant_scale1, &FiaOptions::dequant_scale2, &FiaOptions::quant_scale2,
        &FiaOptions::quant_offset2, &FiaOptions::antiquant_scale, &FiaOptions::antiquant_offset,
        &FiaOptions::block_table, &FiaOptions::query_padding_size, &FiaOptions::kv_padding_size,
        &FiaOptions::key_antiquant_scale, &FiaOptions::key_antiquant_offset,
        &FiaOptions::value_antiquant_scale, &FiaOptions::value_antiquant_offset,
        &FiaOptions::key_shared_prefix, &FiaOptions::value_shared_prefix, &FiaOptions::query_rope,
        &FiaOptions::key_rope, &FiaOptions::key_rope_antiquant_scale, &FiaOptions::learnable_sink})
    if (!same_tensor(p.*member, o.*member)) return false;
  // Not compared, the host values (the block stage reads them): actual_seq_lengths,
  // actual_seq_lengths_kv, actual_shared_prefix_len, scale, pre_tokens, next_tokens.
  return p.num_heads == o.num_heads && p.input_layout == o.input_layout &&
         p.num_key_value_heads == o.num_key_value_heads && p.sparse_mode == o.sparse_mode &&
         p.inner_precise == o.inner_precise && p.block_size == o.block_size &&
         p.antiquant_mode == o.antiquant_mode && p.softmax_lse_flag == o.softmax_lse_flag &&
         p.key_antiquant_mode == o.key_antiquant_mode &&
         p.value_antiquant_mode == o.value_antiquant_mode;
}

void build_fia_params(const Tensor& query, const Tensor& key, const Tensor& value,
                      const FiaOptions& options, const Tensor& workspace,
                      const Tensor& attention_out, const Tensor& softmax_lse,
                      FiaParamBuffer& buffer) {
  FiaPlan plan(query, key, value, options, buffer.start());
  plan_fia(plan);
  build_block(plan, workspace, attention_out, softmax_lse, buffer);
}

}  // namespace npugraph::ops::attention
