// FIA under task update: which new parameter blocks may replace a captured one (DESIGN §3.5, §3.6).
// Host values may change; anything the shapes, dtypes, layout or flags decide (FiaShapeKey) may not,
// and the message names the first difference.
#include <cstring>
#include <string>

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

}  // namespace

std::string fia_check_update(std::span<const std::byte> captured,
                             std::span<const std::byte> updated) {
  FiaParams a, b;
  if (!read_fia_header(captured.data(), captured.size(), a))
    return "the captured parameter block is not a fused_infer_attention_score block";
  if (!read_fia_header(updated.data(), updated.size(), b))
    return "the new parameter block is not a fused_infer_attention_score block";
  const FiaShapeKey& x = a.key;
  const FiaShapeKey& y = b.key;
  if (std::memcmp(&x, &y, sizeof(FiaShapeKey)) != 0) {
    if (x.layout_in != y.layout_in || x.layout_out != y.layout_out)
      return detail::cat("input_layout changed from ", layout_text(x), " to ", layout_text(y));
    if (x.heads != y.heads) return detail::cat("num_heads changed from ", x.heads, " to ", y.heads);
    if (x.kv_heads != y.kv_heads)
      return detail::cat("num_key_value_heads changed from ", x.kv_heads, " to ", y.kv_heads);
    for (int i = 0; i < static_cast<int>(FiaArg::count); ++i)
      if (std::memcmp(&x.sig[i], &y.sig[i], sizeof(FiaTensorSig)) != 0)
        return detail::cat(arg_name(static_cast<FiaArg>(i)), " changed from ", sig_text(x.sig[i]),
                           " to ", sig_text(y.sig[i]));
    for (const NamedField& f : kOptions)
      if (x.*f.field != y.*f.field)
        return detail::cat(f.name, " changed from ", x.*f.field, " to ", y.*f.field);
    if (x.lse_flag != y.lse_flag)
      return detail::cat("softmax_lse_flag changed from ", x.lse_flag ? "true" : "false", " to ",
                         y.lse_flag ? "true" : "false");
    if (x.batch != y.batch)
      return detail::cat("the batch count (the number of actual_seq_lengths with input_layout ",
                         layout_text(x), ") changed from ", x.batch, " to ", y.batch);
    if (x.out_int8 != y.out_int8)
      return "the output dtype changed (quant_scale2 given in one call only)";
    return "the shapes changed";  // a derived field; unreachable when the named ones are equal
  }
  // Equal keys give equal plans (plan_workspace is a pure function of them); checked anyway so that
  // a replay can never index past the captured workspace.
  if (std::memcmp(&a.plan, &b.plan, sizeof(FiaWorkspacePlan)) != 0)
    return "the workspace plan changed (size the workspace with fia_max_workspace)";
  if (b.workspace_bytes < b.plan.total_bytes)
    return detail::cat("the new workspace has ", b.workspace_bytes, " bytes; the captured plan needs ",
                       b.plan.total_bytes, " (size it with fia_max_workspace)");
  return {};
}

}  // namespace npugraph::ops::attention
