// fill_, copy_, launch_host_func, zeros (tasks.hpp): stream tasks that are not kernel launches.
#include "npugraph/tasks.hpp"

#include <cmath>
#include <cstring>
#include <utility>

#include "npugraph/error.hpp"
#include "npugraph/memory.hpp"
#include "runtime/issue.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph {

using detail::state_of;
using detail::Task;
using detail::TaskKind;

namespace {

void check_plain(const Tensor& t, const char* call, const char* arg) {
  NG_CHECK_ARG(t.defined(), call, ": ", arg, " is undefined");
  NG_CHECK_ARG(t.is_contiguous(), call, ": ", arg, " = ", t.str(), ": must be contiguous");
}

std::uint64_t value_bits(DType dtype, double value) {
  std::uint64_t bits = 0;
  auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dtype) {
    case DType::f32: put(static_cast<float>(value)); break;
    case DType::f16: put(half(static_cast<float>(value)).bits); break;
    case DType::bf16: put(bfloat16(static_cast<float>(value)).bits); break;
    case DType::i8: put(static_cast<std::int8_t>(value)); break;
    case DType::u8: put(static_cast<std::uint8_t>(value)); break;
    case DType::i32: put(static_cast<std::int32_t>(value)); break;
    case DType::i64: put(static_cast<std::int64_t>(value)); break;
    case DType::boolean: put(static_cast<std::uint8_t>(value != 0.0)); break;
  }
  return bits;
}

}  // namespace

void fill_(const Tensor& dst, double value) { fill_(current_stream(dst.device()), dst, value); }

void fill_(const Stream& stream, const Tensor& dst, double value) {
  check_plain(dst, "fill_", "dst");
  if (!is_floating(dst.dtype()) && dst.dtype() != DType::boolean) {
    double lo = -9223372036854775808.0, hi = 9223372036854775807.0;
    switch (dst.dtype()) {
      case DType::i8: lo = -128, hi = 127; break;
      case DType::u8: lo = 0, hi = 255; break;
      case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
      default: break;
    }
    NG_CHECK_ARG(std::isfinite(value) && value == std::floor(value) && value >= lo && value < hi + 1,
                 "fill_: value = ", value, ": must be an integer in [", lo, ", ", hi, "] for a ",
                 dtype_name(dst.dtype()), " tensor");
  }
  const Device dev = state_of(stream).device;
  NG_CHECK_ARG(dst.device() == dev, "fill_: dst = ", dst.str(), " is on ", dst.device().str(),
               ", but the stream runs on ", dev.str());
  const detail::FillArgs args{dst.data(), static_cast<std::size_t>(dst.numel()), dst.element_size(),
                              value_bits(dst.dtype(), value)};
  Task task;
  task.kind = TaskKind::fill;
  task.params.assign(std::as_bytes(std::span(&args, 1)));
  const Tensor* uses[] = {&dst};
  task.object = detail::keep_alive(uses);  // Note [Keep-alive]
  detail::issue(state_of(stream), std::move(task));
}

void copy_(const Tensor& dst, const Tensor& src) { copy_(current_stream(dst.device()), dst, src); }

void copy_(const Stream& stream, const Tensor& dst, const Tensor& src) {
  check_plain(dst, "copy_", "dst");
  check_plain(src, "copy_", "src");
  NG_CHECK_ARG(dst.dtype() == src.dtype(), "copy_: src dtype = ", dtype_name(src.dtype()),
               ": must equal dst dtype ", dtype_name(dst.dtype()));
  NG_CHECK_ARG(dst.numel() == src.numel(), "copy_: src = ", src.str(), ": must have as many elements (",
               dst.numel(), ") as dst = ", dst.str());
  // A cpu stream copies between cpu tensors; a CUDA stream between its device and the host.
  const Device dev = state_of(stream).device;
  for (const auto& [t, name] : {std::pair{&dst, "dst"}, std::pair{&src, "src"}})
    NG_CHECK_ARG(t->device() == dev || t->device().is_cpu(), "copy_: ", name, " = ", t->str(), " is on ",
                 t->device().str(), ": a ", dev.str(), " stream copies between ", dev.str(),
                 dev.is_cpu() ? " tensors" : " and the cpu", " (use a stream of that device)");
  const detail::CopyArgs args{dst.data(), src.data(), dst.nbytes()};
  Task task;
  task.kind = TaskKind::copy;
  task.params.assign(std::as_bytes(std::span(&args, 1)));
  const Tensor* uses[] = {&dst, &src};
  task.object = detail::keep_alive(uses);  // Note [Keep-alive]
  detail::issue(state_of(stream), std::move(task));
}

void launch_host_func(const Stream& stream, std::function<void()> fn) {
  NG_CHECK_ARG(static_cast<bool>(fn), "launch_host_func: fn is empty");
  Task task;
  task.kind = TaskKind::host_fn;
  task.object = std::make_shared<std::function<void()>>(std::move(fn));
  detail::issue(state_of(stream), std::move(task));
}

Tensor zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  fill_(t, 0.0);
  return t;
}

}  // namespace npugraph
