// FIA's parameter block (fia_params.hpp): the buffer, block decoding, and the names the update
// check's messages use.
#include "ops/attention/fia_params.hpp"

#include <cstring>
#include <iterator>
#include <new>

namespace npugraph::ops::attention {

const char* layout_name(FiaLayout layout) {
  switch (layout) {
    case FiaLayout::bsh: return "BSH";
    case FiaLayout::bsnd: return "BSND";
    case FiaLayout::bnsd: return "BNSD";
    case FiaLayout::nsd: return "NSD";
    case FiaLayout::tnd: return "TND";
    case FiaLayout::ntd: return "NTD";
    case FiaLayout::nbsd: return "NBSD";
  }
  return "?";
}

std::string sig_text(const FiaTensorSig& s) {
  if (s.rank < 0) return "undefined";
  std::string r(dtype_name(s.dtype));
  r += '[';
  for (int i = 0; i < s.rank; ++i) r += (i ? ", " : "") + std::to_string(s.dims[i]);
  return r + ']';
}

const char* arg_name(FiaArg a) {
  static constexpr const char* kNames[] = {
      "query", "key", "value", "query_rope", "key_rope", "key_shared_prefix",
      "value_shared_prefix", "pse_shift", "atten_mask", "block_table", "query_padding_size",
      "kv_padding_size", "antiquant_scale", "antiquant_offset", "key_antiquant_scale",
      "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset", "quant_scale2",
      "quant_offset2"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(FiaArg::count));
  return kNames[static_cast<int>(a)];
}

std::int64_t fia_block_batch(std::span<const std::byte> block) {
  if (block.size() < sizeof(FiaParams)) return 0;
  auto field = [&]<class T>(T, std::size_t offset) {
    T v;
    std::memcpy(&v, block.data() + offset, sizeof v);
    return v;
  };
  const auto batch =
      field(std::int64_t{}, offsetof(FiaParams, key) + offsetof(FiaShapeKey, batch));
  const bool ok = field(std::uint32_t{}, offsetof(FiaParams, magic)) == kFiaMagic &&
                  field(std::uint32_t{}, offsetof(FiaParams, header_bytes)) == sizeof(FiaParams) &&
                  batch >= 1 && block.size() == fia_block_bytes(batch);
  return ok ? batch : 0;
}

FiaParams& FiaParamBuffer::start() {
  batch_ = 0;
  heap_.clear();
  return *::new (static_cast<void*>(inline_)) FiaParams{};
}

void FiaParamBuffer::size_tail(std::int64_t batch) {
  batch_ = batch;
  if (batch <= kInlineBatch) {
    heap_.clear();
    heap_.shrink_to_fit();
  } else {
    heap_.assign(fia_block_bytes(batch) / sizeof(std::int64_t), 0);
  }
}

std::span<const std::byte> FiaParamBuffer::bytes() {
  const std::size_t size = fia_block_bytes(batch_);
  if (heap_.empty()) return {inline_, size};
  auto* base = reinterpret_cast<std::byte*>(heap_.data());
  std::memcpy(base, inline_, sizeof(FiaParams));
  return {base, size};
}

}  // namespace npugraph::ops::attention
