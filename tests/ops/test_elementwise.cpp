// The elementwise ops (add, scale): parity against an obviously-right reference for each dtype and
// size (parameterised, readable names), the plan's errors, and capture -> update -> replay equal
// to eager, bitwise, with the update check's refusal. The smallest instance of the pattern every op
// follows (docs/adding_an_op.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

namespace {

namespace ng = npugraph;
using ng::DType;
using ng::Tensor;
using ngtest::bitwise_equal;
using ngtest::random_tensor;
using ngtest::read_back;
using ngtest::throws;

struct EwCase {
  DType dtype;
  std::int64_t n;  // 0, within one chunk, several chunks
  std::string name() const { return std::string(ng::dtype_name(dtype)) + "_n" + std::to_string(n); }
};

// Error bound: the reference adds/scales the rounded inputs in double and rounds once; the kernel
// computes in float32 and rounds once to the dtype: at most one ulp of the dtype apart.
double bound(DType t) { return t == DType::f32 ? 1e-6 : t == DType::f16 ? 1e-3 : 8e-3; }

class ElementwiseParity : public ::testing::TestWithParam<EwCase> {};

TEST_P(ElementwiseParity, AddAndScaleMatchTheReference) {
  const EwCase c = GetParam();
  std::vector<double> a, b;
  const Tensor x = random_tensor(a, {c.n}, c.dtype, 1, -4, 4);
  const Tensor y = random_tensor(b, {c.n}, c.dtype, 2, -4, 4);
  const Tensor sum = ng::ops::add(x, y);
  const Tensor scaled = ng::ops::scale(x, -2.5);
  ng::current_stream().synchronize();
  ASSERT_EQ(sum.dtype(), c.dtype);
  ASSERT_EQ(sum.shape(), x.shape());
  const std::vector<double> s = read_back(sum), z = read_back(scaled);
  for (std::int64_t i = 0; i < c.n; ++i) {
    const double want_s = a[i] + b[i], want_z = a[i] * -2.5;
    ASSERT_NEAR(s[i], want_s, bound(c.dtype) * std::max(1.0, std::abs(want_s))) << i;
    ASSERT_NEAR(z[i], want_z, bound(c.dtype) * std::max(1.0, std::abs(want_z))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseParity,
                         ::testing::Values(EwCase{DType::f32, 0}, EwCase{DType::f32, 1000},
                                           EwCase{DType::f16, 1000}, EwCase{DType::bf16, 1000},
                                           EwCase{DType::f32, 50000}, EwCase{DType::bf16, 50000}),
                         [](const ::testing::TestParamInfo<EwCase>& p) { return p.param.name(); });

TEST(ElementwisePlan, ErrorsNameTheOperandTheValueAndTheRule) {
  std::vector<double> v;
  const Tensor x = random_tensor(v, {4}, DType::f32, 3);
  const Tensor ints = random_tensor(v, {4}, DType::i32, 4, 0, 9);
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { (void)ng::ops::add(Tensor(), x); },
                                        {"add: a is undefined"}));
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { (void)ng::ops::scale(ints, 2); },
                                        {"scale: x dtype = int32", "float32, float16 or bfloat16"}));
  const Tensor y = random_tensor(v, {5}, DType::f32, 5);
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { (void)ng::ops::add(x, y); },
                                        {"add: b = ", "must have the dtype and shape of a = "}));
  const Tensor wide = random_tensor(v, {4, 2}, DType::f32, 6);
  const Tensor strided = Tensor::from_blob(wide.data(), {4}, {2}, DType::f32, wide.storage());
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { ng::ops::scale_out(x, 2, strided); },
                                        {"scale: out = ", "must be contiguous"}));
}

// scale's alpha lives in the parameter block: capture, update alpha (and point the task at other
// memory of the same size), replay == eager; another element count is refused.
TEST(ElementwiseUpdate, CaptureUpdateReplayEqualsEagerAndRefusal) {
  std::vector<double> v;
  const Tensor x = random_tensor(v, {3000}, DType::bf16, 7);
  const Tensor x2 = random_tensor(v, {3000}, DType::bf16, 8);
  ng::Graph graph;
  ng::TaskGroupHandle handle;
  Tensor out;
  {
    ng::CaptureScope capture(graph);
    const ng::Stream s = ng::current_stream();
    out = ng::empty(x.shape(), x.dtype());
    ng::task_group_begin(s);
    ng::ops::scale_out(x, 0.5, out);
    handle = ng::task_group_end(s);
  }
  graph.replay();
  const Tensor eager_old = ng::ops::scale(x, 0.5);
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager_old));

  const ng::Stream u = ng::Stream::create();
  {
    ng::StreamGuard on(u);
    ng::task_update_begin(u, handle);
    ng::ops::scale_out(x2, 3.0, out);
    ng::task_update_end(u);
  }
  u.synchronize();
  graph.replay();
  ng::device_synchronize();
  const Tensor eager = ng::ops::scale(x2, 3.0);
  ng::current_stream().synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager));

  const Tensor small = random_tensor(v, {10}, DType::bf16, 9);
  const Tensor small_out = ng::empty(small.shape(), small.dtype());
  {
    ng::StreamGuard on(u);
    ng::task_update_begin(u, handle);
    EXPECT_TRUE(throws<ng::Error>([&] {
      ng::ops::scale_out(small, 3.0, small_out);
      ng::task_update_end(u);
    }, {"element count changed from 3000 to 10"}));
    if (u.is_updating()) ng::task_update_abort(u);
  }
  graph.replay();
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager));  // nothing was installed
}

}  // namespace
