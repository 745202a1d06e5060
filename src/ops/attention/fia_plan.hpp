// FIA's plan: every check that the shapes, dtypes, layout and flags decide, run once per call, and
// what they decide (Note [FIA plan]). The operator's semantics: docs/fia.md.
//
// Note [FIA plan]
// A call goes params -> plan -> block -> launch:
//   plan_fia (fia_plan.cpp, with the checks of fia_plan_layout.cpp, fia_plan_mask.cpp and
//     fia_plan_quant.cpp) reads the tensors' shapes and dtypes and the options that are not host
//     values. It writes the static part of the parameter block in place (the FiaShapeKey, the
//     workspace plan and the views of the inputs) and returns the FiaPlan: the call's derived
//     flags and its output contract (attention_out's shape and dtype, softmax_lse's shape, the
//     workspace size). It never reads a host value (the lengths, scale, pre/next tokens) nor a
//     tensor's contents, and allocates nothing.
//   build_block (fia_block.cpp) checks the outputs and the workspace against the plan and adds
//     what the host values decide (the tail, the band, the padding, the extents they imply).
// Everything that needs the shapes takes them from the one plan: the eager form allocates its
// outputs and workspace from it, fia_workspace_bytes / fia_output_shape / fia_lse_shape /
// fia_output_dtype read it, the public FiaPlan (the Python auto-dispatch recording) keeps it, and
// the update check compares the key and the workspace plan it wrote into the block.
//
//
// Note [FIA re-plan]
// A captured `.out` call leaves its plan with the captured task (Note [Capture state] in
// npugraph/kernel.hpp). A task update that re-issues it with the same tensors and the same options
// that are not host values (same_plan_inputs) starts from that plan: the static part of the block
// is copied and only build_block runs — the outputs, the workspace and every host value are
// checked as on any call. Anything else plans from scratch. The plan reads nothing but what
// same_plan_inputs compares, so both give the same block (tests/ops/test_fia_replan.cpp), except
// that the re-planned one leaves out the dimension trailer (Note [FIA parameter block]): the update
// launch passes the captured state back, which vouches for the static part, so nothing compares the
// dimensions, and the description takes them from the captured block.
//
// Note [FIA host-value update]
// fused_infer_attention_score_update(stream, host values) is the re-plan without the comparison: it
// takes the tensors, the static options, the workspace and the outputs from the captured call itself
// (so there is nothing to compare) and only the host values from the caller. The block stage reads
// the host values through FiaPlan::host (o's own on every other path), so the block, its checks and
// their messages are those of re-issuing the captured call with these host values. Why it exists:
// an update usually follows a replay, or a decode step that streamed the model's weights through the
// caches, and then same_plan_inputs' ~25 tensor pairs per task (two FiaOptions of 3.9 KB each) come
// from memory: 28 % of Python's NPUGraph.update of 80 recorded calls after a replay was
// same_plan_inputs alone (perf, Xeon VM), and the engine's update of 30 groups per step lost about
// a sixth of its samples with it. Hot (bench_update, nothing evicted) it is about 40 % fewer
// instructions in the op's part of an update.
//
// Every message reads "fused_infer_attention_score: <argument> = <value>: <rule>". Message parts are
// only formatted when a check fails, and nothing here allocates for batches up to
// FiaParamBuffer::kInlineBatch, so re-planning a task for an update stays cheap.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string_view>
#include <vector>

#include "npugraph/error.hpp"
#include "npugraph/ops/fia.hpp"
#include "ops/attention/fia_params.hpp"

namespace npugraph::ops::attention {

// "[1, 2, 3]" for messages (at most 16 values).
struct ListText {
  std::span<const std::int64_t> values;
};
std::ostream& operator<<(std::ostream& os, const ListText& l);

// "float16[1, 32, 1, 128]", or "undefined".
struct TensorText {
  const Tensor& t;
};
std::ostream& operator<<(std::ostream& os, const TensorText& x);

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t align_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// What a plan's checks found, and the output contract: a function of the tensors' shapes, dtypes and
// strides and of the options that are not host values (Note [FIA plan]).
struct FiaFindings {
  FiaLayout in = FiaLayout::bsh, out = FiaLayout::bsh;
  bool token = false;    // TND/NTD
  bool decode = false;   // query S == 1, not TND/NTD
  bool paged = false;
  bool int8_kv = false;
  bool prefix = false;
  bool rope = false;
  bool q_padding = false, kv_padding = false;  // the tensors are given (effective or not)
  DType q_dtype = DType::f32, kv_dtype = DType::f32;
  std::int64_t key_s = 0;  // the key's S (or T) dimension; 0 when paged

  // The output contract.
  Shape out_shape, lse_shape;
  DType out_dtype = DType::f32;
};

// One call's plan (Note [FIA plan]). It refers to the call's arguments and to the header it fills:
// it lives within one call (the public ops::FiaPlan keeps copies of both).
struct FiaPlan : FiaFindings {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const FiaOptions& o;  // everything but the host values
  // The host values the block stage reads (Note [FIA host-value update]): o's, or an update's.
  FiaHostValues host;
  FiaParams& header;  // written in place: the launch's block header (or a scratch one)
  FiaShapeKey& key;   // header.key
  // The tensors' dimensions (set_sig), for the block's dimension trailer (Note [FIA parameter
  // block]): kept here, not in the header, so that a re-planned update does not copy them.
  FiaTensorDims dims[static_cast<int>(FiaArg::count)] = {};

  FiaPlan(const Tensor& query, const Tensor& key_, const Tensor& value, const FiaOptions& options,
          FiaParams& h)
      : q(query), k(key_), v(value), o(options), host(FiaHostValues::of(options)), header(h),
        key(h.key) {}
  FiaPlan(const FiaPlan&) = delete;
  FiaPlan& operator=(const FiaPlan&) = delete;

  const FiaWorkspacePlan& workspace() const { return header.plan; }
};

// Plans a call into `header` (default-initialised: FiaParamBuffer::start()): Note [FIA plan].
// Throws ArgumentError naming the argument, the value and the rule.
void plan_fia(FiaPlan& plan);

// The plan's stages, in order (each reads what the earlier ones found).
// fia_plan_layout.cpp: layout, heads, dtypes and the shapes of query, key, value, query_rope,
// key_rope, the shared prefix and the paged caches (block_table's shape and block_size included);
// the views of those inputs.
void plan_layout(FiaPlan& c);
// fia_plan_mask.cpp: sparse_mode, inner_precise, atten_mask, pse_shift, learnable_sink and the
// padding tensors' shapes; the mask, pse and sink views.
void plan_mask(FiaPlan& c);
// fia_plan_quant.cpp: antiquant parameters and the quantised output (dtypes and shapes); their
// views.
void plan_quant(FiaPlan& c);

// input_layout's input and output layouts (fia_plan_layout.cpp); false for an unknown name.
bool parse_layout(std::string_view name, FiaLayout& in, FiaLayout& out);
// The views of a tensor as (b, n, s, d) in layout l (BSH: d = H / N): Note [FIA views].
FiaView view_of(const Tensor& t, FiaLayout l, std::int64_t d);

// Shared checks.
void set_sig(FiaPlan& c, FiaArg a, const Tensor& t);  // undefined tensors keep rank -1
void check_defined(const Tensor& t, const char* name);
void check_same_device(const Tensor& t, const char* name, const Tensor& q);

// Why the CUDA kernels (Note [FIA CUDA kernels]) cannot run this plan: "fused_infer_attention_score
// on <device>: <argument> = <value> (...): not supported on the CUDA backend yet (supported: ...)",
// or empty when they can (fia_cuda_check.cpp). A pure function of the plan: plan_fia throws it as
// an UnsupportedError for a query on a cuda device.
std::string fia_cuda_unsupported(const FiaPlan& plan, const Device& device);

// The workspace plan of a shape key (Note [FIA workspace]).
FiaWorkspacePlan plan_workspace(const FiaShapeKey& key);

// The same view (dtype, shape, strides) of the same memory, or both undefined.
// Reads the two Tensor objects only: the storage is compared by address, not dereferenced (an
// update compares about 24 pairs per FIA task, and a storage's line may sit in another core's cache).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage()) return false;
  return !a.defined() || (a.offset_bytes() == b.offset_bytes() && a.dtype() == b.dtype() &&
                          a.shape() == b.shape() && a.strides() == b.strides());
}
// This thread's updates that started from a captured plan (Note [FIA re-plan]): `plan` counts
// them, `outputs` those that also kept the captured outputs and workspace. For tests.
struct FiaReplanCounts {
  std::uint64_t plan = 0, outputs = 0;
};
inline FiaReplanCounts& fia_replan_counts() {
  thread_local FiaReplanCounts counts;
  return counts;
}

// Whether planning (q, k, v, o) would read exactly what `planned` read: the same tensors (the same
// views of the same memory) and the same options that are not host values (Note [FIA re-plan]).
bool same_plan_inputs(const FiaPlan& planned, const Tensor& q, const Tensor& k, const Tensor& v,
                      const FiaOptions& o);

// Plans the call and fills `buffer` with the launch's block: everything the `.out` form does
// before it launches.
void build_fia_params(const Tensor& query, const Tensor& key, const Tensor& value,
                      const FiaOptions& options, const Tensor& workspace,
                      const Tensor& attention_out, const Tensor& softmax_lse,
                      FiaParamBuffer& buffer);

// fia_block.cpp: checks the outputs and the workspace against `plan` and writes the rest of the
// block: the outputs' views, the tail (sized here for the plan's batch count), the host values and
// what they decide (Note [FIA plan]), and the dimension trailer. `buffer`'s header must hold the plan's static part (the plan
// was built into it, or it is a copy).
void build_block(const FiaPlan& plan, const Tensor& workspace, const Tensor& attention_out,
                 const Tensor& softmax_lse, FiaParamBuffer& buffer);
// build_block's stages, in order: scale; the outputs and the workspace (checked, and their views
// written into `header`; nothing here depends on a host value); every other host value (the tail,
// sized here, and what the values decide).
void check_scale(const FiaPlan& plan);
void bind_outputs(const FiaPlan& plan, const Tensor& workspace, const Tensor& attention_out,
                  const Tensor& softmax_lse, FiaParams& header);
void resolve_host_values(const FiaPlan& plan, FiaParamBuffer& buffer);
// build_block for a call that reads what `captured` read (same_plan_inputs(), or the captured call
// itself: Note [FIA re-plan], Note [FIA host-value update]) with the host values `host`: the block
// build_fia_params gives, without the dimension trailer, from `captured`'s static part. `bound`:
// the header `captured` had once bound to these outputs and this workspace (bind_outputs is
// skipped), or null.
void replan_block(const FiaPlan& captured, const FiaParams* bound, const FiaHostValues& host,
                  const Tensor& workspace, const Tensor& attention_out, const Tensor& softmax_lse,
                  FiaParamBuffer& buffer);

}  // namespace npugraph::ops::attention
