// FIA's entry points (npugraph/ops/fia.hpp): each one plans the call once (fia_plan.hpp), builds
// the parameter block from the plan (fia_block.cpp) and launches it with the tensors it uses; the
// queries read the plan only. The kernel entry is in fia_launch.cpp, the update check in fia_update.cpp.
#include "npugraph/ops/fia.hpp"

#include <array>
#include <memory>

#include "npugraph/error.hpp"
#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/attention/fia_plan.hpp"

namespace npugraph::ops {
namespace {

namespace att = attention;

// The CUDA slot is filled when the library is built with the CUDA backend (cmake/Cuda.cmake).
#if NPUGRAPH_HAVE_CUDA
#define NG_CUDA_SLOT(f) (f)
#else
#define NG_CUDA_SLOT(f) nullptr
#endif

const KernelDef kFiaKernel{
    .name = "fused_infer_attention_score",
    .cpu = &att::fia_cpu_kernel,
    .cuda = NG_CUDA_SLOT(&att::fia_cuda),
    .check_update = &att::fia_check_update,
    .describe = &att::fia_describe,
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
           &o.key_rope, &o.key_rope_antiquant_scale, &o.learnable_sink}};
}

// The plan of a call that launches nothing (the queries): into a scratch header.
template <class F>
auto with_plan(const Tensor& q, const Tensor& k, const Tensor& v, const FiaOptions& o, F&& f) {
  att::FiaParams scratch;
  att::FiaPlan plan(q, k, v, o, scratch);
  att::plan_fia(plan);
  return f(static_cast<const att::FiaPlan&>(plan));
}

}  // namespace

// The public plan: copies of the arguments, the block the plan was built into, and the plan.
struct FiaPlan::State {
  State(const Tensor& query, const Tensor& key, const Tensor& value, const FiaOptions& options)
      : q(query), k(key), v(value), o(options),
        plan(q, k, v, o, block.start()) {
    att::plan_fia(plan);
  }
  Tensor q, k, v;
  FiaOptions o;
  att::FiaParamBuffer block;
  att::FiaPlan plan;  // refers to the members above (State never moves: it lives on the heap)
};

FiaPlan::FiaPlan(std::shared_ptr<const State> state) : state_(std::move(state)) {}
FiaPlan::FiaPlan(FiaPlan&&) noexcept = default;
FiaPlan& FiaPlan::operator=(FiaPlan&&) noexcept = default;
FiaPlan::~FiaPlan() = default;
const Shape& FiaPlan::out_shape() const { return state_->plan.out_shape; }
DType FiaPlan::out_dtype() const { return state_->plan.out_dtype; }
const Shape& FiaPlan::lse_shape() const { return state_->plan.lse_shape; }
std::int64_t FiaPlan::workspace_bytes() const { return state_->plan.workspace().total_bytes; }

FiaPlan fia_plan(const Tensor& query, const Tensor& key, const Tensor& value,
                 const FiaOptions& options) {
  return FiaPlan(std::make_shared<const FiaPlan::State>(query, key, value, options));
}

const KernelDef& fia_kernel() { return kFiaKernel; }

namespace {

// What a captured `.out` call leaves with its task (Note [FIA re-plan]): the plan, the outputs and
// the workspace, and the block header as it was before the host values were resolved.
struct FiaCapture {
  std::shared_ptr<const FiaPlan::State> plan;
  Tensor workspace, attention_out, softmax_lse;
  att::FiaParams bound;
};

// Builds the block of a call planned as `plan` into `block` (whose header holds the plan's static
// part) and launches it; a capture keeps the plan (`state`) with its task.
void launch_planned(const Stream& stream, const att::FiaPlan& plan,
                    std::shared_ptr<const FiaPlan::State> state, const Tensor& workspace,
                    const Tensor& attention_out, const Tensor& softmax_lse, att::FiaParamBuffer& block,
                    const FiaUses& uses) {
  att::check_scale(plan);
  att::bind_outputs(plan, workspace, attention_out, softmax_lse, block.header());
  std::shared_ptr<const FiaCapture> capture;
  if (state && stream.is_capturing())
    capture = std::make_shared<const FiaCapture>(
        FiaCapture{std::move(state), workspace, attention_out, softmax_lse, block.header()});
  att::resolve_host_values(plan, block);
  block.attach_dims(plan.dims);
  launch(stream, kFiaKernel, block.bytes(), uses.span(), std::move(capture));
}

// Launches a block re-planned from capture `c` (replan_block). Built from the captured plan, it
// vouches for the static part when passed back (check_update skipped, Note [Capture state]);
// bind_outputs checked any other workspace against the plan. With the captured outputs every tensor
// is the captured launch's: no `uses` (the task keeps the captured ones alive).
void launch_replanned_block(const Stream& stream, const FiaCapture& c,
                            att::FiaParamBuffer& block, TensorUses uses, bool same_outputs) {
  const std::shared_ptr<const void> vouch(std::shared_ptr<const void>(), &c);
  launch(stream, kFiaKernel, block.bytes(), uses, vouch);
  att::FiaReplanCounts& counts = att::fia_replan_counts();
  ++counts.plan;
  counts.outputs += same_outputs;
}

// An update re-issuing a captured call with its tensors and static options (Note [FIA re-plan]):
// false when it is not one.
bool launch_replanned(const Stream& stream, const FiaCapture& c, const Tensor& query,
                      const Tensor& key, const Tensor& value, const FiaOptions& options,
                      const Tensor& workspace, const Tensor& attention_out,
                      const Tensor& softmax_lse) {
  const att::FiaPlan& captured = c.plan->plan;
  if (!att::same_plan_inputs(captured, query, key, value, options)) return false;
  const bool same_outputs = att::same_tensor(workspace, c.workspace) &&
                            att::same_tensor(attention_out, c.attention_out) &&
                            att::same_tensor(softmax_lse, c.softmax_lse);
  att::FiaParamBuffer block;
  att::replan_block(captured, same_outputs ? &c.bound : nullptr, FiaHostValues::of(options),
                    workspace, attention_out, softmax_lse, block);
  if (same_outputs)
    launch_replanned_block(stream, c, block, TensorUses{}, true);
  else
    launch_replanned_block(stream, c, block,
                           fia_uses(query, key, value, options, workspace, attention_out, softmax_lse).span(),
                           false);
  return true;
}

// fused_infer_attention_score_update without the abandon on error (Note [FIA host-value update]).
void update_host_values(const Stream& stream, const FiaHostValues& values) {
  const void* state = captured_state(stream, kFiaKernel);
  if (!state) [[unlikely]] {
    NG_CHECK_STATE(stream.is_updating(), "fused_infer_attention_score_update: ", stream.str(),
                   " is not updating on this thread: call it between task_update_begin and "
                   "task_update_end");
    NG_THROW(StateError, "fused_infer_attention_score_update on ", stream.str(), ": no captured "
             "call to re-issue: the group's next task is not a fused_infer_attention_score task "
             "captured with the .out form (another kernel, an eager-form capture, or no task left), or "
             "another thread began the update; re-issue it with fused_infer_attention_score_out and "
             "all of its arguments (the update is abandoned: nothing was installed)");
  }
  const auto& c = *static_cast<const FiaCapture*>(state);
  att::FiaParamBuffer block;
  att::replan_block(c.plan->plan, &c.bound, values, c.workspace, c.attention_out, c.softmax_lse,
                    block);
  launch_replanned_block(stream, c, block, TensorUses{}, /*same_outputs=*/true);
}

}  // namespace

void fused_infer_attention_score_out(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const FiaOptions& options, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse) {
  const Stream& stream = current_stream_ref(query.device());
  try {
    if (const void* c = captured_state(stream, kFiaKernel))
      if (launch_replanned(stream, *static_cast<const FiaCapture*>(c), query, key, value, options,
                           workspace, attention_out, softmax_lse))
        return;
    const FiaUses uses = fia_uses(query, key, value, options, workspace, attention_out, softmax_lse);
    att::FiaParamBuffer block;
    if (stream.is_capturing()) {  // the plan stays with the task for its updates
      auto state = std::make_shared<const FiaPlan::State>(query, key, value, options);
      block.start(state->plan.header);
      const att::FiaPlan& plan = state->plan;
      return launch_planned(stream, plan, std::move(state), workspace, attention_out, softmax_lse,
                            block, uses);
    }
    att::build_fia_params(query, key, value, options, workspace, attention_out, softmax_lse, block);
    launch(stream, kFiaKernel, block.bytes(), uses.span());
  } catch (...) {  // a try block costs nothing on the update path (every FIA task of every step)
    abandon_update_on_error(stream);
    throw;
  }
}

void fused_infer_attention_score_update(const Stream& stream, const FiaHostValues& values) {
  try {
    update_host_values(stream, values);
  } catch (...) {  // free on the path that does not throw (an UpdateErrorGuard copies the stream)
    abandon_update_on_error(stream);
    throw;
  }
}

void fused_infer_attention_score_out(const FiaPlan& plan, const Tensor& workspace,
                                     const Tensor& attention_out, const Tensor& softmax_lse) {
  const FiaPlan::State& s = *plan.state_;
  const Stream& stream = current_stream_ref(s.q.device());
  const UpdateErrorGuard guard(stream);
  att::FiaParamBuffer block;
  block.start(s.plan.header);  // the plan's static part; the plan stays reusable
  launch_planned(stream, s.plan, plan.state_, workspace, attention_out, softmax_lse, block,
                 fia_uses(s.q, s.k, s.v, s.o, workspace, attention_out, softmax_lse));
}

FiaResult fused_infer_attention_score(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const FiaOptions& options) {
  const Stream& stream = current_stream_ref(query.device());
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
  // Plans before allocating anything; the outputs and the workspace come from the plan.
  att::FiaParamBuffer block;
  att::FiaPlan plan(query, key, value, options, block.start());
  att::plan_fia(plan);
  const Device device = query.device();
  FiaResult r;
  r.attention_out = empty(plan.out_shape, plan.out_dtype, device);
  r.softmax_lse = empty(options.softmax_lse_flag ? plan.lse_shape : Shape{1}, DType::f32, device);
  const Tensor workspace = empty({plan.workspace().total_bytes}, DType::u8, device);
  att::build_block(plan, workspace, r.attention_out, r.softmax_lse, block);
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
  return with_plan(query, key, value, options,
                   [](const att::FiaPlan& p) { return p.workspace().total_bytes; });
}

Shape fia_output_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                       const FiaOptions& options) {
  return with_plan(query, key, value, options, [](const att::FiaPlan& p) { return p.out_shape; });
}

DType fia_output_dtype(const Tensor& query, const Tensor& key, const Tensor& value,
                       const FiaOptions& options) {
  return with_plan(query, key, value, options, [](const att::FiaPlan& p) { return p.out_dtype; });
}

Shape fia_lse_shape(const Tensor& query, const Tensor& key, const Tensor& value,
                    const FiaOptions& options) {
  return with_plan(query, key, value, options, [](const att::FiaPlan& p) { return p.lse_shape; });
}

}  // namespace npugraph::ops
