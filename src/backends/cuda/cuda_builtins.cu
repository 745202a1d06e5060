// The CUDA backend's one built-in kernel: a fill with a multi-byte pattern (cuda_common.hpp).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace npugraph::detail::cuda {
namespace {

template <class T>
__global__ void fill_kernel(T* dst, std::size_t count, T value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = value;
}

template <class T>
cudaError_t fill_as(void* dst, std::size_t count, std::uint64_t pattern, cudaStream_t stream) {
  T value;
  static_assert(sizeof(T) <= sizeof(pattern));
  __builtin_memcpy(&value, &pattern, sizeof(T));  // the pattern's low bytes, little end first
  const std::size_t blocks = (count + 255) / 256;
  fill_kernel<T><<<static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks)), 256, 0, stream>>>(
      static_cast<T*>(dst), count, value);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_pattern(void* dst, std::size_t count, std::size_t elem_size, std::uint64_t pattern,
                         cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: return fill_as<std::uint8_t>(dst, count, pattern, stream);
    case 2: return fill_as<std::uint16_t>(dst, count, pattern, stream);
    case 4: return fill_as<std::uint32_t>(dst, count, pattern, stream);
    case 8: return fill_as<std::uint64_t>(dst, count, pattern, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace npugraph::detail::cuda
