// FIA public entry points: the eager form, the `.out` form, the workspace and shape functions and
// the kernel identity. Checks and planning live in fia_plan.cpp and the files it names, the kernel
// in fia_kernel.cpp, the update check in fia_update.cpp.
#include "npugraph/ops/fia.hpp"

#include <array>

#include "npugraph/error.hpp"
#include "npugraph/stream.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops {
namespace {

const KernelDef kFiaKernel{
    .name = "fused_infer_attention_score",
    .cpu = &attention::fia_cpu_kernel,
    .check_update = &attention::fia_check_update,
};

// Every tensor the kernel may read or write: the launch keeps them alive (Note [Keep-alive]).
struct FiaUses {
  std::array<const Tensor*, 28> tensors;
  TensorUses span() const { return tensors; }
};

FiaUses fia_uses(const Tensor& q, const Tensor& k, const Tensor& v, const FiaOptions& o,
                 const Tensor& ws, const Tensor& out, const Tensor& lse) {
  return {{&q, &k, &v, &ws, &out, &lse, &o.pse_shift, &o.atten_mask, &o.dequant_scale1,
           &o.quant_scale1, &o.dequant_scale2, &o.quant_scale2, &o.quant_offset2, &o.antiquant_scale,
           &o.antiquant_offset, &o.block_table, &o.query_padding_size, &o.kv_padding_size,
           &o.key_antiquant_scale, &o.key_antiquant_offset, &o.value_antiquant_scale,
           &o.value_antiquant_offset, &o.key_shared_prefix, &o.value_shared_prefix, &o.query_rope,
           &o.key_rope, &o.key_rope_antiquant_scale, nullptr}};
}

}  // namespace

const KernelDef& fia_kernel() { return kFiaKernel; }

void fused_infer_attention_score_out(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const FiaOptions& options, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse) {
  const Stream stream = current_stream(query.device());
  try {
    attention::FiaParamBuffer block;
    attention::build_fia_params(query, key, value, options, workspace, attention_out, softmax_lse,
                                nullptr, block);
    launch(stream, kFiaKernel, block.bytes(),
           fia_uses(query, key, value, options, workspace, attention_out, softmax_lse).span());
  } catch (...) {  // a try block costs nothing on the update path (every FIA task of every step)
    abandon_update_on_error(stream);
    throw;
  }
}

FiaResult fused_infer_attention_score(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const FiaOptions& options) {
  const Stream stream = current_stream(query.device());
  if (stream.is_updating()) [[unlikely]] {
    // Its workspace and outputs are temporaries freed when it returns: bound to a captured task, every
    // later replay would write memory the allocator hands out again.
    abandon_update_on_error(stream);
    NG_THROW(StateError, "fused_infer_attention_score on ", stream.str(), ": the allocating form cannot "
             "be bound in a task update (its workspace and outputs would be freed when it returns, "
             "while every replay keeps writing them); inside an update issue the .out form "
             "(fused_infer_attention_score_out / npu_fused_infer_attention_score.out) with the "
             "workspace and outputs the task was captured with (the update is abandoned: nothing was "
             "installed)");
  }
  const UpdateErrorGuard guard(stream);
  // Checks the shapes before allocating anything; build_fia_params checks the rest.
  const attention::FiaOutputInfo info = attention::plan_outputs(query, key, value, options);
  const Device device = query.device();
  FiaResult r;
  r.attention_out = empty(info.out_shape, info.out_dtype, device);
  r.softmax_lse = empty(options.softmax_lse_flag ? info.lse_shape : Shape{1}, DType::f32, device);
  const Tensor workspace = empty({info.plan.total_bytes}, DType::u8, device);
  attention::FiaParamBuffer block;
  attention::build_fia_params(query, key, value, options, workspace, r.attention_out,
                              r.softmax_lse,
                              options.softmax_lse_flag ? nullptr : r.softmax_lse.data_ptr<float>(),
                              block);
  launch(stream, kFiaKernel, block.bytes(),
         fia_uses(query, key, value, options, workspace, r.attention_out, r.softmax_lse).span());
  return r;
}

Tensor fia_max_workspace(const Tensor& query, const Tensor& key, const Tensor& value,
                         const FiaOptions& options) {
  return empty({fia_workspace_bytes(query, key, value, options)}, DType::u8, query.device());
}

std::int64_t fia_workspace_bytes(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const FiaOptions& options) {
  return attention::plan_outputs(query, key, value, options).plan.total_bytes;
}

Shape fia_output_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                       const FiaOptions& options) {
  return attention::plan_outputs(query, key, value, options).out_shape;
}

Shape fia_lse_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                    const FiaOptions& options) {
  return attention::plan_outputs(query, key, value, options).lse_shape;
}

}  // namespace npugraph::ops
