#include <gtest/gtest.h>

#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using ngtest::throws;

TEST(Tensor, EmptyIsContiguousWithRowMajorStrides) {
  Tensor t = empty({2, 3, 4}, f16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
  EXPECT_EQ(t.str(), "float16[2, 3, 4]");
}

TEST(Tensor, FromBlobBorrowsWithoutCopying) {
  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_blob(host.data(), {2, 3}, f32);
  EXPECT_EQ(t.data(), host.data());
  Tensor tr = Tensor::from_blob(host.data(), {3, 2}, {1, 3}, f32);  // a transposed view
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.data_ptr<float>()[tr.stride(0) * 2 + tr.stride(1) * 1], 6.0f);
}

TEST(Tensor, ViewKeepsStorageAndChecksElementCount) {
  Tensor t = empty({4, 6}, f32);
  Tensor v = t.view({2, 12});
  EXPECT_EQ(v.data(), t.data());
  EXPECT_TRUE(throws<ArgumentError>([&] { t.view({5, 5}); }, {"view", "[5, 5]", "24"}));
}

TEST(Tensor, BadArgumentsAreNamed) {
  Tensor t = empty({2, 2}, f32);
  EXPECT_TRUE(throws<ArgumentError>([&] { t.size(2); }, {"dim = 2", "[-2, 2)"}));
  EXPECT_TRUE(throws<ArgumentError>([] { empty({2, -1}, f32); }, {"-1", "must be >= 0"}));
  EXPECT_TRUE(throws<ArgumentError>([] { empty({1, 1, 1, 1, 1, 1, 1, 1, 1}, f32); }, {"rank = 9", "<= 8"}));
  // cuda:0 without its backend, or without a GPU (tests/backends/test_cuda_backend.cpp).
  EXPECT_TRUE(throws<UnsupportedError>([] { empty({2}, f32, Device::cuda(7)); },
                                       {"cuda:7", NPUGRAPH_BUILT_WITH_CUDA ? "CUDA device" : "no backend"}));
}

TEST(Device, Parse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("npu:0"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_TRUE(throws<ArgumentError>([] { Device::parse("tpu"); }, {"'tpu'", "must be"}));
  EXPECT_TRUE(throws<ArgumentError>([] { Device::parse("cuda:x"); }, {"'cuda:x'", "non-negative integer"}));
}
