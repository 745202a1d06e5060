// The elementwise ops' plan (elementwise_plan.hpp).
#include "ops/elementwise/elementwise_plan.hpp"

#include "npugraph/error.hpp"

namespace npugraph::ops::elementwise {

ElementwisePlan plan_elementwise(const char* op, const Tensor& x, const char* x_name) {
  NG_CHECK_ARG(x.defined(), op, ": ", x_name, " is undefined");
  NG_CHECK_ARG(x.is_contiguous(), op, ": ", x_name, " = ", x.str(), ": must be contiguous");
  NG_CHECK_ARG(is_floating(x.dtype()), op, ": ", x_name, " dtype = ", dtype_name(x.dtype()),
               ": must be float32, float16 or bfloat16");
  return {x.shape(), x.dtype(), x.numel()};
}

void check_like(const char* op, const Tensor& t, const char* name, const Tensor& x,
                const char* x_name) {
  (void)plan_elementwise(op, t, name);
  NG_CHECK_ARG(t.dtype() == x.dtype() && t.shape() == x.shape(), op, ": ", name, " = ", t.str(),
               ": must have the dtype and shape of ", x_name, " = ", x.str());
}

}  // namespace npugraph::ops::elementwise
