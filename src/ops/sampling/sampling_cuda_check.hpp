// What the CUDA sample kernel covers (Note [Sampling on CUDA] in sampling_cuda_core.hpp), decided on
// the host: sample_out calls it for logits on a cuda device, so the refusal comes before anything
// is launched; a pure function, so its rule is unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "npugraph/device.hpp"
#include "npugraph/ops/sampling.hpp"

namespace npugraph::ops::sampling_impl {

// Empty when the kernel covers `options` for a vocabulary of `vocab`; else the message of the
// UnsupportedError, naming the argument, its value and what is supported.
std::string sample_cuda_unsupported(const SamplingOptions& options, std::int64_t vocab,
                                    const Device& device);

}  // namespace npugraph::ops::sampling_impl
