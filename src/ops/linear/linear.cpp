// weight_quant_linear / linear: argument checks, the plan (chunking), the launch. The kernel is
// linear_simd.cpp (Note [Linear kernels] in linear_params.hpp).
#include "npugraph/ops/linear.hpp"

#include <algorithm>
#include <array>

#include "npugraph/error.hpp"
#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/linear/linear_params.hpp"

namespace npugraph::ops {
namespace linear_impl {

const float* half_to_float_table() {
  static const std::array<float, 65536>* table = [] {
    auto* t = new std::array<float, 65536>;  // lives for the process (kernels may run at exit)
    for (std::uint32_t i = 0; i < 65536; ++i) (*t)[i] = f16_bits_to_f32(static_cast<std::uint16_t>(i));
    return t;
  }();
  return table->data();
}

}  // namespace linear_impl

namespace {

using linear_impl::LinearParams;

void linear_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  if (size != sizeof(LinearParams))
    NG_THROW(TaskError, "linear kernel: parameter block of ", size, " bytes, expected ",
             sizeof(LinearParams));
  const auto& p = *static_cast<const LinearParams*>(raw);
  // rows16 weights take the packed q8 kernel at every row count (Note [Packed weights]); the rows
  // layout's q8 GEMV serves up to kGemvMaxRows rows, the float32 GEMM more.
  if (p.packed && p.q8_activations) return linear_impl::run_linear_packed_q8(p, ctx);
  const bool gemv_q8 = p.q8_activations && p.T <= linear_impl::kGemvMaxRows;
  if (gemv_q8) linear_impl::run_linear_q8(p, ctx);
  else linear_impl::run_linear(p, ctx);
}

// The CUDA slot is filled when the library is built with the CUDA backend (cmake/Cuda.cmake).
#if NPUGRAPH_HAVE_CUDA
constexpr CudaLaunchFn kLinearCuda = &linear_impl::linear_cuda;
#else
constexpr CudaLaunchFn kLinearCuda = nullptr;
#endif

const KernelDef kQuantLinear{.name = "weight_quant_linear", .cpu = linear_cpu, .cuda = kLinearCuda};
const KernelDef kLinear{.name = "linear", .cpu = linear_cpu, .cuda = kLinearCuda};

// The plan: weight rows per chunk, a function of the shapes only (outputs do not depend on it,
// Note [Linear kernels]). GEMV: chunks of about 1/32 of the weight bytes, at least 32 KiB (so a
// chunk's prefetch lead-in is a small part of it) and at most 256 KiB, in whole register tiles
// (multiples of 8 rows); GEMM: one tile of kGemmTileRows rows per chunk.
// rows16 weights (`packed`): whole groups of 16 rows. rows16 weights with q8 activations run the
// packed kernel at every T: GEMV chunks, whatever T.
std::int64_t chunk_rows(std::int64_t T, std::int64_t N, std::int64_t row_bytes, bool packed, bool q8) {
  if (T > linear_impl::kGemvMaxRows && !(packed && q8)) return linear_impl::kGemmTileRows;
  const std::int64_t total = N * std::max<std::int64_t>(row_bytes, 1);
  const std::int64_t bytes = std::clamp<std::int64_t>(total / 32, 32 << 10, 256 << 10);
  const std::int64_t unit = packed ? linear_impl::kPackRows : 8;
  const std::int64_t rows = (bytes / std::max<std::int64_t>(row_bytes, 1) + unit - 1) / unit * unit;
  return std::max<std::int64_t>(rows, unit);
}

struct Checked {
  std::int64_t T;
};

// Checks x, bias and out against a weight of N rows and K columns (`wdesc` names the weight).
Checked check_io(const char* op, const Tensor& x, const Tensor& bias, const Tensor& out,
                 std::int64_t N, std::int64_t K, const std::string& wdesc) {
  NG_CHECK_ARG(x.defined(), op, ": x is undefined");
  NG_CHECK_ARG(x.dtype() == DType::f32, op, ": x = ", x.str(), ": must be float32");
  NG_CHECK_ARG(x.dim() >= 1, op, ": x = ", x.str(), ": must have at least one dim");
  NG_CHECK_ARG(x.is_contiguous(), op, ": x = ", x.str(), ": must be contiguous");
  NG_CHECK_ARG(x.size(-1) == K, op, ": x = ", x.str(), ": its last dim must be the in_features ",
               K, " of weight = ", wdesc);
  NG_CHECK_ARG(out.defined(), op, ": out is undefined");
  Shape want = x.shape();
  want[want.size() - 1] = N;
  NG_CHECK_ARG(is_floating(out.dtype()), op, ": out = ", out.str(),
               ": must be float32, float16 or bfloat16");
  NG_CHECK_ARG(out.shape() == want, op, ": out = ", out.str(), ": must have the shape ", want.str(),
               " (x = ", x.str(), ", weight = ", wdesc, ")");
  NG_CHECK_ARG(out.is_contiguous(), op, ": out = ", out.str(), ": must be contiguous");
  NG_CHECK_ARG(out.device() == x.device(), op, ": out is on ", out.device().str(),
               ": must be on the device of x, ", x.device().str());
  if (bias.defined()) {
    NG_CHECK_ARG(bias.dtype() == DType::f32 && bias.dim() == 1 && bias.size(0) == N, op,
                 ": bias = ", bias.str(), ": must be float32[", N, "] (the out_features of weight = ",
                 wdesc, ")");
    NG_CHECK_ARG(bias.is_contiguous(), op, ": bias = ", bias.str(), ": must be contiguous");
    NG_CHECK_ARG(bias.device() == x.device(), op, ": bias is on ", bias.device().str(),
                 ": must be on the device of x, ", x.device().str());
  }
  return {x.numel() / K};
}

void launch_linear(const Stream& stream, const KernelDef& kernel, LinearParams p, const Tensor& x,
                   const Tensor& w, const Tensor& bias, const Tensor& out) {
  p.chunk_rows = chunk_rows(p.T, p.N, p.w_row_bytes, p.packed, p.q8_activations);
  const Tensor* uses[] = {&x, &w, &bias, &out};
  launch(stream, kernel, p, uses);
}

}  // namespace

const KernelDef& weight_quant_linear_kernel() { return kQuantLinear; }
const KernelDef& linear_kernel() { return kLinear; }

void weight_quant_linear_out(const Tensor& x, const QuantWeight& weight, const Tensor& bias,
                             const Tensor& out, const QuantLinearOptions& options) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "weight_quant_linear";
  NG_CHECK_ARG(weight.defined(), op, ": weight is undefined");
  NG_CHECK_ARG(weight.bytes().device() == x.device(), op, ": weight is on ",
               weight.bytes().device().str(), ": must be on the device of x, ", x.device().str());
  const auto [T] = check_io(op, x, bias, out, weight.rows(), weight.cols(), weight.str());
  NG_CHECK_ARG(options.activations == Activations::f32 || options.activations == Activations::q8,
               op, ": options.activations = ", static_cast<int>(options.activations),
               ": must be Activations::f32 or Activations::q8");
  const bool q8 = options.activations == Activations::q8;
  const QuantTraits& traits = quant_traits(weight.type());
  if (x.device().type() == DeviceType::cuda && !traits.cuda)
    NG_THROW(UnsupportedError, op, ": weight = ", weight.str(), " on ", x.device().str(),
             ": the cuda kernels read Q4_0, Q4_1 and Q8_0 weights only");
  if (q8 && !traits.q8_kernel)
    NG_THROW(UnsupportedError, op, ": options.activations = q8 with weight = ", weight.str(),
             ": ", traits.name, " has no q8-activation kernel yet (Activations::f32 runs it; "
             "quant_traits(type).q8_kernel says which types have one)");
  if (q8 && x.device().type() == DeviceType::cuda)
    NG_THROW(UnsupportedError, op, ": options.activations = q8 on ", x.device().str(),
             ": the cuda backend computes float32 activations only (Activations::f32)");
  const bool packed = weight.layout() == QuantLayout::rows16;
  if (packed && x.device().type() == DeviceType::cuda)
    NG_THROW(UnsupportedError, op, ": weight = ", weight.str(), " on ", x.device().str(),
             ": the cuda backend reads the rows layout only (unpack_rows)");
  LinearParams p;
  p.x = x.data_ptr<float>();
  p.w = weight.data();
  p.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  p.y = out.data();
  p.half_table = linear_impl::half_to_float_table();
  p.T = T;
  p.N = weight.rows();
  p.K = weight.cols();
  p.x_stride = p.K;
  p.y_stride = p.N;
  p.w_row_bytes = weight.row_bytes();
  p.type = ggml_type(weight.type());
  p.y_dtype = out.dtype();
  p.q8_activations = q8;
  p.packed = packed;
  launch_linear(stream, kQuantLinear, p, x, weight.bytes(), bias, out);
}

Tensor weight_quant_linear(const Tensor& x, const QuantWeight& weight, const Tensor& bias,
                           DType out_dtype, const QuantLinearOptions& options) {
  NG_CHECK_ARG(x.defined() && x.dim() >= 1, "weight_quant_linear: x = ",
               x.defined() ? x.str() : "undefined", ": must be a tensor of at least one dim");
  NG_CHECK_ARG(weight.defined(), "weight_quant_linear: weight is undefined");
  Shape shape = x.shape();
  shape[shape.size() - 1] = weight.rows();
  Tensor out = empty(shape, out_dtype, x.device());
  weight_quant_linear_out(x, weight, bias, out, options);
  return out;
}

void linear_out(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "linear";
  NG_CHECK_ARG(weight.defined(), op, ": weight is undefined");
  NG_CHECK_ARG(is_floating(weight.dtype()) && weight.dim() == 2, op, ": weight = ", weight.str(),
               ": must be a float32, float16 or bfloat16 matrix [out_features, in_features]");
  NG_CHECK_ARG(weight.is_contiguous(), op, ": weight = ", weight.str(), ": must be contiguous");
  NG_CHECK_ARG(weight.size(1) > 0, op, ": weight = ", weight.str(), ": in_features must be positive");
  NG_CHECK_ARG(weight.device() == x.device(), op, ": weight is on ", weight.device().str(),
               ": must be on the device of x, ", x.device().str());
  const auto [T] = check_io(op, x, bias, out, weight.size(0), weight.size(1), weight.str());
  LinearParams p;
  p.x = x.data_ptr<float>();
  p.w = static_cast<const std::byte*>(weight.data());
  p.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  p.y = out.data();
  p.half_table = linear_impl::half_to_float_table();
  p.T = T;
  p.N = weight.size(0);
  p.K = weight.size(1);
  p.x_stride = p.K;
  p.y_stride = p.N;
  p.w_row_bytes = p.K * static_cast<std::int64_t>(weight.element_size());
  p.type = weight.dtype() == DType::f32   ? GgmlType::F32
           : weight.dtype() == DType::f16 ? GgmlType::F16
                                          : GgmlType::BF16;
  p.y_dtype = out.dtype();
  launch_linear(stream, kLinear, p, x, weight, bias, out);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType out_dtype) {
  NG_CHECK_ARG(x.defined() && x.dim() >= 1, "linear: x = ", x.defined() ? x.str() : "undefined",
               ": must be a tensor of at least one dim");
  NG_CHECK_ARG(weight.defined() && weight.dim() == 2, "linear: weight = ",
               weight.defined() ? weight.str() : "undefined",
               ": must be a matrix [out_features, in_features]");
  Shape shape = x.shape();
  shape[shape.size() - 1] = weight.size(0);
  Tensor out = empty(shape, out_dtype, x.device());
  linear_out(x, weight, bias, out);
  return out;
}

}  // namespace npugraph::ops
