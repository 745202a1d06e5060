// The fixture of the FIA error tests: a valid base case that each test breaks one way.
// Base case: BNSD float16, B = 2, N = 4, KV_N = 2, Sq = 3, Skv = 5, D = 8.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/fia_case.hpp"

namespace fia_test {

namespace ng = npugraph;
using ng::ops::FiaOptions;

inline const std::string kPrefix = "fused_infer_attention_score: ";

class FiaErrors : public ::testing::Test {
 protected:
  // (Re)builds the valid base case; tests call it again to start over.
  void SetUp() override {
    opt = FiaOptions{.num_heads = 4, .input_layout = "BNSD", .num_key_value_heads = 2,
                     .softmax_lse_flag = true};
    q = random_tensor(qv, {2, 4, 3, 8}, DType::f16, 1);
    k = random_tensor(kv, {2, 2, 5, 8}, DType::f16, 2);
    v = random_tensor(vv, {2, 2, 5, 8}, DType::f16, 3);
    out = filled_tensor(q.shape(), DType::f16, 0);
    lse = filled_tensor({2, 4, 3, 1}, DType::f32, 0);
    ws = filled_tensor({ng::ops::fia_workspace_bytes(q, k, v, opt)}, DType::u8, 0);
  }
  // The `.out` form with the current members.
  std::function<void()> call() {
    return [this] { ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse); };
  }
  std::function<void()> eager() {
    return [this] { (void)ng::ops::fused_infer_attention_score(q, k, v, opt); };
  }
  std::function<void()> workspace_bytes() {
    return [this] { (void)ng::ops::fia_workspace_bytes(q, k, v, opt); };
  }

  FiaOptions opt;
  std::vector<double> qv, kv, vv;
  Tensor q, k, v, out, lse, ws;
};

}  // namespace fia_test
