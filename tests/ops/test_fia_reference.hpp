// A deliberately simple reference for fused_infer_attention_score: straight loops, fp64 everywhere,
// its own index formulas per layout. It shares no code with the kernel (it does not even use
// npugraph's tensors), so the parity tests compare two independent implementations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fia_test {

struct RefArgs {
  std::string layout;  // "BSH", "BSND", "BNSD"
  std::int64_t B = 1, N = 1, KVN = 1, Sq = 1, Skv = 1, D = 1;
  double scale = 1.0;
  std::int64_t pre_tokens = 2147483647, next_tokens = 2147483647;
  std::vector<std::int64_t> actual_seq_lengths;     // raw option values (empty, 1, or >= B)
  std::vector<std::int64_t> actual_seq_lengths_kv;
};

struct RefResult {
  std::vector<double> out;  // the query's layout, contiguous
  std::vector<double> lse;  // (B, N, Sq); +inf for rows past the length or with nothing visible
};

// q: the query's layout, contiguous; k, v: the key's. Values are already rounded to the dtype.
RefResult fia_reference(const RefArgs& a, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v);

// Index of element (b, n, s, d) in a contiguous tensor of `layout` with `heads` heads and `seq` rows.
std::int64_t ref_index(const std::string& layout, std::int64_t heads, std::int64_t seq,
                       std::int64_t D, std::int64_t b, std::int64_t n, std::int64_t s,
                       std::int64_t d);

}  // namespace fia_test
