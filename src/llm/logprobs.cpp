// Note [Logprobs on the host]
// The issue asks for log-softmax and top-k as ops of the captured step; they are host code for now:
// the runner already has each row's logits in host memory (the cpu's logits are the step's buffer;
// on cuda read_back copies the rows when a row asks for logprobs), and only the rows that asked pay
// — one pass for the maximum, one for the sum of exponentials in double, one with a k-heap for the
// top k. A device op would save the cuda read-back of vocab floats per row; on the cpu it would
// cost the same work inside the step instead of after it.
#include "llm/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace npugraph::llm {

TokenLogprob token_logprob(const float* row, std::int64_t V, std::int32_t token, std::int64_t top) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  auto z = [&](std::int64_t j) { return std::isnan(row[j]) ? kNegInf : static_cast<double>(row[j]); };
  double max = kNegInf;
  for (std::int64_t j = 0; j < V; ++j) max = std::max(max, z(j));
  double lse = kNegInf;
  if (std::isfinite(max)) {
    double sum = 0;
    for (std::int64_t j = 0; j < V; ++j) sum += std::exp(z(j) - max);
    lse = max + std::log(sum);
  }
  auto lp = [&](std::int64_t j) { return std::isfinite(lse) ? z(j) - lse : kNegInf; };
  TokenLogprob out{.token = token, .logprob = lp(token)};
  const std::int64_t k = std::min(top, V);
  if (k <= 0) return out;
  // Most likely first: z descending, then id ascending — a strict order, so the top k is unique.
  auto before = [&](std::int32_t a, std::int32_t b) {
    const double za = z(a), zb = z(b);
    return za > zb || (za == zb && a < b);
  };
  std::vector<std::int32_t> heap;  // the best k so far, the worst of them on top
  heap.reserve(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < V; ++j) {
    const auto id = static_cast<std::int32_t>(j);
    if (static_cast<std::int64_t>(heap.size()) < k) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
  std::sort(heap.begin(), heap.end(), before);
  for (std::int32_t id : heap) out.top.emplace_back(id, lp(id));
  return out;
}

}  // namespace npugraph::llm
