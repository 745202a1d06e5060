// What FIA's CUDA kernels (Note [FIA CUDA kernels] in fia_cuda_core.hpp) cover, decided on the host
// from the plan: fia_cuda_unsupported(). A pure function of the plan, so every rule is unit-tested
// without a GPU (tests/ops/test_fia_cuda_emulation.cpp); plan_fia calls it for a query on a cuda
// device, so every entry point (eager, .out, captured, updated, the queries) refuses the same
// arguments with the same message before anything is allocated or launched.
#include <sstream>

#include "ops/attention/fia_cuda_core.hpp"
#include "ops/attention/fia_plan.hpp"

namespace npugraph::ops::attention {
namespace {

constexpr const char* kSupported =
    "supported: float16, bfloat16 or float32 query and key/value of the query's dtype; layouts "
    "BSH, BSND, BNSD, NSD and their output forms; contiguous or paged KV; GQA; sparse_mode 0-4 "
    "with or without atten_mask; pse_shift; softmax_lse";

}  // namespace

std::string fia_cuda_unsupported(const FiaPlan& c, const Device& device) {
  std::ostringstream os;
  os << "fused_infer_attention_score on " << device.str() << ": ";
  auto refuse = [&](const auto&... what) {
    (os << ... << what);
    os << ": not supported on the CUDA backend yet (" << kSupported << ")";
    return os.str();
  };
  if (c.token)
    return refuse("input_layout = ", c.o.input_layout,
                  " (token layouts TND/NTD with cumulative lengths)");
  if (c.int8_kv)
    return refuse("key = ", TensorText{c.k}, " (int8 key/value with antiquant, antiquant_mode = ",
                  c.o.antiquant_mode, ", key_antiquant_mode = ", c.o.key_antiquant_mode,
                  ", value_antiquant_mode = ", c.o.value_antiquant_mode, ")");
  if (c.q_dtype != DType::f16 && c.q_dtype != DType::bf16 && c.q_dtype != DType::f32)
    return refuse("query = ", TensorText{c.q});
  if (c.kv_dtype != c.q_dtype)
    return refuse("key = ", TensorText{c.k}, " (a key/value dtype other than the query's ",
                  dtype_name(c.q_dtype), ")");
  if (c.rope)
    return refuse("query_rope = ", TensorText{c.o.query_rope}, " (with key_rope = ",
                  TensorText{c.o.key_rope}, ")");
  if (c.prefix)
    return refuse("key_shared_prefix = ", TensorText{c.o.key_shared_prefix}, " (shared prefix)");
  if (c.q_padding)
    return refuse("query_padding_size = ", TensorText{c.o.query_padding_size}, " (left padding)");
  if (c.kv_padding)
    return refuse("kv_padding_size = ", TensorText{c.o.kv_padding_size}, " (left padding)");
  if (c.key.out_int8)
    return refuse("quant_scale2 = ", TensorText{c.o.quant_scale2}, " (int8 attention_out)");
  if (c.o.learnable_sink.defined())
    return refuse("learnable_sink = ", TensorText{c.o.learnable_sink}, " (attention sinks)");
  if (c.key.batch > cuda_core::kMaxGridZ)
    return refuse("batch = ", c.key.batch, " (at most ", cuda_core::kMaxGridZ,
                  " batches: the grid's z dimension)");
  return {};
}

}  // namespace npugraph::ops::attention
