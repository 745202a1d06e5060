#include "npugraph/shape.hpp"

#include "npugraph/device.hpp"
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

Device Device::parse(const std::string& text) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string digits = text.substr(colon + 1);
    NG_CHECK_ARG(!digits.empty() && digits.size() < 6 &&
                     digits.find_first_not_of("0123456789") == std::string::npos,
                 "device = '", text, "': the index after ':' must be a non-negative integer");
    index = std::stoi(digits);
  }
  if (kind == "cpu" || kind == "npu") return {DeviceType::cpu, index};
  if (kind == "cuda") return {DeviceType::cuda, index};
  NG_THROW(ArgumentError, "device = '", text, "': must be 'cpu', 'npu[:N]' or 'cuda[:N]'");
}

std::string Device::str() const {
  return type_ == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(index_);
}

}  // namespace npugraph
