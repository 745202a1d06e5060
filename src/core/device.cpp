#include "npugraph/device.hpp"

#include "npugraph/error.hpp"

namespace npugraph {

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
