// The online-softmax state shared by the attention kernels (flash-attention style).
//
// A row's scores arrive in blocks. The state keeps the running maximum `max` and the running
// `sum` of exp(s - max) over the columns seen so far; the caller keeps the matching accumulator
// acc = sum of exp(s - max) * v_j and rescales it by the factor raise_max() returns. At the end,
// out = acc / sum and lse = max + log(sum).
//
// Special cases (they decide what a kernel writes, so they are pinned here):
//   - empty: no column, or only columns whose score is -inf. `max` stays -inf, `sum` stays 0, and
//     add() must not be called (exp(-inf - -inf) would be NaN). lse() is +inf: the convention of FIA
//     for a row with nothing visible, whose output is 0.
//   - NaN: add(NaN) makes `sum` (and the caller's acc) NaN, and raise_max(NaN) makes the maximum NaN
//     for good, so the row's output and lse turn NaN: NaN in, NaN out, never a silently finite row.
//   - +inf: a +inf score makes exp(inf - inf) = NaN: such a row is NaN as well.
#pragma once

#include <cmath>
#include <limits>

namespace npugraph::ops::attention {

struct SoftmaxState {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;

  bool empty() const { return max == -std::numeric_limits<float>::infinity(); }

  // Raises the running maximum to `m` when m is larger (or NaN) and returns the factor by which the
  // caller must scale its accumulator; `sum` is scaled here. Returns 1 when the maximum is unchanged.
  float raise_max(float m) {
    if (!(m > max) && !std::isnan(m)) return 1.0f;
    if (std::isnan(max)) return 1.0f;  // already NaN: stays NaN
    // From an empty state the factor is exp(-inf) = 0 (sum and acc are 0 anyway).
    const float factor = std::exp(max - m);
    max = m;
    sum *= factor;
    return factor;
  }

  // Adds a column with score s <= max (precondition: !empty()); returns its weight exp(s - max).
  float add(float s) {
    const float w = std::exp(s - max);
    sum += w;
    return w;
  }

  // log-sum-exp of the scores seen; +inf when empty.
  float lse() const {
    return empty() ? std::numeric_limits<float>::infinity() : max + std::log(sum);
  }

  // Merges two states over disjoint column sets: the result's accumulator is
  // acc = a_factor * acc_a + b_factor * acc_b. An empty side gets factor 0.
  static SoftmaxState merge(const SoftmaxState& a, const SoftmaxState& b, float& a_factor,
                            float& b_factor) {
    SoftmaxState r;
    if (a.empty() && b.empty()) {
      a_factor = b_factor = 0.0f;
      return r;
    }
    r.max = (std::isnan(a.max) || std::isnan(b.max)) ? std::numeric_limits<float>::quiet_NaN()
                                                     : (a.max > b.max ? a.max : b.max);
    a_factor = a.empty() ? 0.0f : std::exp(a.max - r.max);
    b_factor = b.empty() ? 0.0f : std::exp(b.max - r.max);
    r.sum = a.sum * a_factor + b.sum * b_factor;
    return r;
  }
};

}  // namespace npugraph::ops::attention
