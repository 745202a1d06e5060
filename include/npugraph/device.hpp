// Devices: `cpu` (the default) or `cuda:N`. A small value type.
#pragma once

#include <cstdint>
#include <string>

namespace npugraph {

enum class DeviceType : std::uint8_t { cpu, cuda };

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}
  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  // Parses "cpu", "cuda", "cuda:N" (and "npu"/"npu:N" as an alias of the default device).
  static Device parse(const std::string& text);

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::cpu; }
  std::string str() const;
  friend constexpr bool operator==(Device, Device) = default;

 private:
  DeviceType type_ = DeviceType::cpu;
  int index_ = 0;
};

}  // namespace npugraph
