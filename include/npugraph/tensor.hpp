// Tensor: shape, strides, dtype, device and ref-counted storage.
//
// A tensor is a view (offset, shape, strides) of a Storage, which owns its bytes or borrows them
// from the caller (from_blob, e.g. a numpy array). Copies share the storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "npugraph/device.hpp"
#include "npugraph/dtype.hpp"
#include "npugraph/shape.hpp"

namespace npugraph {

// The bytes behind tensors. A storage either borrows memory (from_blob: `owner` keeps the caller's
// memory alive, may be null) or owns an allocator block, which `release(context, tag, data, nbytes)`
// returns when the storage dies (the allocator keeps what `context` names alive through `owner`).
class Storage {
 public:
  using Release = void (*)(void* context, std::uint64_t tag, void* data, std::size_t nbytes) noexcept;

  Storage(void* data, std::size_t nbytes, Device device, std::shared_ptr<void> owner,
          Release release = nullptr, void* context = nullptr, std::uint64_t tag = 0)
      : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)), release_(release),
        context_(context), tag_(tag) {}
  ~Storage() {
    if (release_) release_(context_, tag_, data_, nbytes_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  std::size_t nbytes_;
  Device device_;
  std::shared_ptr<void> owner_;
  Release release_;
  void* context_;
  std::uint64_t tag_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, std::int64_t offset_bytes, Shape shape, Shape strides,
         DType dtype);

  // Wraps caller memory without copying. Strides default to contiguous (in elements).
  static Tensor from_blob(void* data, Shape shape, DType dtype, std::shared_ptr<void> owner = {},
                          Device device = Device::cpu());
  static Tensor from_blob(void* data, Shape shape, Shape strides, DType dtype,
                          std::shared_ptr<void> owner = {}, Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  int dim() const { return shape_.size(); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  // Negative dims count from the end. Throws ArgumentError when out of range.
  std::int64_t size(int d) const;
  std::int64_t stride(int d) const;
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t element_size() const { return dtype_size(dtype_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  void* data() const {
    return storage_ ? static_cast<std::byte*>(storage_->data()) + offset_ : nullptr;
  }
  template <class T>
  T* data_ptr() const { return static_cast<T*>(data()); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Where data() starts in the storage, in bytes.
  std::int64_t offset_bytes() const { return offset_; }

  // A contiguous tensor with the same elements seen under a new shape (numel must match).
  Tensor view(Shape shape) const;
  // Elements [start, start + length) along `dim`, sharing the storage (torch.narrow).
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  // "float16[1, 32, 1, 128]"
  std::string str() const;

 private:
  std::shared_ptr<Storage> storage_;
  std::int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
};

Shape contiguous_strides(const Shape& shape);

}  // namespace npugraph
