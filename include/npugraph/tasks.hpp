// Non-kernel stream tasks: fill, copy, host function (the memset/memcpy/host-func of a device API).
// Like every stream task they are asynchronous, in stream order, and recorded when the stream captures.
// They are not kernel launches: inside a task group or an update they are errors (docs/semantics.md §4).
#pragma once

#include <functional>

#include "npugraph/stream.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph {

// Sets every element of the contiguous tensor `dst` to `value` converted to its dtype.
void fill_(const Tensor& dst, double value);
void fill_(const Stream& stream, const Tensor& dst, double value);
// Copies `src` into `dst`: both contiguous, same dtype and element count.
void copy_(const Tensor& dst, const Tensor& src);
void copy_(const Stream& stream, const Tensor& dst, const Tensor& src);
// Runs `fn` on the stream's worker when the stream reaches it. An exception from it becomes the
// stream's pending error (surfacing at the next synchronize).
void launch_host_func(const Stream& stream, std::function<void()> fn);

// empty + fill_(0) on the current stream.
Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());

}  // namespace npugraph
