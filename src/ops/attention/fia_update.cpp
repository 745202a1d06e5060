// FIA under task update: which new parameter blocks may replace a captured one (DESIGN §3.5, §3.6).
// Host values may change; anything the shapes, dtypes, layout or flags decide (FiaShapeKey) may not,
// and the message names the first difference.
#include <cstddef>
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

namespace {

// The fields of a block's header the check reads, copied out (the storage need not be aligned).
// Copying only these keeps the check cheap: it runs for every task of every update.
template <class T>
T field_at(std::span<const std::byte> block, std::size_t offset) {
  T v;
  std::memcpy(&v, block.data() + offset, sizeof v);
  return v;
}

bool is_fia_block(std::span<const std::byte> b) {
  if (b.size() < sizeof(FiaParams)) return false;
  return field_at<std::uint32_t>(b, offsetof(FiaParams, magic)) == kFiaMagic &&
         field_at<std::uint32_t>(b, offsetof(FiaParams, header_bytes)) == sizeof(FiaParams) &&
         field_at<std::int64_t>(b, offsetof(FiaParams, key) + offsetof(FiaShapeKey, batch)) >= 1 &&
         b.size() == fia_block_bytes(field_at<std::int64_t>(
                         b, offsetof(FiaParams, key) + offsetof(FiaShapeKey, batch)));
}

// Explains how two different keys differ (the rare path: copies them out).
std::string key_difference(std::span<const std::byte> captured, std::span<const std::byte> updated) {
  const auto x = field_at<FiaShapeKey>(captured, offsetof(FiaParams, key));
  const auto y = field_at<FiaShapeKey>(updated, offsetof(FiaParams, key));
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
}  // namespace

std::string fia_check_update(std::span<const std::byte> captured,
                             std::span<const std::byte> updated) {
  if (!is_fia_block(captured))
    return "the captured parameter block is not a fused_infer_attention_score block";
  if (!is_fia_block(updated))
    return "the new parameter block is not a fused_infer_attention_score block";
  constexpr std::size_t kKey = offsetof(FiaParams, key), kPlan = offsetof(FiaParams, plan);
  if (std::memcmp(captured.data() + kKey, updated.data() + kKey, sizeof(FiaShapeKey)) != 0)
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
