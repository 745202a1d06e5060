#include "ops/test_fia_reference.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace fia_test {

std::int64_t ref_index(const std::string& layout, std::int64_t heads, std::int64_t seq,
                       std::int64_t D, std::int64_t b, std::int64_t n, std::int64_t s,
                       std::int64_t d) {
  if (layout == "BNSD") return ((b * heads + n) * seq + s) * D + d;
  if (layout == "BSND") return ((b * seq + s) * heads + n) * D + d;
  if (layout == "BSH") return (b * seq + s) * (heads * D) + n * D + d;
  throw std::invalid_argument("reference: unknown layout " + layout);
}

namespace {

std::int64_t length_of(const std::vector<std::int64_t>& values, std::int64_t b, std::int64_t full) {
  if (values.empty()) return full;
  if (values.size() == 1) return values[0];
  return values[static_cast<std::size_t>(b)];
}

}  // namespace

RefResult fia_reference(const RefArgs& a, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v) {
  const double inf = std::numeric_limits<double>::infinity();
  RefResult r;
  r.out.assign(static_cast<std::size_t>(a.B * a.N * a.Sq * a.D), 0.0);
  r.lse.assign(static_cast<std::size_t>(a.B * a.N * a.Sq), inf);
  const bool decode = a.Sq == 1;
  const std::int64_t group = a.N / a.KVN;
  for (std::int64_t b = 0; b < a.B; ++b) {
    const std::int64_t aq = decode ? 1 : length_of(a.actual_seq_lengths, b, a.Sq);
    const std::int64_t akv = length_of(a.actual_seq_lengths_kv, b, a.Skv);
    for (std::int64_t n = 0; n < a.N; ++n) {
      const std::int64_t kvn = n / group;
      for (std::int64_t i = 0; i < aq; ++i) {
        std::vector<double> s(static_cast<std::size_t>(akv));
        std::vector<bool> visible(static_cast<std::size_t>(akv));
        double mx = -inf;
        for (std::int64_t j = 0; j < akv; ++j) {
          visible[j] = decode || (j - i <= a.next_tokens && i - j <= a.pre_tokens);
          if (!visible[j]) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < a.D; ++d)
            dot += q[ref_index(a.layout, a.N, a.Sq, a.D, b, n, i, d)] *
                   k[ref_index(a.layout, a.KVN, a.Skv, a.D, b, kvn, j, d)];
          s[j] = a.scale * dot;
          if (s[j] > mx) mx = s[j];
        }
        if (mx == -inf) continue;  // nothing visible: out 0, lse +inf
        double sum = 0;
        for (std::int64_t j = 0; j < akv; ++j)
          if (visible[j]) sum += std::exp(s[j] - mx);
        for (std::int64_t d = 0; d < a.D; ++d) {
          double o = 0;
          for (std::int64_t j = 0; j < akv; ++j)
            if (visible[j])
              o += std::exp(s[j] - mx) / sum * v[ref_index(a.layout, a.KVN, a.Skv, a.D, b, kvn, j, d)];
          r.out[ref_index(a.layout, a.N, a.Sq, a.D, b, n, i, d)] = o;
        }
        r.lse[(b * a.N + n) * a.Sq + i] = std::log(sum) + mx;
      }
    }
  }
  return r;
}

}  // namespace fia_test
