// What the kernel re-checks when it runs: the block ids it reads from block_table and the
// left-padding starts. The op checks them on the host, but the tensors are read by the task, so a
// table or padding changed after the op (or between replays) must become a task error, never a
// wild read. Parity of paged KV itself is in the parity suite (Kv::paged_*).
#include <cstring>
#include <string>

#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"
#include "support/captured_fia.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;

TEST(FiaPagedKernel, BadBlockIdInTheTableIsATaskError) {
  const FiaBuilt b = build_case({.layout = "BNSD", .decode = true, .kv = Kv::paged_bnsd,
                                 .lengths = Lengths::full});
  const Tensor out = filled_tensor(b.q.shape(), b.q.dtype(), 0);
  const Tensor lse = filled_tensor({3, 4, 1, 1}, DType::f32, 0);
  const Tensor ws = ng::ops::fia_max_workspace(b.q, b.k, b.v, b.opt);
  att::FiaParamBuffer block;
  att::build_fia_params(b.q, b.k, b.v, b.opt, ws, out, lse, block);
  const auto bytes = block.bytes();
  const ng::ExecContext serial(nullptr, 1);
  EXPECT_NO_THROW(ng::ops::fia_kernel().cpu(bytes.data(), bytes.size(), serial));

  auto* table = b.opt.block_table.data_ptr<std::int32_t>();
  const std::int32_t saved = table[1 * 3 + 2];
  for (std::int32_t bad : {static_cast<std::int32_t>(b.ref.num_blocks), -1, 1 << 30}) {
    table[1 * 3 + 2] = bad;
    EXPECT_TRUE(ngtest::throws<ng::TaskError>(
        [&] { ng::ops::fia_kernel().cpu(bytes.data(), bytes.size(), serial); },
        {"fused_infer_attention_score: block_table[1][2] = " + std::to_string(bad),
         "is outside the key cache's " + std::to_string(b.ref.num_blocks) + " blocks"}));
  }
  table[1 * 3 + 2] = saved;
  EXPECT_NO_THROW(ng::ops::fia_kernel().cpu(bytes.data(), bytes.size(), serial));
}

TEST(FiaPagedKernel, ReplayWithACorruptedTableFailsAndRecovers) {
  const FiaBuilt b = build_case({.layout = "BSH", .mode = 3, .kv = Kv::paged_bsh,
                                 .lengths = Lengths::full});
  ngtest::CapturedFia c(b.q, b.k, b.v, b.opt, {.group = false});
  ASSERT_EQ(c.lse.shape(), (Shape{3, 4, 7, 1}));
  ng::Graph& graph = c.graph;
  const Tensor &out = c.out, &lse = c.lse;
  const ng::Stream s = ng::Stream::create();
  graph.replay(s);
  s.synchronize();
  expect_matches(b, out, lse);

  auto* table = b.opt.block_table.data_ptr<std::int32_t>();
  const std::int32_t saved = table[0];
  table[0] = 1000;  // the graph reads the table when it runs
  graph.replay(s);
  EXPECT_TRUE(ngtest::throws<ng::TaskError>([&] { s.synchronize(); },
                                                {"block_table[0][0] = 1000", "is outside the key cache"}));
  table[0] = saved;
  graph.replay(s);
  EXPECT_NO_THROW(s.synchronize());
  expect_matches(b, out, lse);
}

TEST(FiaPagedKernel, ReplayWithABadPaddingIsATaskError) {
  const FiaBuilt b = build_case({.layout = "BNSD", .mode = 1, .padding = true, .lengths = Lengths::full});
  ngtest::CapturedFia c(b.q, b.k, b.v, b.opt, {.group = false});
  ASSERT_EQ(c.lse.shape(), (Shape{3, 4, 9, 1}));
  ng::Graph& graph = c.graph;
  const Tensor &out = c.out, &lse = c.lse;
  const ng::Stream s = ng::Stream::create();
  graph.replay(s);
  s.synchronize();
  expect_matches(b, out, lse);
  *b.opt.kv_padding_size.data_ptr<std::int64_t>() = 4;  // 73 - 4 - 70 < 0
  graph.replay(s);
  EXPECT_TRUE(ngtest::throws<ng::TaskError>(
      [&] { s.synchronize(); }, {"kv_padding_size = 4", "batch 0's valid rows would start at 73 - 4 - 70 < 0"}));
  *b.opt.kv_padding_size.data_ptr<std::int64_t>() = 3;
  graph.replay(s);
  EXPECT_NO_THROW(s.synchronize());
}

// The table may hold anything past the blocks the lengths use (e.g. -1 padding).
TEST(FiaPagedKernel, UnusedTableEntriesAreNeverRead) {
  FiaBuilt b = build_case({.layout = "BNSD", .dtype = DType::f32, .decode = true,
                           .kv = Kv::paged_bsh, .lengths = Lengths::ragged});
  auto* table = b.opt.block_table.data_ptr<std::int32_t>();
  // Ragged kv lengths {57, 0, 41} with block_size 32: batch 0 uses 2 blocks, batch 1 none,
  // batch 2 two; the rest already is -1: make it wilder.
  table[0 * 3 + 2] = 1 << 30;
  for (int i = 0; i < 3; ++i) table[1 * 3 + i] = -7;
  table[2 * 3 + 2] = -(1 << 30);
  expect_parity(b);
}

}  // namespace
}  // namespace fia_test
