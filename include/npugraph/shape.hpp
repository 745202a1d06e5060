// A tensor shape (or stride list): up to kMaxDims extents stored inline.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace npugraph {

inline constexpr int kMaxDims = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const std::int64_t> dims) { assign(dims.data(), dims.size()); }
  explicit Shape(const std::vector<std::int64_t>& dims) { assign(dims.data(), dims.size()); }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::int64_t operator[](int i) const { return d_[i]; }
  std::int64_t& operator[](int i) { return d_[i]; }
  const std::int64_t* begin() const { return d_; }
  const std::int64_t* end() const { return d_ + n_; }
  std::span<const std::int64_t> span() const { return {d_, static_cast<std::size_t>(n_)}; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < n_; ++i) n *= d_[i];
    return n;
  }
  void push_back(std::int64_t v);
  std::string str() const;  // "[1, 32, 1, 128]"
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }

 private:
  void assign(const std::int64_t* p, std::size_t n);
  std::int64_t d_[kMaxDims] = {};
  int n_ = 0;
};

}  // namespace npugraph
