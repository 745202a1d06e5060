#include "attention/fia_cases.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>

namespace npugraph_bench {
namespace {

namespace ng = npugraph;

constexpr double kColdBytes = 128.0 * 1024 * 1024;  // 4x this machine's 32 MiB L3
constexpr int kMaxCopies = 8;

// Uniform values in [-1, 1) stored as `dtype` (xorshift: fast enough for 600 MiB of cache).
ng::Tensor random_tensor(const ng::Shape& shape, ng::DType dtype, std::uint32_t seed) {
  ng::Tensor t = ng::empty(shape, dtype);
  auto* p = t.data_ptr<std::uint16_t>();
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    const float f = static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
    p[i] = dtype == ng::DType::bf16 ? ng::f32_to_bf16_bits(f) : ng::f32_to_f16_bits(f);
  }
  return t;
}

// torch_npu's compressed mask for sparse_mode 2-4: 1 above the diagonal.
ng::Tensor compressed_mask() {
  constexpr std::int64_t S = 2048;
  ng::Tensor t = ng::empty({S, S}, ng::DType::boolean);
  auto* p = t.data_ptr<std::uint8_t>();
  for (std::int64_t i = 0; i < S; ++i)
    for (std::int64_t j = 0; j < S; ++j) p[i * S + j] = j > i ? 1 : 0;
  return t;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A paged cache holding exactly the blocks the lengths need, handed out in a shuffled order.
void make_paged(const FiaCaseSpec& s, std::uint32_t seed, FiaInputs& in) {
  std::int64_t max_blocks = 0, blocks = 0;
  for (std::int64_t len : s.kv_lengths) {
    max_blocks = std::max(max_blocks, ceil_div(len, s.block_size));
    blocks += ceil_div(len, s.block_size);
  }
  std::vector<std::int32_t> ids(static_cast<std::size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  ng::Tensor table = ng::empty({s.batch, max_blocks}, ng::DType::i32);
  auto* t = table.data_ptr<std::int32_t>();
  std::fill_n(t, table.numel(), 0);  // entries past a batch's length are never read
  std::size_t next = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t used = ceil_div(s.kv_lengths[static_cast<std::size_t>(b)], s.block_size);
    for (std::int64_t i = 0; i < used; ++i) t[b * max_blocks + i] = ids[next++];
  }
  const ng::Shape cache = s.bsh && !s.bsh_query_only ? ng::Shape{blocks, s.block_size, s.kv_heads * s.dim}
                                : ng::Shape{blocks, s.kv_heads, s.block_size, s.dim};
  in.k = random_tensor(cache, s.dtype, seed + 1);
  in.v = random_tensor(cache, s.dtype, seed + 2);
  in.opt.block_table = table;
  in.opt.block_size = s.block_size;
  in.opt.actual_seq_lengths_kv = s.kv_lengths;
}

FiaInputs make_inputs(const FiaCaseSpec& s, const ng::Tensor& q, std::uint32_t seed) {
  FiaInputs in;
  in.q = q;
  in.opt.num_heads = s.heads;
  in.opt.num_key_value_heads = s.kv_heads;
  in.opt.input_layout = s.bsh ? "BSH" : "BNSD";
  in.opt.scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  if (s.block_size > 0) {
    make_paged(s, seed, in);
  } else {
    const std::int64_t skv = *std::max_element(s.kv_lengths.begin(), s.kv_lengths.end());
    in.k = random_tensor({s.batch, s.kv_heads, skv, s.dim}, s.dtype, seed + 1);
    in.v = random_tensor({s.batch, s.kv_heads, skv, s.dim}, s.dtype, seed + 2);
    if (std::any_of(s.kv_lengths.begin(), s.kv_lengths.end(), [&](auto l) { return l != skv; }))
      in.opt.actual_seq_lengths_kv = s.kv_lengths;
  }
  if (s.causal) {
    static const ng::Tensor mask = compressed_mask();
    in.opt.atten_mask = mask;
    in.opt.sparse_mode = 3;
  }
  return in;
}

std::unique_ptr<FiaCase> build(const FiaCaseSpec& s) {
  auto c = std::make_unique<FiaCase>();
  const double kv_tokens = std::accumulate(s.kv_lengths.begin(), s.kv_lengths.end(), 0.0);
  c->kv_bytes = kv_tokens * static_cast<double>(s.kv_heads * s.dim) * 2.0 *
                static_cast<double>(ng::dtype_size(s.dtype));
  // Visible pairs under bottom-right causal masking: row i sees Lkv - Lq + i + 1 columns.
  for (std::int64_t lkv : s.kv_lengths) {
    const double lq = static_cast<double>(s.q_len), l = static_cast<double>(lkv);
    const double pairs = s.causal ? lq * (l - lq) + lq * (lq + 1) / 2 : lq * l;
    c->flops += 4.0 * static_cast<double>(s.dim * s.heads) * pairs;
  }
  const bool decode = s.q_len == 1;
  const int copies = decode && !s.hot && s.copies > 0 ? s.copies
                     : decode && !s.hot ? std::clamp(static_cast<int>(std::ceil(kColdBytes / c->kv_bytes)), 1,
                                         kMaxCopies)
                            : 1;
  const ng::Tensor q = s.bsh ? random_tensor({s.batch, s.q_len, s.heads * s.dim}, s.dtype, 7)
                             : random_tensor({s.batch, s.heads, s.q_len, s.dim}, s.dtype, 7);
  for (int i = 0; i < copies; ++i)
    c->copies.push_back(make_inputs(s, q, 100 + 10 * static_cast<std::uint32_t>(i)));
  const FiaInputs& in = c->copies.front();
  c->workspace = ng::ops::fia_max_workspace(in.q, in.k, in.v, in.opt);
  c->out = ng::empty(ng::ops::fia_output_shape(in.q, in.k, in.v, in.opt), s.dtype);
  c->lse = ng::empty({1}, ng::DType::f32);  // softmax_lse_flag is off: left untouched
  return c;
}

// lo..hi evenly spread, long and short interleaved as in a serving batch: the k-th shortest sits
// at (7 k) mod batch, a permutation for any batch not a multiple of 7 (torch_peer.py: the same).
std::vector<std::int64_t> ragged_lengths(std::int64_t batch, std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> l(static_cast<std::size_t>(batch));
  for (std::int64_t k = 0; k < batch; ++k)
    l[static_cast<std::size_t>(7 * k % batch)] = lo + (hi - lo) * k / (batch - 1);
  return l;
}

}  // namespace

const std::vector<FiaCaseSpec>& fia_case_specs() {
  using ng::DType;
  static const std::vector<FiaCaseSpec> specs = {
      {.name = "decode_f16", .kv_lengths = {4096}},
      {.name = "decode_bf16", .dtype = DType::bf16, .kv_lengths = {4096}},
      {.name = "decode_f16_paged128", .kv_lengths = {4096}, .block_size = 128},
      {.name = "decode_f16_gqa4", .kv_heads = 8, .kv_lengths = {4096}},
      {.name = "decode_f16_b16_ragged", .batch = 16, .kv_lengths = ragged_lengths(16, 512, 4096),
       .block_size = 128},
      {.name = "prefill_bf16_causal", .dtype = DType::bf16, .q_len = 2048, .kv_lengths = {2048},
       .causal = true},
      // In-cache (8 MiB of KV, for the last-level cache): the kernels' compute rate, beside the DRAM-bound cases above.
      {.name = "decode_f16_hot", .heads = 8, .kv_heads = 8, .kv_lengths = {2048}, .hot = true},
      {.name = "decode_f16_gqa4_hot", .kv_heads = 8, .kv_lengths = {2048}, .hot = true},
      // One attention layer of the SmolLM2-135M decode step (bench_llm): 9 heads on 3, D 64, a
      // paged cache of block 128, ~170 tokens; per-call fixed costs, not bandwidth, decide these.
      {.name = "decode_f16_small_b1", .heads = 9, .kv_heads = 3, .dim = 64, .kv_lengths = {170},
       .block_size = 128, .hot = true},
      {.name = "decode_f16_small_b8", .batch = 8, .heads = 9, .kv_heads = 3, .dim = 64,
       .kv_lengths = ragged_lengths(8, 150, 190), .block_size = 128, .hot = true},
      // The engine's old form of it: BSH, the cache [blocks, 128, KV_N * D] (a KV head's rows 384 bytes
      // apart), and cold: 64 copies (41 MB) in turn, as a step's 30 layers' caches exceed the L3.
      {.name = "decode_f16_small_b8_bsh", .batch = 8, .heads = 9, .kv_heads = 3, .dim = 64,
       .kv_lengths = ragged_lengths(8, 190, 230), .block_size = 128, .bsh = true, .copies = 64},
      // Its form now (Note [KV cache layout] in src/llm/runner.hpp): the cache head-major.
      {.name = "decode_f16_small_b8_bshnd", .batch = 8, .heads = 9, .kv_heads = 3, .dim = 64,
       .kv_lengths = ragged_lengths(8, 190, 230), .block_size = 128, .bsh = true, .bsh_query_only = true,
       .copies = 64},
      {.name = "decode_f16_small_b8_bshhot", .batch = 8, .heads = 9, .kv_heads = 3, .dim = 64,
       .kv_lengths = ragged_lengths(8, 190, 230), .block_size = 128, .bsh = true, .hot = true},
      // The same past kMinSplit (256): long chats, where each row's KV splits are its own length's
      // (batch invariance, Note [FIA decode splits]) — more units than the batch's total would ask.
      {.name = "decode_f16_small_b8_long", .batch = 8, .heads = 9, .kv_heads = 3, .dim = 64,
       .kv_lengths = ragged_lengths(8, 400, 1000), .block_size = 128, .hot = true},
      {.name = "decode_f16_small_b16_long", .batch = 16, .heads = 9, .kv_heads = 3, .dim = 64,
       .kv_lengths = ragged_lengths(16, 300, 2000), .block_size = 128, .hot = true},
  };
  return specs;
}

const FiaCase& fia_case(const FiaCaseSpec& spec) {
  static std::map<std::string, std::unique_ptr<FiaCase>> cache;
  auto& slot = cache[spec.name];
  if (!slot) slot = build(spec);
  return *slot;
}

}  // namespace npugraph_bench
