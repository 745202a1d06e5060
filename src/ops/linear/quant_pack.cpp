// The rows16 layout's byte mapping (quant_pack.hpp).
#include "ops/linear/quant_pack.hpp"

#include <cstring>
#include <type_traits>

namespace npugraph::ops::quant_pack {
namespace {

struct Geometry {
  std::int64_t block;       // bytes of one ggml block
  std::int64_t qs_offset;   // where its quants start (after d, and m for Q4_1 or qh for Q5_0)
  std::int64_t qs_bytes;    // how many quant bytes
  std::int64_t nb;          // blocks per row
};

Geometry geometry(QuantType type, std::int64_t cols) {
  const auto block = static_cast<std::int64_t>(quant_block_bytes(type));
  const auto qs_offset = static_cast<std::int64_t>(quant_traits(type).quants_at);  // after d (and m)
  return {block, qs_offset, block - qs_offset, cols / kQuantBlock};
}

// Calls f(ggml offset within the row, packed offset within the weight, bytes) for every piece of
// row n's blocks (bytes a std::integral_constant: 2 or 4, so the copies are single moves).
template <class F>
void for_each_piece(const Geometry& g, std::int64_t n, F&& f) {
  constexpr std::int64_t P = kQuantPackRows;
  const std::int64_t r = n % P;
  const std::int64_t group = n / P * P * g.nb * g.block;
  for (std::int64_t b = 0; b < g.nb; ++b) {
    const std::int64_t src = b * g.block;
    const std::int64_t dst = group + b * P * g.block;
    constexpr std::integral_constant<std::size_t, 2> two;
    constexpr std::integral_constant<std::size_t, 4> four;
    f(src, dst + 2 * r, two);                                    // d
    if (g.qs_offset == 4) f(src + 2, dst + 2 * P + 2 * r, two);   // m (Q4_1)
    if (g.qs_offset == 6) f(src + 2, dst + 2 * P + 4 * r, four);  // qh (Q5_0): a vector, row r's lane
    const std::int64_t quants = dst + g.qs_offset * P;
    for (std::int64_t j = 0; j < g.qs_bytes / 4; ++j)
      f(src + g.qs_offset + 4 * j, quants + 64 * j + 4 * r, four);
  }
}

}  // namespace

void unpack(QuantType type, const std::byte* packed, std::int64_t cols, std::int64_t row0,
            std::int64_t count, std::byte* dst) {
  const Geometry g = geometry(type, cols);
  for (std::int64_t i = 0; i < count; ++i) {
    std::byte* row = dst + i * g.nb * g.block;
    for_each_piece(g, row0 + i, [&](std::int64_t s, std::int64_t p, auto n) {
      std::memcpy(row + s, packed + p, decltype(n)::value);
    });
  }
}

void pack(QuantType type, const std::byte* src, std::int64_t rows, std::int64_t cols,
          std::byte* packed) {
  const Geometry g = geometry(type, cols);
  std::memset(packed, 0, static_cast<std::size_t>(packed_bytes(rows, g.nb * g.block)));
  for (std::int64_t n = 0; n < rows; ++n) {
    const std::byte* row = src + n * g.nb * g.block;
    for_each_piece(g, n, [&](std::int64_t s, std::int64_t p, auto k) {
      std::memcpy(packed + p, row + s, decltype(k)::value);
    });
  }
}

}  // namespace npugraph::ops::quant_pack
