#include "support/bitwise.hpp"

#include <cstddef>
#include <cstring>

namespace ngtest {

::testing::AssertionResult bitwise_equal(const npugraph::Tensor& a, const npugraph::Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one tensor is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape()))
    return ::testing::AssertionFailure() << npugraph::dtype_name(a.dtype()) << a.shape().str()
                                         << " vs " << npugraph::dtype_name(b.dtype())
                                         << b.shape().str();
  if (!a.is_contiguous() || !b.is_contiguous())
    return ::testing::AssertionFailure() << "bitwise_equal compares contiguous tensors only";
  const auto* x = static_cast<const unsigned char*>(a.data());
  const auto* y = static_cast<const unsigned char*>(b.data());
  if (a.nbytes() == 0 || std::memcmp(x, y, a.nbytes()) == 0) return ::testing::AssertionSuccess();
  std::size_t i = 0;
  while (x[i] == y[i]) ++i;
  return ::testing::AssertionFailure() << "element " << i / a.element_size() << " of "
                                       << a.numel() << " differs";
}

}  // namespace ngtest
