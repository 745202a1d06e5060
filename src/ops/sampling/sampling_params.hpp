// The parameter blocks of argmax / sample (sampling.cpp), their CUDA launchers (sampling_cuda.cu;
// built with the CUDA backend only). Light on includes: nvcc compiles it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npugraph::ops::sampling_impl {

struct ArgmaxParams {
  const float* logits = nullptr;
  std::int32_t* out = nullptr;
  std::int64_t B = 0, V = 0;
};

struct SampleParams {
  const float* logits = nullptr;
  const std::int64_t* seeds = nullptr;
  std::int64_t* steps = nullptr;
  std::int32_t* out = nullptr;
  std::int64_t B = 0, V = 0;
  double temperature = 1, top_p = 1;
  std::int64_t top_k = 0;
  bool advance_steps = false;
};

void argmax_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
void sample_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::sampling_impl
