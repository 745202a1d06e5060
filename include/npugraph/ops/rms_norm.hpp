// RMSNorm over the last dim, torch_npu's npu_rms_norm and npu_add_rms_norm:
//   rstd = 1 / sqrt(mean(x^2) + epsilon),   y = x * rstd * gamma
// x [..., H] float32 / float16 / bfloat16 (contiguous); gamma [H] of x's dtype or float32; y of
// x's shape, any float dtype (default x's); rstd float32 [..., 1] (optional in the _out forms).
// The mean is accumulated in double per row, y computed in float32 as (x * rstd) * gamma.
// npu_add_rms_norm first forms x = x1 + x2 (rounded to x_out's dtype, as the residual stream is
// stored) and normalises that: the decode step's residual add and its next norm in one launch.
// One kernel launch each on the current stream, capturable; rows are independent, so results do
// not depend on how many rows a call has.
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

struct RmsNormResult {
  Tensor y, rstd;
};

void rms_norm_out(const Tensor& x, const Tensor& gamma, double epsilon, const Tensor& y,
                  const Tensor& rstd = {});
RmsNormResult npu_rms_norm(const Tensor& x, const Tensor& gamma, double epsilon = 1e-6);

struct AddRmsNormResult {
  Tensor y, rstd, x;
};

// x_out = x1 + x2; y = rms_norm(x_out). x_out may be x1 or x2 (in place).
void add_rms_norm_out(const Tensor& x1, const Tensor& x2, const Tensor& gamma, double epsilon,
                      const Tensor& y, const Tensor& rstd, const Tensor& x_out);
AddRmsNormResult npu_add_rms_norm(const Tensor& x1, const Tensor& x2, const Tensor& gamma,
                                  double epsilon = 1e-6);

const KernelDef& rms_norm_kernel();
const KernelDef& add_rms_norm_kernel();

}  // namespace npugraph::ops
