// The cases and new host values the re-plan tests (test_fia_replan.cpp) and the host-value update
// tests (test_fia_host_update.cpp) share.
#pragma once

#include <vector>

#include "ops/fia_case.hpp"

namespace fia_test {

// New host values for a case's options, valid for it: lengths shortened by one where that stays
// valid (a length cannot grow past what the tensors hold), another scale, a band.
inline npugraph::ops::FiaOptions next_host_values(const FiaBuilt& b) {
  npugraph::ops::FiaOptions o = b.opt;
  const bool token = o.input_layout.rfind("TND", 0) == 0 || o.input_layout.rfind("NTD", 0) == 0;
  if (!token) {
    for (auto& x : o.actual_seq_lengths_kv)
      if (x > 1) --x;
  }
  o.scale = o.scale * 0.5 + 0.125;
  if (o.sparse_mode == 0) {
    o.pre_tokens = 7;
    o.next_tokens = 3;
  }
  return o;
}

// A spread of layouts, decode, paged KV, masks, padding, pse, shared prefix, rope, antiquant, the
// int8 output and learnable_sink.
inline std::vector<FiaCase> replan_cases() {
  return {
      {.layout = "BNSD", .gqa = 2, .decode = true},
      {.layout = "BNSD", .dtype = DType::bf16, .gqa = 4, .decode = true, .kv = Kv::paged_bnsd},
      {.layout = "BSH", .mode = 0, .pse = true},
      {.layout = "BSND", .mode = 1, .padding = true},
      {.layout = "TND", .mode = 3},
      {.layout = "NTD_TND", .mode = 4, .rope = true},
      {.layout = "BSND_NBSD", .mode = -1, .kv = Kv::paged_bsh, .rope = true},
      {.layout = "BNSD", .mode = 0, .decode = true, .prefix = true},
      {.layout = "BSH", .mode = -1, .decode = true, .kv = Kv::paged_bsh,
       .antiquant = Antiquant::sep_paged_token},
      {.layout = "BNSD", .mode = -1, .decode = true, .antiquant = Antiquant::key_channel_value_token},
      {.layout = "BNSD", .mode = 1, .quant = OutQuant::channel_offset},
      {.layout = "NSD", .dtype = DType::f32, .mode = 2},
      {.layout = "BNSD", .gqa = 2, .decode = true, .sink = true},
      {.layout = "TND", .mode = 3, .sink = true, .seed = 3},
  };
}

}  // namespace fia_test
