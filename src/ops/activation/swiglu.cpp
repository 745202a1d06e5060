// npu_swiglu / swiglu: checks and launches; the kernel is swiglu_simd.cpp.
#include "npugraph/ops/swiglu.hpp"

#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"
#include "ops/activation/swiglu_params.hpp"

namespace npugraph::ops {
namespace {

using namespace detail_llm;
using swiglu_impl::SwigluParams;

void swiglu_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  swiglu_impl::run_swiglu(params_of<SwigluParams>(raw, size, "swiglu"), ctx);
}

const KernelDef kSwiglu{.name = "swiglu", .cpu = swiglu_cpu,
                        .cuda = NG_LLM_CUDA_SLOT(&swiglu_impl::swiglu_cuda)};

// The one-input form of both gated activations: x = [gate, up] halves.
void gated_halves(const char* op, swiglu_impl::GateFn fn, const Tensor& x, const Tensor& out) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  check_float(op, "x", x);
  NG_CHECK_ARG(x.dim() >= 1 && x.size(-1) > 0 && x.size(-1) % 2 == 0, op, ": x = ", x.str(),
               ": its last dim must be even (the halves [a, b])");
  const std::int64_t H = x.size(-1) / 2;
  check_float(op, "out", out);
  Shape want = x.shape();
  want[want.size() - 1] = H;
  NG_CHECK_ARG(out.shape() == want, op, ": out = ", out.str(), ": must have the shape ", want.str(),
               " (x = ", x.str(), " split in two along its last dim)");
  check_same_device(op, "out", out, x);
  SwigluParams p;
  p.gate = x.data();
  p.up = static_cast<const std::byte*>(x.data()) + H * static_cast<std::int64_t>(x.element_size());
  p.out = out.data();
  p.rows = x.numel() / (2 * H);
  p.H = H;
  p.in_stride = 2 * H;
  p.in_dtype = x.dtype();
  p.out_dtype = out.dtype();
  p.fn = fn;
  const Tensor* uses[] = {&x, &out};
  launch(stream, kSwiglu, p, uses);
}

// The two-input form: gate and up of one shape.
void gated_pair(const char* op, swiglu_impl::GateFn fn, const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Stream& stream = current_stream_ref(gate.device());
  const UpdateErrorGuard guard(stream);
  check_float(op, "gate", gate);
  NG_CHECK_ARG(gate.dim() >= 1 && gate.size(-1) > 0, op, ": gate = ", gate.str(),
               ": must have a last dim of positive size");
  check_float(op, "up", up);
  NG_CHECK_ARG(up.shape() == gate.shape() && up.dtype() == gate.dtype(), op, ": up = ", up.str(),
               ": must have the shape and dtype of gate = ", gate.str());
  check_same_device(op, "up", up, gate);
  check_float(op, "out", out);
  NG_CHECK_ARG(out.shape() == gate.shape(), op, ": out = ", out.str(),
               ": must have the shape of gate = ", gate.str());
  check_same_device(op, "out", out, gate);
  SwigluParams p;
  p.gate = gate.data();
  p.up = up.data();
  p.out = out.data();
  p.H = gate.size(-1);
  p.rows = gate.numel() / p.H;
  p.in_stride = p.H;
  p.in_dtype = gate.dtype();
  p.out_dtype = out.dtype();
  p.fn = fn;
  const Tensor* uses[] = {&gate, &up, &out};
  launch(stream, kSwiglu, p, uses);
}

void no_cuda_geglu(const Tensor& t) {
  if (t.device().type() == DeviceType::cuda)
    NG_THROW(UnsupportedError, "geglu: ", t.str(), " on ", t.device().str(),
             ": the cuda kernel computes swiglu only (geglu runs on the cpu)");
}

}  // namespace

const KernelDef& swiglu_kernel() { return kSwiglu; }

void swiglu_out(const Tensor& x, const Tensor& out) { gated_halves("swiglu", swiglu_impl::GateFn::silu, x, out); }

void geglu_out(const Tensor& x, const Tensor& out) {
  no_cuda_geglu(x);
  gated_halves("geglu", swiglu_impl::GateFn::gelu_tanh, x, out);
}

void geglu_out(const Tensor& gate, const Tensor& up, const Tensor& out) {
  no_cuda_geglu(gate);
  gated_pair("geglu", swiglu_impl::GateFn::gelu_tanh, gate, up, out);
}

Tensor npu_swiglu(const Tensor& x, int dim) {
  check_float("swiglu", "x", x);
  NG_CHECK_ARG(dim == -1 || dim == x.dim() - 1, "swiglu: dim = ", dim,
               ": only the last dim (-1) is supported (x = ", x.str(), ")");
  NG_CHECK_ARG(x.dim() >= 1 && x.size(-1) % 2 == 0, "swiglu: x = ", x.str(),
               ": its last dim must be even (the halves [a, b])");
  Shape s = x.shape();
  s[s.size() - 1] = x.size(-1) / 2;
  Tensor out = empty(s, x.dtype(), x.device());
  swiglu_out(x, out);
  return out;
}

void swiglu_out(const Tensor& gate, const Tensor& up, const Tensor& out) {
  gated_pair("swiglu", swiglu_impl::GateFn::silu, gate, up, out);
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  check_float("swiglu", "gate", gate);
  Tensor out = empty(gate.shape(), gate.dtype(), gate.device());
  swiglu_out(gate, up, out);
  return out;
}

}  // namespace npugraph::ops
