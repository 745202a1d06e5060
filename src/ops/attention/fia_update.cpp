// FIA under task update (docs/semantics.md §5): which new parameter blocks may replace a captured
// one (docs/fia.md, "What an update may change"; the check_update contract: docs/adding_an_op.md).
// Host values may change; anything the plan decided from the shapes, dtypes, layout or flags (the
// FiaShapeKey and the workspace plan it wrote into the block) may not, and the message names the
// first difference as "<argument> is not updatable (captured with X, updated with Y)".
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "npugraph/error.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention {
namespace {

std::string layout_text(const FiaShapeKey& k) {
  const auto in = static_cast<FiaLayout>(k.layout_in), out = static_cast<FiaLayout>(k.layout_out);
  std::string s = layout_name(in);
  if (out != in) s += std::string("_") + layout_name(out);
  return s;
}

struct NamedField {
  const char* name;
  std::int64_t FiaShapeKey::*field;
};

constexpr NamedField kOptions[] = {
    {"sparse_mode", &FiaShapeKey::sparse_mode},
    {"inner_precise", &FiaShapeKey::inner_precise},
    {"block_size", &FiaShapeKey::block_size},
    {"antiquant_mode", &FiaShapeKey::antiquant_mode},
    {"key_antiquant_mode", &FiaShapeKey::key_antiquant_mode},
    {"value_antiquant_mode", &FiaShapeKey::value_antiquant_mode},
};

// The fields of a block's header the check reads, copied out (the storage need not be aligned).
// Copying only these keeps the check cheap: it runs for every task of every update.
template <class T>
T field_at(std::span<const std::byte> block, std::size_t offset) {
  T v;
  std::memcpy(&v, block.data() + offset, sizeof v);
  return v;
}

template <class A, class B>
std::string not_updatable(const char* what, const A& captured, const B& updated) {
  return detail::cat(what, " is not updatable (captured with ", captured, ", updated with ",
                     updated, ")");
}

const char* bool_text(std::int64_t x) { return x ? "true" : "false"; }

using Dims = FiaTensorDims[static_cast<int>(FiaArg::count)];

// Explains how two different keys or dimension trailers differ (the rare path: copies them out).
std::string key_difference(std::span<const std::byte> captured, std::span<const std::byte> updated) {
  const auto x = field_at<FiaShapeKey>(captured, offsetof(FiaParams, key));
  const auto y = field_at<FiaShapeKey>(updated, offsetof(FiaParams, key));
  if (x.layout_in != y.layout_in || x.layout_out != y.layout_out)
    return not_updatable("input_layout", layout_text(x), layout_text(y));
  if (x.heads != y.heads) return not_updatable("num_heads", x.heads, y.heads);
  if (x.kv_heads != y.kv_heads) return not_updatable("num_key_value_heads", x.kv_heads, y.kv_heads);
  Dims dx, dy;
  fia_block_dims(captured, dx);
  fia_block_dims(updated, dy);
  for (int i = 0; i < static_cast<int>(FiaArg::count); ++i)
    if (std::memcmp(&x.sig[i], &y.sig[i], sizeof(FiaTensorSig)) != 0 ||
        (x.sig[i].rank >= 0 && std::memcmp(&dx[i], &dy[i], sizeof(FiaTensorDims)) != 0))
      return not_updatable(arg_name(static_cast<FiaArg>(i)), sig_text(x.sig[i], dx[i]),
                           sig_text(y.sig[i], dy[i]));
  for (const NamedField& f : kOptions)
    if (x.*f.field != y.*f.field) return not_updatable(f.name, x.*f.field, y.*f.field);
  if (x.lse_flag != y.lse_flag)
    return not_updatable("softmax_lse_flag", bool_text(x.lse_flag), bool_text(y.lse_flag));
  if (x.batch != y.batch)
    return not_updatable(detail::cat("the batch count (the number of actual_seq_lengths with "
                                     "input_layout ", layout_text(x), ")").c_str(),
                         x.batch, y.batch);
  if (x.out_int8 != y.out_int8)
    return not_updatable("the output dtype (int8 with quant_scale2)",
                         x.out_int8 ? "int8" : "the query's", y.out_int8 ? "int8" : "the query's");
  return "the shapes are not updatable";  // a derived field; unreachable when the named ones are equal
}

}  // namespace

std::string fia_check_update(std::span<const std::byte> captured,
                             std::span<const std::byte> updated) {
  if (fia_block_batch(captured) == 0)
    return "the captured parameter block is not a fused_infer_attention_score block";
  if (fia_block_batch(updated) == 0)
    return "the new parameter block is not a fused_infer_attention_score block";
  // Only a re-planned update leaves the dimensions out, and it vouches for its block (Note [FIA
  // re-plan]): a block without them reaching the check was not built for this task.
  if (!fia_block_has_dims(captured) || !fia_block_has_dims(updated))
    return "the parameter block has no tensor dimensions to compare (only the update re-planned from "
           "the task's own captured plan may leave them out)";
  constexpr std::size_t kKey = offsetof(FiaParams, key), kPlan = offsetof(FiaParams, plan);
  if (std::memcmp(captured.data() + kKey, updated.data() + kKey, sizeof(FiaShapeKey)) != 0 ||
      std::memcmp(captured.data() + captured.size() - kFiaDimsBytes,
                  updated.data() + updated.size() - kFiaDimsBytes, kFiaDimsBytes) != 0)
    return key_difference(captured, updated);
  // Equal keys give equal plans (plan_workspace is a pure function of them); checked anyway so that
  // a replay can never index past the captured workspace.
  if (std::memcmp(captured.data() + kPlan, updated.data() + kPlan, sizeof(FiaWorkspacePlan)) != 0)
    return "the workspace plan changed (size the workspace with fia_max_workspace)";
  const auto plan = field_at<FiaWorkspacePlan>(updated, kPlan);
  const auto workspace_bytes = field_at<std::int64_t>(updated, offsetof(FiaParams, workspace_bytes));
  if (workspace_bytes < plan.total_bytes)
    return detail::cat("the new workspace has ", workspace_bytes, " bytes; the captured plan needs ",
                       plan.total_bytes, " (size it with fia_max_workspace)");
  return {};
}

}  // namespace npugraph::ops::attention

namespace npugraph::ops::attention {
namespace {

// "[3, 7]", or the first 8 values and how many more.
std::string values_text(const std::int64_t* v, std::int64_t n) {
  std::string s = "[";
  const std::int64_t shown = n < 8 ? n : 8;
  for (std::int64_t i = 0; i < shown; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (shown < n) s += ", ... " + std::to_string(n - shown) + " more";
  return s + "]";
}

}  // namespace

std::string fia_describe(std::span<const std::byte> block, std::span<const std::byte> captured) {
  const std::int64_t batch = fia_block_batch(block);
  if (batch == 0) return "not a fused_infer_attention_score block";
  const auto p = field_at<FiaParams>(block, 0);
  const FiaShapeKey& k = p.key;
  // The dimensions: the block's own, else the captured block's (an update cannot change them).
  Dims dims = {};
  std::span<const std::byte> with_dims = block;
  if (!fia_block_has_dims(block)) with_dims = captured;
  const bool known = fia_block_batch(with_dims) != 0 && fia_block_has_dims(with_dims);
  if (known) fia_block_dims(with_dims, dims);
  std::string s;
  for (int a = 0; a < static_cast<int>(FiaArg::count); ++a)
    if (k.sig[a].rank >= 0)
      s += detail::cat(s.empty() ? "" : "\n", arg_name(static_cast<FiaArg>(a)), " ",
                       known ? sig_text(k.sig[a], dims[a])
                             : detail::cat(dtype_name(k.sig[a].dtype), " (", int{k.sig[a].rank}, "-d)"));
  std::vector<std::int64_t> tail(static_cast<std::size_t>(4 * batch));
  std::memcpy(tail.data(), block.data() + sizeof(FiaParams), tail.size() * sizeof(std::int64_t));
  s += detail::cat("\ninput_layout ", layout_text(k), ", num_heads ", k.heads, ", num_key_value_heads ",
                   k.kv_heads, ", sparse_mode ", k.sparse_mode, k.paged() ? detail::cat(", block_size ", k.block_size) : "");
  // The host values an update may change, as this block holds them (resolved).
  s += detail::cat("\nscale ", p.scale, ", actual_seq_lengths ", values_text(tail.data(), batch),
                   ", actual_seq_lengths_kv ", values_text(tail.data() + batch, batch));
  if (k.decode == 0)
    s += detail::cat(", pre_tokens ", p.pre_tokens, ", next_tokens ", p.next_tokens);
  if (k.of(FiaArg::key_shared_prefix).rank >= 0) s += detail::cat(", actual_shared_prefix_len ", p.prefix_len);
  return s;
}

}  // namespace npugraph::ops::attention
