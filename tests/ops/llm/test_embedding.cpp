// embedding from Q8_0 / Q4_1 (dequantised exactly as ggml, compared with the GGUF reader) and
// float tables; ids of any shape; an out-of-range id fails the task with a message naming it and
// writes nothing; a captured graph embeds each replay's ids; argument errors.
#include <gtest/gtest.h>

#include <cstring>

#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/embedding.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::QuantType;

TEST(Embedding, QuantTableRowsAreGgmlsDequantisation) {
  const std::int64_t V = 50, H = 96;
  for (QuantType type : {QuantType::q8_0, QuantType::q4_1, QuantType::q4_0}) {
    const auto values = random_values(V * H, 1);
    const auto table = ng::ops::quantize(type, values, V, H);
    const std::vector<std::int32_t> ids = {0, 49, 7, 7, 23, 1};
    for (DType dt : {DType::f32, DType::f16}) {
      const Tensor out = ng::ops::embedding(int_tensor(ids, {2, 3}), table, dt);
      ng::device_synchronize();
      EXPECT_EQ(out.shape(), ng::Shape({2, 3, H}));
      for (std::size_t t = 0; t < ids.size(); ++t) {
        std::vector<float> row(H);
        const auto bytes = std::span<const std::byte>(table.data() + ids[t] * table.row_bytes(),
                                                      static_cast<std::size_t>(table.row_bytes()));
        ng::llm::dequantize_row(static_cast<ng::llm::GgmlType>(static_cast<std::uint32_t>(type)), bytes, row);
        for (std::int64_t i = 0; i < H; ++i) {
          const float want = dt == DType::f32 ? row[i] : static_cast<float>(ng::half(row[i]));
          ASSERT_EQ(at(out, static_cast<std::int64_t>(t) * H + i), want) << t << " " << i;
        }
      }
    }
  }
}

TEST(Embedding, FloatTables) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor table = random_tensor({10, 7}, 2, dt);
    const Tensor out = ng::ops::embedding(int_tensor({9, 0, 3}, {3}), table);
    ng::device_synchronize();
    const auto tv = floats(table);
    const int ids[] = {9, 0, 3};
    for (int t = 0; t < 3; ++t)
      for (int i = 0; i < 7; ++i) EXPECT_EQ(at(out, t * 7 + i), tv[ids[t] * 7 + i]);
  }
}

TEST(Embedding, AnIdOutOfRangeFailsTheTaskNamingIt) {
  const auto table = ng::ops::quantize(QuantType::q8_0, random_values(4 * 32, 3), 4, 32);
  const Tensor out = ng::empty({3, 32}, DType::f32);
  std::memset(out.data(), 0, out.nbytes());
  ng::ops::embedding_out(int_tensor({1, 4, 2}, {3}), table, out);
  EXPECT_TASK_ERROR(ng::current_stream().synchronize(), "embedding",
                    "ids[1] = 4: outside the vocabulary [0, 4)");
  for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(at(out, i), 0.0f);  // nothing written
  ng::ops::embedding_out(int_tensor({-1}, {1}), table, ng::empty({1, 32}, DType::f32));
  EXPECT_TASK_ERROR(ng::current_stream().synchronize(), "ids[0] = -1");
  // The stream stays usable.
  const Tensor ok = ng::ops::embedding(int_tensor({3}, {1}), table);
  ng::current_stream().synchronize();
  EXPECT_EQ(ok.shape(), ng::Shape({1, 32}));
}

TEST(Embedding, CapturedGraphReadsEachReplaysIds) {
  const auto table = ng::ops::quantize(QuantType::q8_0, random_values(64 * 64, 4), 64, 64);
  const Tensor ids = int_tensor({5, 9}, {2});
  const Tensor out = ng::empty({2, 64}, DType::f32);
  expect_replay_matches_eager({out}, [&] { ng::ops::embedding_out(ids, table, out); });
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::embedding_out(ids, table, out);
  }
  ids.data_ptr<std::int32_t>()[0] = 63;
  g.replay();
  ng::device_synchronize();
  const Tensor eager = ng::ops::embedding(int_tensor({63, 9}, {2}), table);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(out, eager));
  ids.data_ptr<std::int32_t>()[1] = 64;  // a bad id in a replay is the replay's task error
  g.replay();
  EXPECT_TASK_ERROR(ng::device_synchronize(), "ids[1] = 64: outside the vocabulary [0, 64)");
}

TEST(Embedding, ArgumentErrors) {
  const auto table = ng::ops::quantize(QuantType::q8_0, random_values(4 * 32, 3), 4, 32);
  using ng::ops::embedding_out;
  EXPECT_ARG_ERROR(embedding_out(ng::empty({3}, DType::i64), table, ng::empty({3, 32}, DType::f32)),
                   "embedding: ids = int64[3]: must be a contiguous int32 tensor");
  EXPECT_ARG_ERROR(embedding_out(int_tensor({0, 1, 2}, {3}), table, ng::empty({3, 31}, DType::f32)),
                   "embedding: out = float32[3, 31]: must have the shape [3, 32] (ids = int32[3], table = Q8_0[4, 32])");
  EXPECT_ARG_ERROR(embedding_out(int_tensor({0}, {1}), ng::empty({4}, DType::f32), ng::empty({1, 4}, DType::f32)),
                   "embedding: table = float32[4]: must be a matrix [vocab, hidden]");
  EXPECT_ARG_ERROR(embedding_out(int_tensor({0}, {1}), ng::ops::QuantWeight(), ng::empty({1, 4}, DType::f32)),
                   "embedding: table is undefined");
}

}  // namespace
}  // namespace llm_ops_test
