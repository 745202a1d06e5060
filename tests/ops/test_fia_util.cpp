#include "ops/test_fia_util.hpp"

#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

namespace fia_test {

Shape layout_shape(const std::string& layout, std::int64_t B, std::int64_t heads, std::int64_t seq,
                   std::int64_t D) {
  if (layout == "BNSD") return {B, heads, seq, D};
  if (layout == "BSND") return {B, seq, heads, D};
  if (layout == "BSH") return {B, seq, heads * D};
  throw std::invalid_argument("layout_shape: " + layout);
}

double round_to(double x, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(x);
    case DType::f16: return static_cast<float>(npugraph::half(static_cast<float>(x)));
    case DType::bf16: return static_cast<float>(npugraph::bfloat16(static_cast<float>(x)));
    default: throw std::invalid_argument("round_to: not a floating dtype");
  }
}

namespace {

void store(void* base, std::size_t i, double x, DType dtype) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(base)[i] = static_cast<float>(x); return;
    case DType::f16: static_cast<npugraph::half*>(base)[i] = npugraph::half(static_cast<float>(x)); return;
    case DType::bf16:
      static_cast<npugraph::bfloat16*>(base)[i] = npugraph::bfloat16(static_cast<float>(x));
      return;
    default: throw std::invalid_argument("store: not a floating dtype");
  }
}

double load(const void* base, std::size_t i, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return static_cast<float>(static_cast<const npugraph::half*>(base)[i]);
    case DType::bf16: return static_cast<float>(static_cast<const npugraph::bfloat16*>(base)[i]);
    default: throw std::invalid_argument("load: not a floating dtype");
  }
}

Tensor owned_tensor(const Shape& shape, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * npugraph::dtype_size(dtype);
  auto buf = std::make_shared<std::vector<std::uint64_t>>((bytes + 7) / 8 + 1, 0);
  return Tensor::from_blob(buf->data(), shape, dtype, buf);
}

}  // namespace

Tensor host_tensor(std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel())
    throw std::invalid_argument("host_tensor: size mismatch");
  Tensor t = owned_tensor(shape, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = round_to(values[i], dtype);
    store(t.data(), i, values[i], dtype);
  }
  return t;
}

Tensor random_tensor(std::vector<double>& values, const Shape& shape, DType dtype,
                     std::uint32_t seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  values.resize(static_cast<std::size_t>(shape.numel()));
  for (double& x : values) x = dist(gen);
  return host_tensor(values, shape, dtype);
}

Tensor filled_tensor(const Shape& shape, DType dtype, double value) {
  Tensor t = owned_tensor(shape, dtype);
  for (std::int64_t i = 0; i < shape.numel(); ++i) {
    if (dtype == DType::u8) static_cast<std::uint8_t*>(t.data())[i] = static_cast<std::uint8_t>(value);
    else store(t.data(), static_cast<std::size_t>(i), value, dtype);
  }
  return t;
}

std::vector<double> read_back(const Tensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load(t.data(), i, t.dtype());
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

::testing::AssertionResult throws_arg_error(const std::function<void()>& f,
                                            std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const npugraph::ArgumentError& e) {
    const std::string what = e.what();
    for (const std::string& p : parts)
      if (what.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << what << "\" lacks \"" << p << "\"";
    return ::testing::AssertionSuccess() << what;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw something else than ArgumentError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace fia_test
