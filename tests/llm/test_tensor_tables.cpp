// Note [Tensor tables]: each architecture's table of layer tensors is what the checker, loader and
// runner walk. Every table's names are unique and every row lands somewhere; a model loaded from a
// tiny file of each architecture holds every row, with the shape the row gives from the config
// (gemma3's rows with no member in LayerWeights::extra); a file lacking a row's tensor is refused
// naming it; a tensor-parallel rank holds its share of each row.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "llm/arch/architecture.hpp"
#include "llm/tiny_model.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/model.hpp"

namespace {

namespace llm = npugraph::llm;
using ngtest::TinyLlama;
using ngtest::write_tiny_llama;

std::vector<std::int64_t> dims(const npugraph::Shape& s) { return {s.begin(), s.begin() + s.size()}; }

std::vector<std::int64_t> shape_of(const llm::LayerWeights& w, const llm::LayerTensor& t) {
  const llm::Matrix* m = t.as_matrix ? &(w.*t.as_matrix) : nullptr;
  if (!t.as_matrix && !t.as_vector) m = &w.extra.at(t.name);
  if (m) {
    if (!t.matrix) return dims(m->dense.shape());
    return {m->rows(), m->cols()};
  }
  return dims((w.*t.as_vector).shape());
}

TEST(TensorTables, NamesAreUniqueAndEveryRowLandsSomewhere) {
  for (const char* name : {"llama", "qwen2", "qwen3", "gemma3"}) {
    const llm::Architecture& a = llm::architecture(name, "test");
    std::set<std::string> seen;
    for (const llm::LayerTensor& t : a.layer_tensors()) {
      EXPECT_TRUE(seen.insert(t.name).second) << name << ": " << t.name << " twice";
      EXPECT_FALSE(t.as_matrix && t.as_vector) << name << ": " << t.name;
      EXPECT_TRUE(!t.as_matrix || t.matrix) << name << ": " << t.name << " is a vector in a Matrix slot";
      EXPECT_TRUE(!t.as_vector || !t.matrix) << name << ": " << t.name << " is a matrix in a Tensor slot";
    }
    EXPECT_GE(seen.size(), 9u) << name;
  }
}

TEST(TensorTables, LoadedModelsHoldEveryRowAtItsShape) {
  for (TinyLlama o : {TinyLlama{.architecture = "llama"}, TinyLlama{.architecture = "qwen2", .qkv_bias = true},
                      TinyLlama{.architecture = "qwen3"}, TinyLlama{.architecture = "gemma3", .sliding_window = 8}}) {
    const auto model = llm::Model::load(write_tiny_llama("tables_" + o.architecture + ".gguf", o));
    const llm::Architecture& a = llm::architecture(o.architecture, "test");
    std::size_t extra = 0;
    for (const llm::LayerTensor& t : a.layer_tensors()) {
      extra += !t.as_matrix && !t.as_vector;
      for (const llm::LayerWeights& w : model->layers)
        EXPECT_EQ(shape_of(w, t), t.shape(model->config())) << o.architecture << ": " << t.name;
    }
    EXPECT_EQ(model->layers[0].extra.size(), extra) << o.architecture;
    if (o.architecture == "gemma3") {
      EXPECT_EQ(extra, 2u);  // its post-sublayer norms
    }
  }
}

TEST(TensorTables, AFileWithoutARowsTensorIsRefusedNamingIt) {
  // qwen2's table has the q/k/v biases; a file without them
  const auto path = write_tiny_llama("tables_qwen2_nobias.gguf", {.architecture = "qwen2", .qkv_bias = false});
  try {
    (void)llm::Model::load(path);
    ADD_FAILURE() << "loaded a qwen2 file without biases";
  } catch (const npugraph::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.bias"), std::string::npos) << e.what();
  }
}

TEST(TensorTables, ATensorParallelRankHoldsItsShareOfEachRow) {
  const TinyLlama o{.architecture = "qwen2", .qkv_bias = true};
  const auto whole = llm::Model::load(write_tiny_llama("tables_tp.gguf", o));
  const auto half = llm::Model::load(write_tiny_llama("tables_tp.gguf", o), {.rank = 1, .size = 2});
  const llm::ModelConfig& c = whole->config();
  const llm::ModelShard& s = half->shard();
  for (const llm::LayerTensor& t : llm::architecture("qwen2", "test").layer_tensors()) {
    auto want = t.shape(c);
    const std::int64_t hd = c.head_dim;
    switch (t.shard) {
      case llm::ShardBy::whole: break;
      case llm::ShardBy::query_rows: want[0] = s.heads * hd; break;
      case llm::ShardBy::kv_rows: want[0] = s.kv_heads * hd; break;
      case llm::ShardBy::ffn_rows: want[0] = s.ffn; break;
      case llm::ShardBy::query_cols: want[1] = s.heads * hd; break;
      case llm::ShardBy::ffn_cols: want[1] = s.ffn; break;
    }
    EXPECT_EQ(shape_of(half->layers[0], t), want) << t.name;
  }
  // the rank's q bias is the second half of the whole one
  const llm::LayerWeights& wl = whole->layers[0];
  const llm::LayerWeights& hl = half->layers[0];
  const auto* a = wl.q_bias.data_ptr<float>() + s.head0 * c.head_dim;
  for (std::int64_t i = 0; i < hl.q_bias.numel(); ++i) EXPECT_EQ(hl.q_bias.data_ptr<float>()[i], a[i]);
}

}  // namespace
