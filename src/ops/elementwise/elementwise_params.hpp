// The elementwise ops' parameter blocks (add, scale): the plain bytes one launch carries, and the
// kernel functions that read them (elementwise_kernel.cpp). The smallest example of an op's four
// pieces (params, plan, launch, kernel): docs/adding_an_op.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "npugraph/dtype.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph::ops::elementwise {

// out[i] = a[i] + b[i], i < n. An update may point a, b and out at other memory of n elements.
struct BinaryParams {
  const void* a;
  const void* b;
  void* out;
  std::int64_t n;
  DType dtype;
};

// out[i] = x[i] * alpha, i < n. An update may also change alpha.
struct ScaleParams {
  const void* x;
  void* out;
  std::int64_t n;
  float alpha;
  DType dtype;
};

static_assert(std::is_trivially_copyable_v<BinaryParams> && std::is_trivially_copyable_v<ScaleParams>);

// The kernels (reachable through add_kernel(), scale_kernel(), noop_kernel()).
void add_cpu(const void* params, std::size_t size, const ExecContext& ctx);
void scale_cpu(const void* params, std::size_t size, const ExecContext& ctx);
void noop_cpu(const void* params, std::size_t size, const ExecContext& ctx);
// Their CUDA launchers (elementwise_cuda.cu; built with the CUDA backend only, cmake/Cuda.cmake).
void add_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
void scale_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
void noop_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
// The update checks: the element count (and so the parallel split) may not change.
std::string check_add_update(std::span<const std::byte> captured, std::span<const std::byte> updated);
std::string check_scale_update(std::span<const std::byte> captured,
                               std::span<const std::byte> updated);

}  // namespace npugraph::ops::elementwise
