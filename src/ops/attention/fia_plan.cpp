// FIA host side: argument checks, normalisation of every layout to a (b, n, s, d) view, the
// workspace plan, and the parameter block (see the notes in fia_params.hpp).
//
// Every message reads "fused_infer_attention_score: <argument> = <value>: <rule>". Message parts are
// only formatted when a check fails, and nothing here allocates for batches up to
// FiaParamBuffer::kInlineBatch, so re-planning a task for an update stays cheap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <ostream>

#include "npugraph/error.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention {
namespace {

constexpr const char* kOp = "fused_infer_attention_score: ";

// "[1, 2, 3]" for messages (at most 16 values).
struct ListText {
  const std::vector<std::int64_t>& values;
};
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

// "float16[1, 32, 1, 128]", or "undefined".
struct TensorText {
  const Tensor& t;
};
std::ostream& operator<<(std::ostream& os, const TensorText& x) {
  if (!x.t.defined()) return os << "undefined";
  os << dtype_name(x.t.dtype()) << '[';
  for (int i = 0; i < x.t.dim(); ++i) os << (i ? ", " : "") << x.t.shape()[i];
  return os << ']';
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t align_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// The validated shapes of a call (everything the plan and check_update depend on).
struct FiaShapes {
  FiaLayout layout = FiaLayout::bsh;
  DType dtype = DType::f32;
  std::int64_t batch = 0, heads = 0, kv_heads = 0, q_seq = 0, kv_seq = 0, head_dim = 0;
};

FiaLayout parse_layout(const std::string& s) {
  if (s == "BSH") return FiaLayout::bsh;
  if (s == "BSND") return FiaLayout::bsnd;
  if (s == "BNSD") return FiaLayout::bnsd;
  NG_THROW(ArgumentError, kOp, "input_layout = \"", s,
           "\": must be BSH, BSND or BNSD (TND, NTD, NSD and the X_Y output layouts are not "
           "supported by this version)");
}

void check_tensor(const Tensor& t, const char* name) {
  NG_CHECK_ARG(t.defined(), kOp, name, " = undefined: must be a defined tensor");
}

// The element strides a layout gives a tensor as (b, n, s, d).
FiaView make_view(const Tensor& t, FiaLayout layout, std::int64_t head_dim) {
  FiaView v;
  v.data = t.data();
  const Shape& st = t.strides();
  switch (layout) {
    case FiaLayout::bnsd: v.stride[0] = st[0]; v.stride[1] = st[1]; v.stride[2] = st[2]; v.stride[3] = st[3]; break;
    case FiaLayout::bsnd: v.stride[0] = st[0]; v.stride[1] = st[2]; v.stride[2] = st[1]; v.stride[3] = st[3]; break;
    case FiaLayout::bsh: v.stride[0] = st[0]; v.stride[1] = head_dim * st[2]; v.stride[2] = st[1]; v.stride[3] = st[2]; break;
  }
  return v;
}

// Splits a query/key/value tensor of `layout` into (b, heads, s, d), checking rank and heads.
// `heads_name` names the option the head count comes from.
void split_dims(const Tensor& t, const char* name, FiaLayout layout, std::int64_t heads,
                const char* heads_name, std::int64_t dims[4]) {
  const int rank = layout == FiaLayout::bsh ? 3 : 4;
  NG_CHECK_ARG(t.dim() == rank, kOp, name, " = ", TensorText{t}, ": with input_layout ",
               layout_name(layout), " it must be ", rank, "-D ",
               layout == FiaLayout::bsh ? "[B, S, H]"
               : layout == FiaLayout::bsnd ? "[B, S, N, D]" : "[B, N, S, D]");
  for (int i = 0; i < rank; ++i)
    NG_CHECK_ARG(t.shape()[i] >= 1, kOp, name, " = ", TensorText{t},
                 ": every dimension must be >= 1");
  const Shape& s = t.shape();
  dims[0] = s[0];
  switch (layout) {
    case FiaLayout::bnsd: dims[1] = s[1]; dims[2] = s[2]; dims[3] = s[3]; break;
    case FiaLayout::bsnd: dims[1] = s[2]; dims[2] = s[1]; dims[3] = s[3]; break;
    case FiaLayout::bsh:
      NG_CHECK_ARG(s[2] % heads == 0, kOp, name, " = ", TensorText{t}, ": H = ", s[2],
                   " must be a multiple of ", heads_name, " = ", heads);
      dims[1] = heads; dims[2] = s[1]; dims[3] = s[2] / heads;
      return;
  }
  NG_CHECK_ARG(dims[1] == heads, kOp, name, " = ", TensorText{t}, ": its N dimension (",
               dims[1], ") must equal ", heads_name, " = ", heads);
}

// Checks query, key, value and the options the shapes depend on.
FiaShapes check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const FiaOptions& o) {
  FiaShapes sh;
  sh.layout = parse_layout(o.input_layout);
  NG_CHECK_ARG(o.num_heads >= 1 && o.num_heads <= 256, kOp, "num_heads = ", o.num_heads,
               ": must be in [1, 256]");
  NG_CHECK_ARG(o.num_key_value_heads >= 0 && o.num_key_value_heads <= o.num_heads, kOp,
               "num_key_value_heads = ", o.num_key_value_heads, ": must be in [0, num_heads = ",
               o.num_heads, "] (0 means num_heads)");
  sh.heads = o.num_heads;
  sh.kv_heads = o.num_key_value_heads == 0 ? o.num_heads : o.num_key_value_heads;
  NG_CHECK_ARG(sh.heads % sh.kv_heads == 0, kOp, "num_key_value_heads = ", sh.kv_heads,
               ": must divide num_heads = ", sh.heads);
  NG_CHECK_ARG(sh.heads / sh.kv_heads <= 64, kOp, "num_key_value_heads = ", sh.kv_heads,
               ": num_heads / num_key_value_heads = ", sh.heads / sh.kv_heads,
               " must be <= 64");

  check_tensor(q, "query");
  check_tensor(k, "key");
  check_tensor(v, "value");
  NG_CHECK_ARG(is_floating(q.dtype()), kOp, "query = ", TensorText{q},
               ": dtype must be float32, float16 or bfloat16");
  NG_CHECK_ARG(k.dtype() == q.dtype(), kOp, "key = ", TensorText{k}, ": dtype ",
               dtype_name(k.dtype()), " must equal the query's dtype ", dtype_name(q.dtype()),
               " (mixed dtypes are not supported by this version)");
  NG_CHECK_ARG(v.dtype() == q.dtype(), kOp, "value = ", TensorText{v}, ": dtype ",
               dtype_name(v.dtype()), " must equal the query's dtype ", dtype_name(q.dtype()),
               " (mixed dtypes are not supported by this version)");
  sh.dtype = q.dtype();
  NG_CHECK_ARG(k.device() == q.device(), kOp, "key = ", TensorText{k}, ": must be on the query's device ",
               q.device().str(), ", not ", k.device().str());
  NG_CHECK_ARG(v.device() == q.device(), kOp, "value = ", TensorText{v}, ": must be on the query's device ",
               q.device().str(), ", not ", v.device().str());

  std::int64_t qd[4], kd[4];
  split_dims(q, "query", sh.layout, sh.heads, "num_heads", qd);
  sh.batch = qd[0];
  sh.q_seq = qd[2];
  sh.head_dim = qd[3];
  NG_CHECK_ARG(sh.head_dim <= 512, kOp, "query = ", TensorText{q}, ": head dim D = ", sh.head_dim,
               " must be <= 512");
  split_dims(k, "key", sh.layout, sh.kv_heads, "num_key_value_heads", kd);
  NG_CHECK_ARG(kd[0] == sh.batch, kOp, "key = ", TensorText{k}, ": its B dimension (", kd[0],
               ") must equal the query's (", sh.batch, ")");
  NG_CHECK_ARG(kd[3] == sh.head_dim, kOp, "key = ", TensorText{k}, ": its head dim D = ", kd[3],
               " must equal the query's (", sh.head_dim, ")");
  sh.kv_seq = kd[2];
  NG_CHECK_ARG(v.shape() == k.shape(), kOp, "value = ", TensorText{v},
               ": must have the key's shape ", k.shape().str());
  return sh;
}

// Rejects what this version does not do yet; returns whether the call is a decode.
bool check_modes(const FiaShapes& sh, const FiaOptions& o) {
  const bool decode = sh.q_seq == 1;
  NG_CHECK_ARG(o.sparse_mode >= 0 && o.sparse_mode <= 4, kOp, "sparse_mode = ", o.sparse_mode,
               ": must be in [0, 4]");
  NG_CHECK_ARG(decode || o.sparse_mode == 0, kOp, "sparse_mode = ", o.sparse_mode,
               ": not supported by this version (only 0, pre/next tokens without a mask; "
               "attention masks come in a later version)");
  NG_CHECK_ARG(o.inner_precise == 0, kOp, "inner_precise = ", o.inner_precise,
               ": not supported by this version (must be 0; it always computes in float32)");
  NG_CHECK_ARG(o.block_size == 0, kOp, "block_size = ", o.block_size,
               ": not supported by this version (must be 0: paged KV comes in a later version)");
  return decode;
}

// Resolves actual lengths into dst[0, batch): empty = `full`, one value broadcasts, >= batch values
// use the first `batch`. `bound` < 0: values are not bounded (decode).
void resolve_lengths(const std::vector<std::int64_t>& values, const char* name, const char* dim,
                     std::int64_t batch, std::int64_t full, std::int64_t bound, std::int64_t* dst) {
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
    NG_CHECK_ARG(bound < 0 || x <= bound, kOp, name, "[", b, "] = ", x,
                 ": must be <= the ", dim, " S dimension (", bound, ")");
    dst[b] = x;
  }
  if (n == 1) std::fill(dst + 1, dst + batch, dst[0]);
}

struct ByteRange {
  std::uintptr_t lo = 0, hi = 0;  // [lo, hi)
};
ByteRange byte_range(const Tensor& t) {
  const auto base = reinterpret_cast<std::uintptr_t>(t.data());
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < t.dim(); ++i) {
    const std::int64_t span = (t.shape()[i] - 1) * t.strides()[i];
    (span < 0 ? lo : hi) += span;
  }
  const auto es = static_cast<std::int64_t>(t.element_size());
  return {base + static_cast<std::uintptr_t>(lo * es), base + static_cast<std::uintptr_t>((hi + 1) * es)};
}

void check_no_overlap(const Tensor& out, const char* out_name, const Tensor& other,
                      const char* other_name) {
  const ByteRange a = byte_range(out), b = byte_range(other);
  NG_CHECK_ARG(a.hi <= b.lo || b.hi <= a.lo, kOp, out_name, " = ", TensorText{out},
               ": must not overlap ", other_name);
}

void check_aligned(const Tensor& t, const char* name) {
  NG_CHECK_ARG(reinterpret_cast<std::uintptr_t>(t.data()) % t.element_size() == 0, kOp, name,
               " = ", TensorText{t}, ": its data address must be aligned to its element size (",
               t.element_size(), " bytes)");
}

void check_output(const Tensor& t, const char* name, const Tensor& q) {
  check_tensor(t, name);
  NG_CHECK_ARG(t.device() == q.device(), kOp, name, " = ", TensorText{t},
               ": must be on the query's device ", q.device().str(), ", not ", t.device().str());
  NG_CHECK_ARG(t.is_contiguous(), kOp, name, " = ", TensorText{t}, ": must be contiguous");
}

}  // namespace

const char* layout_name(FiaLayout layout) {
  switch (layout) {
    case FiaLayout::bsh: return "BSH";
    case FiaLayout::bsnd: return "BSND";
    case FiaLayout::bnsd: return "BNSD";
  }
  return "?";
}

FiaWorkspacePlan plan_workspace(std::int64_t batch, std::int64_t heads, std::int64_t q_seq,
                                std::int64_t kv_seq, std::int64_t head_dim) {
  FiaWorkspacePlan p;
  p.rows = batch * heads * q_seq;
  // Work per row: a dot product and an axpy of length D for each of up to kv_seq columns.
  const std::int64_t row_flops = std::max<std::int64_t>(1, 4 * kv_seq * head_dim);
  const std::int64_t min_grain = ceil_div(kMinChunkFlops, row_flops);
  p.grain = std::min(p.rows, std::max(ceil_div(p.rows, kMaxChunks), min_grain));
  p.chunks = ceil_div(p.rows, p.grain);
  constexpr std::int64_t f = sizeof(float);
  p.q_offset = 0;
  p.acc_offset = p.q_offset + align_up(head_dim * f, kWorkspaceAlign);
  p.score_offset = p.acc_offset + align_up(head_dim * f, kWorkspaceAlign);
  p.chunk_bytes = p.score_offset + align_up(kKvBlock * f, kWorkspaceAlign);
  p.total_bytes = p.chunks * p.chunk_bytes + kWorkspaceAlign;
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

void build_fia_params(const Tensor& query, const Tensor& key, const Tensor& value,
                      const FiaOptions& options, const Tensor& workspace,
                      const Tensor& attention_out, const Tensor& softmax_lse, float* lse_zero,
                      FiaParamBuffer& buffer) {
  const FiaShapes sh = check_shapes(query, key, value, options);
  const bool decode = check_modes(sh, options);
  const float scale = static_cast<float>(options.scale);
  NG_CHECK_ARG(std::isfinite(scale), kOp, "scale = ", options.scale,
               ": must be finite in float32");

  // Outputs.
  check_output(attention_out, "attention_out", query);
  NG_CHECK_ARG(attention_out.dtype() == sh.dtype, kOp, "attention_out = ",
               TensorText{attention_out}, ": must have the query's dtype ", dtype_name(sh.dtype));
  NG_CHECK_ARG(attention_out.shape() == query.shape(), kOp, "attention_out = ",
               TensorText{attention_out}, ": must have the query's shape ", query.shape().str());
  check_tensor(softmax_lse, "softmax_lse");
  if (options.softmax_lse_flag) {
    check_output(softmax_lse, "softmax_lse", query);
    const Shape want{sh.batch, sh.heads, sh.q_seq, 1};
    NG_CHECK_ARG(softmax_lse.dtype() == DType::f32 && softmax_lse.shape() == want, kOp,
                 "softmax_lse = ", TensorText{softmax_lse},
                 ": with softmax_lse_flag it must be float32 of shape [B, N, Sq, 1] = ",
                 want.str());
  }
  check_output(workspace, "workspace", query);
  NG_CHECK_ARG(workspace.dtype() == DType::u8, kOp, "workspace = ", TensorText{workspace},
               ": must be a uint8 tensor");
  const FiaWorkspacePlan plan =
      plan_workspace(sh.batch, sh.heads, sh.q_seq, sh.kv_seq, sh.head_dim);
  NG_CHECK_ARG(static_cast<std::int64_t>(workspace.nbytes()) >= plan.total_bytes, kOp,
               "workspace = ", TensorText{workspace}, ": workspace has ", workspace.nbytes(),
               " bytes; these arguments need ", plan.total_bytes,
               " (size it with fia_max_workspace)");
  check_aligned(query, "query");
  check_aligned(key, "key");
  check_aligned(value, "value");
  check_aligned(attention_out, "attention_out");
  check_no_overlap(attention_out, "attention_out", query, "query");
  check_no_overlap(attention_out, "attention_out", key, "key");
  check_no_overlap(attention_out, "attention_out", value, "value");
  if (options.softmax_lse_flag) {
    check_aligned(softmax_lse, "softmax_lse");
    check_no_overlap(softmax_lse, "softmax_lse", query, "query");
    check_no_overlap(softmax_lse, "softmax_lse", key, "key");
    check_no_overlap(softmax_lse, "softmax_lse", value, "value");
    check_no_overlap(softmax_lse, "softmax_lse", attention_out, "attention_out");
  }
  check_no_overlap(workspace, "workspace", query, "query");
  check_no_overlap(workspace, "workspace", key, "key");
  check_no_overlap(workspace, "workspace", value, "value");
  check_no_overlap(workspace, "workspace", attention_out, "attention_out");
  if (options.softmax_lse_flag) check_no_overlap(workspace, "workspace", softmax_lse, "softmax_lse");

  // The block.
  FiaParams& p = buffer.reset(sh.batch);
  p.q = make_view(query, sh.layout, sh.head_dim);
  p.k = make_view(key, sh.layout, sh.head_dim);
  p.v = make_view(value, sh.layout, sh.head_dim);
  p.out = make_view(attention_out, sh.layout, sh.head_dim);
  p.lse = options.softmax_lse_flag ? softmax_lse.data_ptr<float>() : nullptr;
  p.lse_zero = options.softmax_lse_flag ? nullptr : lse_zero;
  p.workspace = static_cast<std::byte*>(workspace.data());
  p.workspace_bytes = static_cast<std::int64_t>(workspace.nbytes());
  p.batch = sh.batch;
  p.heads = sh.heads;
  p.kv_heads = sh.kv_heads;
  p.q_seq = sh.q_seq;
  p.kv_seq = sh.kv_seq;
  p.head_dim = sh.head_dim;
  p.plan = plan;
  p.scale = scale;
  p.dtype = sh.dtype;
  p.layout = sh.layout;
  p.lse_flag = options.softmax_lse_flag ? 1 : 0;
  // Lengths (Note [FIA decode]).
  resolve_lengths(options.actual_seq_lengths, "actual_seq_lengths", "query's", sh.batch,
                  sh.q_seq, decode ? -1 : sh.q_seq, buffer.actual_q());
  if (decode) std::fill(buffer.actual_q(), buffer.actual_q() + sh.batch, std::int64_t{1});
  resolve_lengths(options.actual_seq_lengths_kv, "actual_seq_lengths_kv", "key's", sh.batch,
                  sh.kv_seq, sh.kv_seq, buffer.actual_kv());
  p.pre_tokens = decode ? kBandLimit : std::clamp(options.pre_tokens, -kBandLimit, kBandLimit);
  p.next_tokens = decode ? kBandLimit : std::clamp(options.next_tokens, -kBandLimit, kBandLimit);
}

FiaWorkspacePlan plan_workspace_for(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const FiaOptions& options) {
  const FiaShapes sh = check_shapes(query, key, value, options);
  return plan_workspace(sh.batch, sh.heads, sh.q_seq, sh.kv_seq, sh.head_dim);
}

}  // namespace npugraph::ops::attention
