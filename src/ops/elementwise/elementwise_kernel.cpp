// The elementwise ops' CPU kernels and update checks (elementwise_params.hpp). Each reads only its
// parameter block and the ExecContext; the chunks are a function of n alone, so eager, replayed
// and updated results are bitwise equal.
#include "ops/elementwise/elementwise_params.hpp"

#include "npugraph/error.hpp"

namespace npugraph::ops::elementwise {
namespace {

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

std::string same_extent(std::span<const std::byte> captured, std::span<const std::byte> updated,
                        std::int64_t (*numel)(std::span<const std::byte>)) {
  if (captured.size() != updated.size()) return "parameter block size changed";
  if (numel(captured) != numel(updated))
    return detail::cat("element count changed from ", numel(captured), " to ", numel(updated));
  return {};
}

}  // namespace

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

void noop_cpu(const void*, std::size_t, const ExecContext&) {}

std::string check_add_update(std::span<const std::byte> captured, std::span<const std::byte> updated) {
  return same_extent(captured, updated, [](std::span<const std::byte> b) {
    return reinterpret_cast<const BinaryParams*>(b.data())->n;
  });
}

std::string check_scale_update(std::span<const std::byte> captured,
                               std::span<const std::byte> updated) {
  return same_extent(captured, updated, [](std::span<const std::byte> b) {
    return reinterpret_cast<const ScaleParams*>(b.data())->n;
  });
}

}  // namespace npugraph::ops::elementwise
