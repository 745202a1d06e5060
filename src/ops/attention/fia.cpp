// FIA public entry points: the eager form, the `.out` form, the workspace functions and the kernel
// identity. Checks and planning live in fia_plan.cpp, the kernel in fia_kernel.cpp.
#include "npugraph/ops/fia.hpp"

#include "npugraph/stream.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops {
namespace {

const KernelDef kFiaKernel{
    .name = "fused_infer_attention_score",
    .cpu = &attention::fia_cpu_kernel,
    .check_update = &attention::fia_check_update,
};

}  // namespace

const KernelDef& fia_kernel() { return kFiaKernel; }

void fused_infer_attention_score_out(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const FiaOptions& options, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse) {
  attention::FiaParamBuffer block;
  attention::build_fia_params(query, key, value, options, workspace, attention_out, softmax_lse,
                              nullptr, block);
  launch(current_stream(query.device()), kFiaKernel, block.bytes());
}

FiaResult fused_infer_attention_score(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const FiaOptions& options) {
  // Checks the shapes before allocating anything; build_fia_params checks the rest.
  const attention::FiaWorkspacePlan plan = attention::plan_workspace_for(query, key, value, options);
  const Device device = query.device();
  FiaResult r;
  r.attention_out = empty(query.shape(), query.dtype(), device);
  if (options.softmax_lse_flag) {
    // (B, N, Sq, 1): the query's B and Sq in every layout, N = num_heads.
    const std::int64_t q_seq = options.input_layout == "BNSD" ? query.size(2) : query.size(1);
    r.softmax_lse = empty({query.size(0), options.num_heads, q_seq, 1}, DType::f32, device);
  } else {
    r.softmax_lse = empty({1}, DType::f32, device);
  }
  const Tensor workspace = empty({plan.total_bytes}, DType::u8, device);
  attention::FiaParamBuffer block;
  attention::build_fia_params(query, key, value, options, workspace, r.attention_out,
                              r.softmax_lse,
                              options.softmax_lse_flag ? nullptr : r.softmax_lse.data_ptr<float>(),
                              block);
  launch(current_stream(device), kFiaKernel, block.bytes());
  return r;
}

Tensor fia_max_workspace(const Tensor& query, const Tensor& key, const Tensor& value,
                         const FiaOptions& options) {
  return empty({fia_workspace_bytes(query, key, value, options)}, DType::u8, query.device());
}

std::int64_t fia_workspace_bytes(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const FiaOptions& options) {
  return attention::plan_workspace_for(query, key, value, options).total_bytes;
}

}  // namespace npugraph::ops
