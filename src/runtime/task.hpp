// Tasks: the units of stream work, shared by eager queues and graph nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "npugraph/kernel.hpp"

namespace npugraph::detail {

// A kernel's parameter block: plain bytes, stored inline when small (no allocation on the hot path).
class ParamBytes {
 public:
  static constexpr std::size_t kInline = 192;

  ParamBytes() = default;
  explicit ParamBytes(std::span<const std::byte> bytes) { assign(bytes); }
  ParamBytes(const ParamBytes& other) { assign(other.span()); }
  ParamBytes& operator=(const ParamBytes& other) {
    if (this != &other) assign(other.span());
    return *this;
  }
  ParamBytes(ParamBytes&& other) noexcept { take(other); }
  ParamBytes& operator=(ParamBytes&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }

  void assign(std::span<const std::byte> bytes) {
    size_ = bytes.size();
    if (size_ <= kInline) {
      heap_.reset();
      if (size_) std::memcpy(inline_, bytes.data(), size_);
    } else {
      heap_.reset(new std::byte[size_]);
      std::memcpy(heap_.get(), bytes.data(), size_);
    }
  }
  const std::byte* data() const { return heap_ ? heap_.get() : inline_; }
  std::size_t size() const { return size_; }
  std::span<const std::byte> span() const { return {data(), size_}; }

 private:
  void take(ParamBytes& other) noexcept {
    size_ = other.size_;
    heap_ = std::move(other.heap_);
    if (!heap_ && size_) std::memcpy(inline_, other.inline_, size_);
  }
  std::size_t size_ = 0;
  std::unique_ptr<std::byte[]> heap_;
  alignas(16) std::byte inline_[kInline];
};

enum class TaskKind : std::uint8_t {
  kernel,
  fill,
  copy,
  host_fn,
  event_record,
  event_wait,
  ext_record,
  ext_wait,
  ext_reset,
  graph_launch,
  patch,
};

const char* task_kind_name(TaskKind kind);

struct FillArgs {
  void* dst;
  std::size_t count;
  std::size_t elem_size;
  std::uint64_t pattern;  // the value's bytes, little end first
};
struct CopyArgs {
  void* dst;
  const void* src;
  std::size_t nbytes;
};

struct Task {
  TaskKind kind = TaskKind::kernel;
  const KernelDef* kernel = nullptr;  // kernel
  ParamBytes params;                  // kernel, fill, copy
  std::shared_ptr<void> object;       // the event, host function, graph launch or patch
  std::uint64_t value = 0;            // an event record's sequence number
};

// A human-readable name: the kernel's name, else the kind.
const char* task_name(const Task& task);

}  // namespace npugraph::detail
