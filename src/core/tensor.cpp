#include "npugraph/tensor.hpp"

#include "npugraph/error.hpp"

namespace npugraph {

Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  std::int64_t s = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

namespace detail {
void check_shape(const Shape& shape, const char* what) {
  for (int i = 0; i < shape.size(); ++i)
    NG_CHECK_ARG(shape[i] >= 0, what, ": size of dim ", i, " = ", shape[i], " in ", shape.str(),
                 ": must be >= 0");
}
}  // namespace detail

using detail::check_shape;

Tensor::Tensor(std::shared_ptr<Storage> storage, std::int64_t offset_bytes, Shape shape,
               Shape strides, DType dtype)
    : storage_(std::move(storage)), offset_(offset_bytes), shape_(shape), strides_(strides),
      dtype_(dtype) {
  check_shape(shape_, "tensor");
  NG_CHECK_ARG(shape_.size() == strides_.size(), "tensor: strides ", strides_.str(),
               " must have one entry per dim of shape ", shape_.str());
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, std::shared_ptr<void> owner,
                         Device device) {
  return from_blob(data, shape, contiguous_strides(shape), dtype, std::move(owner), device);
}

Tensor Tensor::from_blob(void* data, Shape shape, Shape strides, DType dtype,
                         std::shared_ptr<void> owner, Device device) {
  check_shape(shape, "from_blob");
  NG_CHECK_ARG(data != nullptr || shape.numel() == 0, "from_blob: data = null: a tensor with ",
               shape.numel(), " elements needs memory");
  // Extent in bytes of the region the view may touch (for bookkeeping only).
  std::int64_t extent = shape.numel() == 0 ? 0 : 1;
  for (int i = 0; i < shape.size(); ++i)
    if (shape[i] > 0) extent += (shape[i] - 1) * (strides[i] < 0 ? -strides[i] : strides[i]);
  auto storage = std::make_shared<Storage>(
      data, static_cast<std::size_t>(extent) * dtype_size(dtype), device, std::move(owner));
  return Tensor(std::move(storage), 0, shape, strides, dtype);
}

std::int64_t Tensor::size(int d) const {
  const int n = dim();
  NG_CHECK_ARG(d >= -n && d < n, "tensor.size: dim = ", d, ": must be in [", -n, ", ", n,
               ") for a ", n, "-D tensor");
  return shape_[d < 0 ? d + n : d];
}

std::int64_t Tensor::stride(int d) const {
  const int n = dim();
  NG_CHECK_ARG(d >= -n && d < n, "tensor.stride: dim = ", d, ": must be in [", -n, ", ", n,
               ") for a ", n, "-D tensor");
  return strides_[d < 0 ? d + n : d];
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

Tensor Tensor::view(Shape shape) const {
  NG_CHECK_ARG(defined(), "view: the tensor is undefined");
  NG_CHECK_ARG(is_contiguous(), "view: tensor ", str(), " is not contiguous");
  NG_CHECK_ARG(shape.numel() == numel(), "view: shape = ", shape.str(), ": must have ", numel(),
               " elements like ", shape_.str());
  return Tensor(storage_, offset_, shape, contiguous_strides(shape), dtype_);
}

Tensor Tensor::narrow(int d, std::int64_t start, std::int64_t length) const {
  NG_CHECK_ARG(defined(), "narrow: the tensor is undefined");
  const int n = dim();
  NG_CHECK_ARG(d >= -n && d < n, "narrow: dim = ", d, ": must be in [", -n, ", ", n, ") for ", str());
  if (d < 0) d += n;
  NG_CHECK_ARG(start >= 0 && length >= 0 && start <= shape_[d] - length, "narrow: start = ", start,
               ", length = ", length, ": must lie within dim ", d, " of ", str());
  Shape shape = shape_;
  shape[d] = length;
  return Tensor(storage_, offset_ + start * strides_[d] * static_cast<std::int64_t>(element_size()), shape,
                strides_, dtype_);
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_.str();
}

}  // namespace npugraph
