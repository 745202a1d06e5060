// reshape_and_cache: checks, launch, and the kernel (every slot checked before anything is written;
// tokens written in order, so a slot given twice keeps the later token).
#include "npugraph/ops/kv_cache.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>

#include "npugraph/ops/rope.hpp"
#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"
#include "ops/convert/float_rows.hpp"
#include "ops/kv_cache/cache_params.hpp"
#include "ops/rope/rope_params.hpp"

namespace npugraph::ops {
namespace {

using namespace detail_llm;

using cache_impl::CacheParams;

// One token's H values from `src` (of dtype `from`) into `dst` (of dtype `to`): a copy when the
// dtypes agree, else the exact row conversions of ops/convert (Note [Exact float rows]: the bits of
// a scalar T(float(x)), with SIMD).
void write_row(const void* src, DType from, void* dst, DType to, std::int64_t H) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<std::size_t>(H) * dtype_size(from));
    return;
  }
  if (from == DType::f32) return store_row_f32(static_cast<const float*>(src), H, dst, to);
  constexpr std::int64_t kChunk = 512;
  float buf[kChunk];
  const auto in = static_cast<const std::byte*>(src);
  const auto out = static_cast<std::byte*>(dst);
  const std::size_t isz = dtype_size(from), osz = dtype_size(to);
  for (std::int64_t i = 0; i < H; i += kChunk) {
    const std::int64_t n = std::min(kChunk, H - i);
    load_row_f32(in + static_cast<std::size_t>(i) * isz, from, n, buf);
    store_row_f32(buf, n, out + static_cast<std::size_t>(i) * osz, to);
  }
}

// Whether every slot is inside the cache (negative ones skip their token).
bool slots_inside(const CacheParams& p) {
  for (std::int64_t t = 0; t < p.T; ++t)
    if (p.slots[t] >= p.capacity) return false;
  return true;
}

void check_slots(const CacheParams& p) {
  for (std::int64_t t = 0; t < p.T; ++t)
    if (p.slots[t] >= p.capacity)
      NG_THROW(TaskError, "reshape_and_cache: slot_mapping[", t, "] = ", p.slots[t],
               ": outside the cache's ", p.capacity,
               " slots (num_blocks * block_size; negative skips a token) (nothing written)");
}

// One token is a few hundred elements: written on this thread, in token order, a run of values at a
// time (the whole token, or one head's D values in a head-major cache).
struct Rows {
  const CacheParams& p;
  std::int64_t run = p.head_major ? p.D : p.H;
  std::size_t in_size = dtype_size(p.kv_dtype), out_size = dtype_size(p.cache_dtype);
  const std::byte* in(const void* base, std::int64_t t, std::int64_t i) const {
    return static_cast<const std::byte*>(base) + static_cast<std::size_t>(t * p.H + i) * in_size;
  }
  std::byte* out(void* base, std::int64_t slot, std::int64_t i) const {
    return static_cast<std::byte*>(base) + static_cast<std::size_t>(cache_offset(p, slot, i)) * out_size;
  }
};

// Note [Cache writes miss]
// The slots written are new positions, not touched since the cache was allocated or since this
// slot's last sequence: in DRAM, whatever the cache's size, behind the step's weights. One row's
// stores wait for its lines one after another, so every destination line is asked for first (a
// prefetch for writing), and the misses overlap. Only for slots inside the cache. What is left is
// mostly the first write to each page, which faults it in (the OS zeroes it): a SmolLM2 step at
// batch 8 writes 8 tokens x 30 layers x 2 x 384 bytes (float16) of memory no step touched before,
// ~45 pages, ~500 us on a 2-core KVM guest (about bench_profile's k:reshape_and_cache_us there).
// A serving engine whose blocks were used before pays none. Filling the engine's caches at creation
// removed them (98 -> 45 us a step at batch 1) but committed the whole cache at once (1.5 GB by
// default for SmolLM2 in float32), so it is not done. Non-temporal stores instead of the prefetch
// changed nothing measurable. A long prefill prefetches more lines than L1 holds: they wait in L2
// or L3, still closer than DRAM.
void prefetch_destinations(const CacheParams& p) {
  const Rows r{p};
  for (std::int64_t t = 0; t < p.T; ++t) {
    const std::int64_t slot = p.slots[t];
    if (slot < 0) continue;
    for (std::int64_t i = 0; i < p.H; i += r.run)
      for (void* base : {p.key_cache, p.value_cache}) {
        const std::byte* first = r.out(base, slot, i);
        for (std::size_t b = 0; b < static_cast<std::size_t>(r.run) * r.out_size; b += 64)
          __builtin_prefetch(first + b, 1, 3);
      }
  }
}

void write_tokens(const CacheParams& p) {
  const Rows r{p};
  for (std::int64_t t = 0; t < p.T; ++t) {
    const std::int64_t slot = p.slots[t];
    if (slot < 0) continue;
    for (std::int64_t i = 0; i < p.H; i += r.run) {
      write_row(r.in(p.key, t, i), p.kv_dtype, r.out(p.key_cache, slot, i), p.cache_dtype, r.run);
      write_row(r.in(p.value, t, i), p.kv_dtype, r.out(p.value_cache, slot, i), p.cache_dtype, r.run);
    }
  }
}

void cache_cpu(const void* raw, std::size_t size, const ExecContext&) {
  const auto& p = params_of<CacheParams>(raw, size, "reshape_and_cache");
  check_slots(p);
  prefetch_destinations(p);
  write_tokens(p);
}

const KernelDef kCache{.name = "reshape_and_cache", .cpu = cache_cpu,
                       .cuda = NG_LLM_CUDA_SLOT(&cache_impl::cache_cuda)};

// Note [rotary_embedding then reshape_and_cache]
// A graph's rotation of the keys followed by their cache write runs as one task (Note [Kernel
// fusion] in npugraph/kernel.hpp): the two kernels whole, one after the other, so the bits and an
// error are theirs (a slot outside the cache throws after the rotation, nothing cached). What the
// pair gains is the cache's misses (Note [Cache writes miss]): asked for before the rotation, they
// are in flight while it runs, and one dispatch less. Matched where the rotation's output is the
// cached key (a decoder layer's k).
bool rope_then_cache_match(std::span<const std::byte> first, std::span<const std::byte> second) {
  if (first.size() != sizeof(rope_impl::RopeParams) || second.size() != sizeof(CacheParams)) return false;
  rope_impl::RopeParams r;
  CacheParams c;
  std::memcpy(&r, first.data(), sizeof r);
  std::memcpy(&c, second.data(), sizeof c);
  return r.out != nullptr && r.out == c.key;
}

void rope_then_cache_cpu(const void* first, std::size_t first_size, const void* second, std::size_t second_size,
                         const ExecContext& ctx) {
  const auto& c = params_of<CacheParams>(second, second_size, "reshape_and_cache");
  if (slots_inside(c)) prefetch_destinations(c);
  rotary_embedding_kernel().cpu(first, first_size, ctx);
  check_slots(c);
  write_tokens(c);
}

const KernelFusion kRopeThenCache{.name = "rotary_embedding+reshape_and_cache", .first = &rotary_embedding_kernel(),
                                  .second = &kCache, .match = rope_then_cache_match, .cpu = rope_then_cache_cpu};
const bool kRopeThenCacheRegistered = (register_kernel_fusion(kRopeThenCache), true);

// [T, KV_N, D] or [T, KV_N * D] -> the per-token element count.
std::int64_t token_elems(const char* arg, const Tensor& t) {
  check_float("reshape_and_cache", arg, t);
  NG_CHECK_ARG(t.dim() == 3 || t.dim() == 2, "reshape_and_cache: ", arg, " = ", t.str(),
               ": must be [tokens, kv_heads, head_dim] or [tokens, kv_heads * head_dim]");
  return t.dim() == 3 ? t.size(1) * t.size(2) : t.size(1);
}

// The cache's slot count, its shape checked against the layout and the token's H values (key:
// [T, KV_N, D] or [T, KV_N * D]).
std::int64_t cache_slots(const char* arg, const Tensor& c, KvCacheLayout layout, std::int64_t H,
                         const Tensor& key) {
  constexpr const char* op = "reshape_and_cache";
  check_float(op, arg, c);
  if (layout == KvCacheLayout::head_major) {
    NG_CHECK_ARG(c.dim() == 4 && c.size(0) > 0 && c.size(2) > 0, op, ": ", arg, " = ", c.str(),
                 ": a head_major cache must be [num_blocks, kv_heads, block_size, head_dim]");
    NG_CHECK_ARG(c.size(1) * c.size(3) == H && (key.dim() != 3 || (key.size(1) == c.size(1) &&
                                                                   key.size(2) == c.size(3))),
                 op, ": ", arg, " = ", c.str(), ": its kv_heads and head_dim must be those of key = ",
                 key.str());
    return c.size(0) * c.size(2);
  }
  NG_CHECK_ARG((c.dim() == 3 || c.dim() == 4) && c.size(0) > 0 && c.size(1) > 0, op, ": ", arg,
               " = ", c.str(),
               ": must be [num_blocks, block_size, kv_heads * head_dim] or [num_blocks, block_size, kv_heads, head_dim]");
  const std::int64_t per_slot = c.numel() / (c.size(0) * c.size(1));
  NG_CHECK_ARG(per_slot == H, op, ": ", arg, " = ", c.str(), ": its slots must hold the ", H,
               " elements of a token of key = ", key.str());
  return c.size(0) * c.size(1);
}

}  // namespace

const KernelDef& reshape_and_cache_kernel() { return kCache; }

void reshape_and_cache(const Tensor& key, const Tensor& value, const Tensor& key_cache,
                       const Tensor& value_cache, const Tensor& slot_mapping, KvCacheLayout layout) {
  const Stream& stream = current_stream_ref(key.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "reshape_and_cache";
  const std::int64_t H = token_elems("key", key);
  token_elems("value", value);
  NG_CHECK_ARG(value.shape() == key.shape() && value.dtype() == key.dtype(), op, ": value = ",
               value.str(), ": must have the shape and dtype of key = ", key.str());
  NG_CHECK_ARG(layout == KvCacheLayout::token_major || layout == KvCacheLayout::head_major, op,
               ": layout = ", static_cast<int>(layout), ": must be token_major or head_major");
  const std::int64_t slots = cache_slots("key_cache", key_cache, layout, H, key);
  cache_slots("value_cache", value_cache, layout, H, key);
  NG_CHECK_ARG(value_cache.shape() == key_cache.shape() && value_cache.dtype() == key_cache.dtype(),
               op, ": value_cache = ", value_cache.str(), ": must have the shape and dtype of key_cache = ",
               key_cache.str());
  NG_CHECK_ARG(key_cache.data() != value_cache.data(), op,
               ": key_cache and value_cache are the same memory");
  check_i32(op, "slot_mapping", slot_mapping, key.size(0), "one slot per token of key");
  for (const auto& [arg, t] : {std::pair<const char*, const Tensor*>{"value", &value},
                               {"key_cache", &key_cache}, {"value_cache", &value_cache},
                               {"slot_mapping", &slot_mapping}})
    check_same_device(op, arg, *t, key);
  CacheParams p;
  p.key = key.data();
  p.value = value.data();
  p.key_cache = key_cache.data();
  p.value_cache = value_cache.data();
  p.slots = slot_mapping.data_ptr<std::int32_t>();
  p.T = key.size(0);
  p.H = H;
  p.capacity = slots;
  p.kv_dtype = key.dtype();
  p.cache_dtype = key_cache.dtype();
  if (layout == KvCacheLayout::head_major) {
    p.head_major = true;
    p.block_size = key_cache.size(2);
    p.D = key_cache.size(3);
  }
  const Tensor* uses[] = {&key, &value, &key_cache, &value_cache, &slot_mapping};
  launch(stream, kCache, p, uses);
}

}  // namespace npugraph::ops
