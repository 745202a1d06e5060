// The elementwise ops' CUDA kernels (add, scale, noop; elementwise_params.hpp). Simple and exact:
// every element is computed in float and rounded once to its dtype (round to nearest even), as the
// CPU kernels do, so CPU and GPU results are bitwise equal.
//
// Note [CUDA kernels read the device block]
// Each kernel takes one argument, the device copy of its parameter block, and reads everything from
// it — pointers, alpha, even the dtype (a uniform branch) — so an update that rewrites the block
// reaches a captured kernel node unchanged. The launcher reads the host copy for the grid only,
// which depends on n alone, and n is what check_add_update / check_scale_update keep fixed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ops/elementwise/elementwise_params.hpp"

namespace npugraph::ops::elementwise {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 4096;  // grid-stride beyond this

__device__ float load(DType dtype, const void* p, std::int64_t i) {
  switch (dtype) {
    case DType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ void store(DType dtype, void* p, std::int64_t i, float v) {
  switch (dtype) {
    case DType::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); return;
    case DType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); return;
    default: static_cast<float*>(p)[i] = v; return;
  }
}

__global__ void add_kernel(const BinaryParams* p) {
  const std::int64_t n = p->n;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store(p->dtype, p->out, i, __fadd_rn(load(p->dtype, p->a, i), load(p->dtype, p->b, i)));
}

__global__ void scale_kernel(const ScaleParams* p) {
  const std::int64_t n = p->n;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store(p->dtype, p->out, i, __fmul_rn(load(p->dtype, p->x, i), p->alpha));
}

__global__ void noop_kernel(const void*) {}

unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace

// Launch errors are the backend's to report (it checks cudaGetLastError after each launcher and
// names the kernel), so the launchers only launch.
void add_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const BinaryParams*>(params);
  add_kernel<<<blocks_for(p.n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const BinaryParams*>(device_params));
}

void scale_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const ScaleParams*>(params);
  scale_kernel<<<blocks_for(p.n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const ScaleParams*>(device_params));
}

void noop_cuda(const void*, std::size_t, const void* device_params, void* stream) {
  noop_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(device_params);
}

}  // namespace npugraph::ops::elementwise
