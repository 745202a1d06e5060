// Kernel fusion at instantiate (Note [Kernel fusion] in npugraph/kernel.hpp): which neighbours a
// cpu graph runs as one task, that such a replay has the bits of the eager kernels run one after
// the other, add then rms_norm (Note [add then rms_norm]) in the shapes and aliasings a decoder
// layer has, the rotation of k with its cache write (Note [rotary_embedding then reshape_and_cache]),
// the pairs that must stay apart, and the registry's errors. The mechanism with the test's own
// kernels, threads included: tests/graph/test_kernel_fusion_plan.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "npugraph/kernel.hpp"
#include "npugraph/ops/elementwise.hpp"
#include "npugraph/ops/kv_cache.hpp"
#include "npugraph/ops/rms_norm.hpp"
#include "npugraph/ops/rope.hpp"
#include "npugraph/task_group.hpp"
#include "npugraph/trace.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "support/throws.hpp"

namespace llm_ops_test {
namespace {

using ngtest::throws;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }
std::string named(const char* name) { return std::string("\"name\":\"") + name + "\""; }

std::vector<std::byte> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::byte*>(t.data());
  return {p, p + t.nbytes()};
}

// Sets fusion for the graphs instantiated in its scope.
class FusionScope {
 public:
  explicit FusionScope(bool on) : was_(ng::kernel_fusion()) { ng::set_kernel_fusion(on); }
  ~FusionScope() { ng::set_kernel_fusion(was_); }

 private:
  bool was_;
};

// What `issue` leaves in `outs` run eagerly after `reset` (which writes the inputs and poisons the
// outputs), and the trace of a replay of its capture: each replay's outputs must be those bits.
std::string expect_replay_bits(const std::vector<Tensor>& outs, const std::function<void()>& reset,
                               const std::function<void()>& issue) {
  reset();
  issue();
  ng::device_synchronize();
  std::vector<std::vector<std::byte>> eager;
  for (const Tensor& o : outs) eager.push_back(bytes_of(o));
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    issue();
  }
  std::string trace;
  for (int round = 0; round < 2; ++round) {
    reset();
    if (round == 1) ng::start_trace();
    g.replay();
    ng::device_synchronize();
    if (round == 1) trace = ng::stop_trace();
    for (std::size_t i = 0; i < outs.size(); ++i)
      EXPECT_EQ(bytes_of(outs[i]), eager[i]) << "output " << i << " of replay " << round << " differs from eager";
  }
  return trace;
}

// A decoder layer's end and the next one's start: x += h; h = rmsnorm(x) * gamma.
TEST(KernelFusion, AddThenRmsNormRunsAsOneTaskWithTheEagerBits) {
  const FusionScope on(true);
  std::uint32_t seed = 100;
  for (const auto& [rows, H] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 576}, {8, 576}, {3, 7}, {5, 1001}, {13, 64}, {1, 1}}) {
    const std::vector<float> x0 = random_values(rows * H, ++seed, -40, 40);
    const std::vector<float> h0 = random_values(rows * H, ++seed, -1e-3f, 1e-3f);  // rounding matters
    const Tensor x = make_tensor(x0, {rows, H}), h = make_tensor(h0, {rows, H});
    const Tensor g = random_tensor({H}, ++seed, DType::f32, 0.5f, 1.5f);
    const Tensor rstd = ng::empty({rows, 1}, DType::f32);
    auto reset = [&] {
      std::memcpy(x.data(), x0.data(), x.nbytes());
      std::memcpy(h.data(), h0.data(), h.nbytes());
      std::memset(rstd.data(), 0x5a, rstd.nbytes());
    };
    for (const bool with_rstd : {false, true}) {
      const std::string trace = expect_replay_bits({x, h, rstd}, reset, [&] {
        ng::ops::add_out(x, h, x);
        ng::ops::rms_norm_out(x, g, 1e-5, h, with_rstd ? rstd : Tensor());
      });
      EXPECT_TRUE(contains(trace, named("add+rms_norm"))) << rows << "x" << H;
      EXPECT_FALSE(contains(trace, named("rms_norm"))) << rows << "x" << H;
    }
  }
}

// Fusion off: the same graph keeps both tasks, with the same bits.
TEST(KernelFusion, OffKeepsEveryTask) {
  const std::vector<float> x0 = random_values(4 * 96, 1, -3, 3), h0 = random_values(4 * 96, 2, -3, 3);
  const Tensor x = make_tensor(x0, {4, 96}), h = make_tensor(h0, {4, 96}), y = ng::empty({4, 96}, DType::f32);
  const Tensor g = random_tensor({96}, 3);
  auto reset = [&] {
    std::memcpy(x.data(), x0.data(), x.nbytes());
    std::memcpy(h.data(), h0.data(), h.nbytes());
    std::memset(y.data(), 0x5a, y.nbytes());
  };
  auto issue = [&] {
    ng::ops::add_out(x, h, x);
    ng::ops::rms_norm_out(x, g, 1e-6, y);
  };
  std::vector<std::byte> fused, apart;
  {
    const FusionScope on(true);
    EXPECT_TRUE(contains(expect_replay_bits({x, y}, reset, issue), named("add+rms_norm")));
    fused = bytes_of(y);
  }
  {
    const FusionScope off(false);
    EXPECT_FALSE(ng::kernel_fusion());
    const std::string trace = expect_replay_bits({x, y}, reset, issue);
    EXPECT_FALSE(contains(trace, named("add+rms_norm")));
    EXPECT_TRUE(contains(trace, named("add")) && contains(trace, named("rms_norm")));
    apart = bytes_of(y);
  }
  EXPECT_EQ(fused, apart);
}

// What match() refuses runs as two tasks, still with the eager bits.
TEST(KernelFusion, PairsThatCannotPromiseTheBitsStayTwoTasks) {
  const FusionScope on(true);
  const std::vector<float> x0 = random_values(6 * 32, 11, -3, 3), h0 = random_values(6 * 32, 12, -3, 3);
  const Tensor x = make_tensor(x0, {6, 32}), h = make_tensor(h0, {6, 32});
  const Tensor g = random_tensor({32}, 13), y = ng::empty({6, 32}, DType::f32);
  auto reset = [&] {
    std::memcpy(x.data(), x0.data(), x.nbytes());
    std::memcpy(h.data(), h0.data(), h.nbytes());
    std::memset(y.data(), 0x5a, y.nbytes());
  };
  auto expect_two = [&](const std::vector<Tensor>& outs, const std::function<void()>& issue, const char* what) {
    const std::string trace = expect_replay_bits(outs, reset, issue);
    EXPECT_FALSE(contains(trace, named("add+rms_norm"))) << what;
    EXPECT_TRUE(contains(trace, named("rms_norm"))) << what;
  };
  // y overlaps h one row further on: a row of the norm would overwrite a row the add has not read.
  const Tensor h5 = h.narrow(0, 1, 5), x5 = x.narrow(0, 0, 5);
  expect_two({x, h}, [&] {
    ng::ops::add_out(x5, h.narrow(0, 0, 5), x5);
    ng::ops::rms_norm_out(x5, g, 1e-6, h5);
  }, "y shifted over b");
  // The norm reads another tensor than the add wrote.
  expect_two({x, y}, [&] {
    ng::ops::add_out(x, h, x);
    ng::ops::rms_norm_out(h, g, 1e-6, y);
  }, "norm of another tensor");
  // gamma is written by the add.
  const Tensor gx = ng::empty({7, 32}, DType::f32);
  auto reset_gx = [&] {
    reset();
    std::memcpy(gx.data(), x0.data(), 6 * 32 * sizeof(float));
    std::memcpy(static_cast<float*>(gx.data()) + 6 * 32, g.data(), 32 * sizeof(float));
  };
  {
    const Tensor sums = gx.narrow(0, 1, 6), gamma = gx.narrow(0, 6, 1).view({32});
    const std::string trace = expect_replay_bits({gx, y}, reset_gx, [&] {
      ng::ops::add_out(h, h, sums);
      ng::ops::rms_norm_out(sums, gamma, 1e-6, y);
    });
    EXPECT_FALSE(contains(trace, named("add+rms_norm"))) << "gamma written by the add";
  }
  // Half precision: not the float32 kernels' promise.
  const Tensor xh = random_tensor({6, 32}, 14, DType::f16), hh = random_tensor({6, 32}, 15, DType::f16);
  const Tensor gh = random_tensor({32}, 16, DType::f16), yh = ng::empty({6, 32}, DType::f16);
  const Tensor sh = ng::empty({6, 32}, DType::f16);
  expect_two({sh, yh}, [&] {
    ng::ops::add_out(xh, hh, sh);
    ng::ops::rms_norm_out(sh, gh, 1e-6, yh);
  }, "float16");
  // The norm in a task group: an update could change what match() saw.
  expect_two({x, y}, [&] {
    ng::ops::add_out(x, h, x);
    const ng::Stream s = ng::current_stream();
    const bool capturing = s.is_capturing();  // eagerly: the same two kernels
    if (capturing) ng::task_group_begin(s);
    ng::ops::rms_norm_out(x, g, 1e-6, y);
    if (capturing) (void)ng::task_group_end(s);
  }, "grouped norm");
}

// A layer's rotation of q and k, then the cache write of k and v (Note [rotary_embedding then
// reshape_and_cache]): k's rotation and the write run as one task, with the eager bits, in both
// cache layouts and with a repeated and a skipped slot.
TEST(KernelFusion, RopeThenCacheWriteRunsAsOneTaskWithTheEagerBits) {
  const FusionScope on(true);
  const std::int64_t T = 5, QN = 6, KVN = 2, D = 64, NB = 3, BS = 4;
  const std::vector<float> q0 = random_values(T * QN * D, 21, -2, 2), k0 = random_values(T * KVN * D, 22, -2, 2);
  const Tensor q = make_tensor(q0, {T, QN, D}), k = make_tensor(k0, {T, KVN, D});
  const Tensor v = random_tensor({T, KVN, D}, 23), pos = int_tensor({7, 8, 9, 10, 11}, {T});
  for (const bool head_major : {true, false}) {
    const ng::Shape cs = head_major ? ng::Shape({NB, KVN, BS, D}) : ng::Shape({NB, BS, KVN * D});
    const Tensor kc = ng::empty(cs, DType::f16), vc = ng::empty(cs, DType::f16);
    const Tensor slots = int_tensor({3, 11, -1, 11, 0}, {T});  // 11 twice: the later token stays
    auto reset = [&] {
      std::memcpy(q.data(), q0.data(), q.nbytes());
      std::memcpy(k.data(), k0.data(), k.nbytes());
      std::memset(kc.data(), 0, kc.nbytes());
      std::memset(vc.data(), 0, vc.nbytes());
    };
    const ng::ops::RopeOptions rope{.theta = 1e5, .style = ng::ops::RopeStyle::norm};
    const std::string trace = expect_replay_bits({q, k, kc, vc}, reset, [&] {
      ng::ops::rotary_embedding_out(pos, q, q, rope);
      ng::ops::rotary_embedding_out(pos, k, k, rope);
      ng::ops::reshape_and_cache(k, v, kc, vc, slots,
                                 head_major ? ng::ops::KvCacheLayout::head_major : ng::ops::KvCacheLayout::token_major);
    });
    EXPECT_TRUE(contains(trace, named("rotary_embedding+reshape_and_cache"))) << head_major;
    EXPECT_TRUE(contains(trace, named("rotary_embedding"))) << "q's rotation stays its own task";
    EXPECT_FALSE(contains(trace, named("reshape_and_cache"))) << head_major;
  }
}

// A slot outside the cache fails the fused task as it fails the cache write: k rotated, nothing
// cached, the error naming both tasks and the slot.
TEST(KernelFusion, ABadSlotFailsTheFusedTaskAsItFailsTheCacheWrite) {
  const FusionScope on(true);
  const std::vector<float> k0 = random_values(2 * 4, 31, -2, 2);
  const Tensor k = make_tensor(k0, {2, 1, 4}), v = random_tensor({2, 1, 4}, 32);
  const Tensor pos = int_tensor({1, 2}, {2}), slots = int_tensor({3, 8}, {2});
  const Tensor kc = ng::empty({2, 4, 4}, DType::f16), vc = ng::empty({2, 4, 4}, DType::f16);
  std::memset(kc.data(), 0, kc.nbytes());
  std::memset(vc.data(), 0, vc.nbytes());
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::rotary_embedding_out(pos, k, k, {});
    ng::ops::reshape_and_cache(k, v, kc, vc, slots);
  }
  ng::ops::rotary_embedding_out(pos, make_tensor(k0, {2, 1, 4}), k, {});  // what the rotation leaves
  ng::device_synchronize();
  const std::vector<std::byte> rotated = bytes_of(k);
  std::memcpy(k.data(), k0.data(), k.nbytes());
  g.replay();
  EXPECT_TRUE(throws<ng::TaskError>([] { ng::device_synchronize(); },
                                    {"task #0 'rotary_embedding'", "fused as 'rotary_embedding+reshape_and_cache'",
                                     "task #1 'reshape_and_cache'", "slot_mapping[1] = 8: outside the cache's 8 slots"}));
  EXPECT_EQ(bytes_of(k), rotated);
  EXPECT_EQ(bytes_of(kc), std::vector<std::byte>(kc.nbytes(), std::byte{0}));
  EXPECT_EQ(bytes_of(vc), std::vector<std::byte>(vc.nbytes(), std::byte{0}));
}

TEST(KernelFusion, RegisterRefusesIncompleteFusionsAndASecondOneForAPair) {
  const ng::KernelFusion* add_norm = ng::find_kernel_fusion(ng::ops::add_kernel(), ng::ops::rms_norm_kernel());
  ASSERT_NE(add_norm, nullptr);
  EXPECT_STREQ(add_norm->name, "add+rms_norm");
  static const ng::KernelFusion no_match{.name = "broken", .first = &ng::ops::add_kernel(),
                                         .second = &ng::ops::rms_norm_kernel(), .match = nullptr,
                                         .cpu = add_norm->cpu};
  EXPECT_TRUE(throws<ng::ArgumentError>([] { ng::register_kernel_fusion(no_match); },
                                        {"fusion 'broken'", "must all be set"}));
  static const ng::KernelFusion again{.name = "again", .first = &ng::ops::add_kernel(),
                                      .second = &ng::ops::rms_norm_kernel(), .match = add_norm->match,
                                      .cpu = add_norm->cpu};
  EXPECT_TRUE(throws<ng::ArgumentError>([] { ng::register_kernel_fusion(again); },
                                        {"fusion 'again'", "'add' then 'rms_norm'", "already fuse as 'add+rms_norm'"}));
}

}  // namespace
}  // namespace llm_ops_test
