#include "support/host_tensors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

namespace ngtest {

double round_to(double x, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(x);
    case DType::f16: return static_cast<float>(npugraph::half(static_cast<float>(x)));
    case DType::bf16: return static_cast<float>(npugraph::bfloat16(static_cast<float>(x)));
    case DType::i8: return std::clamp(std::nearbyint(x), -128.0, 127.0);
    case DType::u8: return std::clamp(std::nearbyint(x), 0.0, 255.0);
    case DType::i32: return std::nearbyint(x);
    case DType::i64: return std::nearbyint(x);
    case DType::boolean: return x != 0 ? 1.0 : 0.0;
  }
  throw std::invalid_argument("round_to: dtype");
}

namespace {

void store(void* base, std::size_t i, double x, DType dtype) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(base)[i] = static_cast<float>(x); return;
    case DType::f16: static_cast<npugraph::half*>(base)[i] = npugraph::half(static_cast<float>(x)); return;
    case DType::bf16:
      static_cast<npugraph::bfloat16*>(base)[i] = npugraph::bfloat16(static_cast<float>(x));
      return;
    case DType::i8: static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(x); return;
    case DType::u8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(x); return;
    case DType::boolean: static_cast<std::uint8_t*>(base)[i] = x != 0 ? 1 : 0; return;
    case DType::i32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(x); return;
    case DType::i64: static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(x); return;
  }
}

double load(const void* base, std::size_t i, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return static_cast<float>(static_cast<const npugraph::half*>(base)[i]);
    case DType::bf16: return static_cast<float>(static_cast<const npugraph::bfloat16*>(base)[i]);
    case DType::i8: return static_cast<const std::int8_t*>(base)[i];
    case DType::u8: case DType::boolean: return static_cast<const std::uint8_t*>(base)[i];
    case DType::i32: return static_cast<const std::int32_t*>(base)[i];
    case DType::i64: return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
  }
  return 0;
}

bool is_int(DType t) { return !npugraph::is_floating(t); }

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
  values.resize(static_cast<std::size_t>(shape.numel()));
  if (is_int(dtype)) {
    std::uniform_int_distribution<std::int64_t> dist(static_cast<std::int64_t>(lo),
                                                     static_cast<std::int64_t>(hi));
    for (double& x : values) x = static_cast<double>(dist(gen));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (double& x : values) x = dist(gen);
  }
  return host_tensor(values, shape, dtype);
}

Tensor filled_tensor(const Shape& shape, DType dtype, double value) {
  Tensor t = owned_tensor(shape, dtype);
  for (std::int64_t i = 0; i < shape.numel(); ++i) store(t.data(), static_cast<std::size_t>(i), value, dtype);
  return t;
}

Tensor int_tensor(const std::vector<std::int64_t>& values, const Shape& shape, DType dtype) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel())
    throw std::invalid_argument("int_tensor: size mismatch");
  Tensor t = owned_tensor(shape, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::i64) static_cast<std::int64_t*>(t.data())[i] = values[i];
    else store(t.data(), i, static_cast<double>(values[i]), dtype);
  }
  return t;
}

std::vector<double> read_back(const Tensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load(t.data(), i, t.dtype());
  return out;
}

Tensor f32_tensor(const std::vector<float>& values) {
  Tensor t = npugraph::empty({static_cast<std::int64_t>(values.size())}, npugraph::f32);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

std::vector<float> values_of(const Tensor& t) {
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

void expect_close(const Tensor& a_t, const Tensor& b_t, double eps, const char* what, const char* where) {
  const std::vector<double> a = read_back(a_t), b = read_back(b_t);
  ASSERT_EQ(a.size(), b.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 10; ++i) {
    const bool ok = std::isinf(b[i]) ? a[i] == b[i]
                                     : std::abs(a[i] - b[i]) <= 2 * eps * std::max(1.0, std::abs(b[i]));
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "] = " << a[i] << where << ", the reference's " << b[i];
      ++failures;
    }
  }
}

}  // namespace ngtest
