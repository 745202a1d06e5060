// add / scale / noop (npugraph/ops/elementwise.hpp): small kernels for building graphs of many
// tasks, and the smallest example of an op's four pieces (docs/adding_an_op.md): each entry point
// plans once (elementwise_plan.hpp), builds its parameter block (elementwise_params.hpp) and
// launches it with the tensors it uses; the kernels are elementwise_kernel.cpp.
#include "npugraph/ops/elementwise.hpp"

#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/elementwise/elementwise_params.hpp"
#include "ops/elementwise/elementwise_plan.hpp"

namespace npugraph::ops {
namespace {

namespace ew = elementwise;

// The CUDA slots are filled when the library is built with the CUDA backend (cmake/Cuda.cmake).
#if NPUGRAPH_HAVE_CUDA
#define NG_CUDA_SLOT(f) (f)
#else
#define NG_CUDA_SLOT(f) nullptr
#endif

const KernelDef kAdd{.name = "add", .cpu = &ew::add_cpu, .cuda = NG_CUDA_SLOT(&ew::add_cuda),
                     .check_update = &ew::check_add_update};
const KernelDef kScale{.name = "scale", .cpu = &ew::scale_cpu, .cuda = NG_CUDA_SLOT(&ew::scale_cuda),
                       .check_update = &ew::check_scale_update};
const KernelDef kNoop{.name = "noop", .cpu = &ew::noop_cpu, .cuda = NG_CUDA_SLOT(&ew::noop_cuda)};

void launch_add(const Stream& stream, const ew::ElementwisePlan& plan, const Tensor& a,
                const Tensor& b, const Tensor& out) {
  const ew::BinaryParams p{a.data(), b.data(), out.data(), plan.n, plan.dtype};
  const Tensor* uses[] = {&a, &b, &out};  // kept alive as long as the launch may run
  launch(stream, kAdd, p, uses);
}

void launch_scale(const Stream& stream, const ew::ElementwisePlan& plan, const Tensor& x,
                  double alpha, const Tensor& out) {
  const ew::ScaleParams p{x.data(), out.data(), plan.n, static_cast<float>(alpha), plan.dtype};
  const Tensor* uses[] = {&x, &out};
  launch(stream, kScale, p, uses);
}

}  // namespace

const KernelDef& add_kernel() { return kAdd; }
const KernelDef& scale_kernel() { return kScale; }
const KernelDef& noop_kernel() { return kNoop; }

void add_out(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Stream& stream = current_stream_ref(a.device());
  const UpdateErrorGuard guard(stream);
  const ew::ElementwisePlan plan = ew::plan_elementwise("add", a, "a");
  ew::check_like("add", b, "b", a, "a");
  ew::check_like("add", out, "out", a, "a");
  launch_add(stream, plan, a, b, out);
}

Tensor add(const Tensor& a, const Tensor& b) {
  const Stream& stream = current_stream_ref(a.device());
  const UpdateErrorGuard guard(stream);
  const ew::ElementwisePlan plan = ew::plan_elementwise("add", a, "a");
  ew::check_like("add", b, "b", a, "a");
  Tensor out = empty(plan.shape, plan.dtype, a.device());
  launch_add(stream, plan, a, b, out);
  return out;
}

void scale_out(const Tensor& x, double alpha, const Tensor& out) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  const ew::ElementwisePlan plan = ew::plan_elementwise("scale", x, "x");
  ew::check_like("scale", out, "out", x, "x");
  launch_scale(stream, plan, x, alpha, out);
}

Tensor scale(const Tensor& x, double alpha) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  const ew::ElementwisePlan plan = ew::plan_elementwise("scale", x, "x");
  Tensor out = empty(plan.shape, plan.dtype, x.device());
  launch_scale(stream, plan, x, alpha, out);
  return out;
}

}  // namespace npugraph::ops
