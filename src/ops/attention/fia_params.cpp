// FIA's parameter block (fia_params.hpp): the names the update check's messages use (the buffer
// and the block decoding are inline in the header: they run on every launch and every update).
#include "ops/attention/fia_params.hpp"

#include <iterator>

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

std::string sig_text(const FiaTensorSig& s, const FiaTensorDims& dims) {
  if (s.rank < 0) return "undefined";
  std::string r(dtype_name(s.dtype));
  r += '[';
  for (int i = 0; i < s.rank && i < 4; ++i) r += (i ? ", " : "") + std::to_string(dims.d[i]);
  return r + ']';
}

const char* arg_name(FiaArg a) {
  static constexpr const char* kNames[] = {
      "query", "key", "value", "query_rope", "key_rope", "key_shared_prefix",
      "value_shared_prefix", "pse_shift", "atten_mask", "block_table", "query_padding_size",
      "kv_padding_size", "antiquant_scale", "antiquant_offset", "key_antiquant_scale",
      "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset", "quant_scale2",
      "quant_offset2", "learnable_sink"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(FiaArg::count));
  return kNames[static_cast<int>(a)];
}

}  // namespace npugraph::ops::attention
