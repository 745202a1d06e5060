// add / scale / noop: small kernels for building graphs of many tasks.
#include "npugraph/ops/elementwise.hpp"

#include "npugraph/error.hpp"
#include "npugraph/stream.hpp"

namespace npugraph::ops {
namespace {

struct BinaryParams {
  const void* a;
  const void* b;
  void* out;
  std::int64_t n;
  DType dtype;
};

struct ScaleParams {
  const void* x;
  void* out;
  std::int64_t n;
  float alpha;
  DType dtype;
};

template <class T>
float load(const void* p, std::int64_t i) {
  return static_cast<float>(static_cast<const T*>(p)[i]);
}
template <class T>
void store(void* p, std::int64_t i, float v) {
  static_cast<T*>(p)[i] = T(v);
}

template <class F>
void dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(half{}); return;
    case DType::bf16: f(bfloat16{}); return;
    default: NG_THROW(ArgumentError, "dtype = ", dtype_name(dtype), ": must be float32, float16 or bfloat16");
  }
}

constexpr std::int64_t kGrain = 1 << 14;  // elements per chunk: a pure function of nothing but n

void add_cpu(const void* raw, std::size_t, const ExecContext& ctx) {
  const auto& p = *static_cast<const BinaryParams*>(raw);
  dispatch(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    ctx.parallel_for(p.n, kGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) store<T>(p.out, i, load<T>(p.a, i) + load<T>(p.b, i));
    });
  });
}

void scale_cpu(const void* raw, std::size_t, const ExecContext& ctx) {
  const auto& p = *static_cast<const ScaleParams*>(raw);
  dispatch(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    ctx.parallel_for(p.n, kGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) store<T>(p.out, i, load<T>(p.x, i) * p.alpha);
    });
  });
}

std::string same_extent(std::span<const std::byte> captured, std::span<const std::byte> updated,
                        std::int64_t (*numel)(std::span<const std::byte>)) {
  if (captured.size() != updated.size()) return "parameter block size changed";
  if (numel(captured) != numel(updated))
    return detail::cat("element count changed from ", numel(captured), " to ", numel(updated));
  return {};
}

const KernelDef kAdd{
    .name = "add",
    .cpu = add_cpu,
    .check_update = [](std::span<const std::byte> c, std::span<const std::byte> u) {
      return same_extent(c, u, [](std::span<const std::byte> b) {
        return reinterpret_cast<const BinaryParams*>(b.data())->n;
      });
    }};
const KernelDef kScale{
    .name = "scale",
    .cpu = scale_cpu,
    .check_update = [](std::span<const std::byte> c, std::span<const std::byte> u) {
      return same_extent(c, u, [](std::span<const std::byte> b) {
        return reinterpret_cast<const ScaleParams*>(b.data())->n;
      });
    }};
const KernelDef kNoop{.name = "noop", .cpu = [](const void*, std::size_t, const ExecContext&) {}};

void check_operand(const Tensor& t, const char* op, const char* arg) {
  NG_CHECK_ARG(t.defined(), op, ": ", arg, " is undefined");
  NG_CHECK_ARG(t.is_contiguous(), op, ": ", arg, " = ", t.str(), ": must be contiguous");
  NG_CHECK_ARG(is_floating(t.dtype()), op, ": ", arg, " dtype = ", dtype_name(t.dtype()),
               ": must be float32, float16 or bfloat16");
}

void check_like(const Tensor& t, const Tensor& ref, const char* op, const char* arg, const char* ref_name) {
  check_operand(t, op, arg);
  NG_CHECK_ARG(t.dtype() == ref.dtype() && t.shape() == ref.shape(), op, ": ", arg, " = ", t.str(),
               ": must have the dtype and shape of ", ref_name, " = ", ref.str());
}

}  // namespace

const KernelDef& add_kernel() { return kAdd; }
const KernelDef& scale_kernel() { return kScale; }
const KernelDef& noop_kernel() { return kNoop; }

void add_out(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Stream stream = current_stream(a.device());
  const UpdateErrorGuard guard(stream);
  check_operand(a, "add", "a");
  check_like(b, a, "add", "b", "a");
  check_like(out, a, "add", "out", "a");
  const BinaryParams p{a.data(), b.data(), out.data(), a.numel(), a.dtype()};
  const Tensor* uses[] = {&a, &b, &out};
  launch(stream, kAdd, p, uses);
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_operand(a, "add", "a");
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  add_out(a, b, out);
  return out;
}

void scale_out(const Tensor& x, double alpha, const Tensor& out) {
  const Stream stream = current_stream(x.device());
  const UpdateErrorGuard guard(stream);
  check_operand(x, "scale", "x");
  check_like(out, x, "scale", "out", "x");
  const ScaleParams p{x.data(), out.data(), x.numel(), static_cast<float>(alpha), x.dtype()};
  const Tensor* uses[] = {&x, &out};
  launch(stream, kScale, p, uses);
}

Tensor scale(const Tensor& x, double alpha) {
  check_operand(x, "scale", "x");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  scale_out(x, alpha, out);
  return out;
}

}  // namespace npugraph::ops
