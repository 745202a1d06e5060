#include "npugraph/shape.hpp"

#include "npugraph/error.hpp"

namespace npugraph {

void Shape::assign(const std::int64_t* p, std::size_t n) {
  NG_CHECK_ARG(n <= static_cast<std::size_t>(kMaxDims), "shape: rank = ", n, ": must be <= ",
               kMaxDims);
  for (std::size_t i = 0; i < n; ++i) d_[i] = p[i];
  n_ = static_cast<int>(n);
}

void Shape::push_back(std::int64_t v) {
  NG_CHECK_ARG(n_ < kMaxDims, "shape: rank = ", n_ + 1, ": must be <= ", kMaxDims);
  d_[n_++] = v;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  return s + "]";
}

}  // namespace npugraph
