// Parity of fused_infer_attention_score against the fp64 reference (fia_reference.hpp): one
// parameterized suite whose case names read layout_dtype_gqa_mask_kv[_leftPad]_lengths[_features].
// Error bounds: see fia_case.hpp.
//
//   Core:     every layout and output form x every mask mode (none, 0 with a full mask and band,
//             1, 2, 3, 4, decode, decode with a mask) x KV storage (contiguous, left padding,
//             paged in both cache layouts), with dtype, GQA ratio and lengths rotating;
//   Grid:     dtype x GQA ratio x lengths in full for BSH, BNSD and TND;
//   Features: pse_shift, shared prefix, rope, value D != query D, every antiquant mode, and the
//             quantised output, each over several layouts, masks, dtypes and KV storages.
// Combinations the operator rejects (documented in fia.hpp) are not generated.
#include <set>
#include <string>
#include <vector>

#include "ops/fia_case.hpp"

namespace fia_test {
namespace {

const std::vector<std::string> kLayouts = {"BSH",       "BSND",      "BNSD",      "NSD",
                                           "TND",       "NTD",       "BNSD_BSND", "BSH_BNSD",
                                           "BSND_BNSD", "NTD_TND",   "TND_NTD",   "BSH_NBSD",
                                           "BSND_NBSD", "BNSD_NBSD"};
const DType kDtypes[] = {DType::f16, DType::bf16, DType::f32};
const int kGqa[] = {1, 2, 4};

bool is_token(const std::string& layout) { return layout.rfind("TND", 0) == 0 || layout.rfind("NTD", 0) == 0; }

bool per_token(Antiquant a) {
  return a == Antiquant::token || a == Antiquant::sep_token || a == Antiquant::sep_token_head ||
         a == Antiquant::sep_paged_token || a == Antiquant::sep_paged_token_head ||
         a == Antiquant::key_channel_value_token;
}

// The combinations fia.hpp accepts.
bool valid(const FiaCase& c) {
  const bool token = is_token(c.layout);
  const bool paged = c.kv != Kv::contiguous;
  const bool int8 = c.antiquant != Antiquant::none;
  if (token && (c.decode || c.padding || c.mode == 0 || c.mode == 1 || c.pse || c.prefix || int8))
    return false;
  if (c.decode && c.mode > 0) return false;
  if (c.padding && (paged || c.prefix)) return false;
  if (c.prefix && (paged || c.rope || per_token(c.antiquant))) return false;
  if (c.rope && int8) return false;
  if (paged && int8 && !c.decode) return false;
  if (c.antiquant == Antiquant::channel && c.dv) return false;
  const bool decode_only = c.antiquant == Antiquant::sep_head ||
                           c.antiquant == Antiquant::sep_token_head ||
                           c.antiquant == Antiquant::sep_paged_token ||
                           c.antiquant == Antiquant::sep_paged_token_head;
  if (decode_only && !c.decode) return false;
  if ((c.antiquant == Antiquant::sep_paged_token || c.antiquant == Antiquant::sep_paged_token_head) &&
      !paged)
    return false;
  const bool channel = c.quant == OutQuant::channel || c.quant == OutQuant::channel_offset;
  if (channel && c.padding) return false;
  const bool offset = c.quant == OutQuant::tensor_offset || c.quant == OutQuant::channel_offset;
  if (offset && !c.decode && (c.mode == 0 || c.mode == 3 || c.mode == 4)) return false;
  return true;
}

std::vector<FiaCase> core_cases() {
  std::vector<FiaCase> r;
  std::set<std::string> names;
  std::uint32_t k = 0;
  for (const std::string& layout : kLayouts)
    for (int m = 0; m < 8; ++m)       // modes -1, 0, 1, 2, 3, 4, decode, decode + mask
      for (int store = 0; store < 3; ++store) {  // contiguous, left padding, paged
        FiaCase c;
        c.layout = layout;
        c.decode = m >= 6;
        c.mode = c.decode ? (m == 7 ? 0 : -1) : m - 1;
        c.padding = store == 1;
        c.kv = store == 2 ? (k % 2 ? Kv::paged_bnsd : Kv::paged_bsh) : Kv::contiguous;
        // Rotations with different periods, so that no axis moves in lockstep with the stores.
        c.dtype = kDtypes[(k + k / 3) % 3];
        c.gqa = kGqa[(k / 2 + k / 7) % 3];
        c.lengths = static_cast<Lengths>((k + k / 5) % 3);
        c.seed = k + 1;
        if (!valid(c) || !names.insert(c.name()).second) continue;
        r.push_back(c);
        ++k;
      }
  return r;
}

std::vector<FiaCase> grid_cases() {
  std::vector<FiaCase> r;
  std::uint32_t k = 500;
  for (const std::string layout : {"BSH", "BNSD", "TND"})
    for (DType dt : kDtypes)
      for (int gqa : kGqa)
        for (int len = 0; len < 3; ++len) {
          FiaCase c;
          c.layout = layout;
          c.dtype = dt;
          c.gqa = gqa;
          c.lengths = static_cast<Lengths>(len);
          c.mode = layout == std::string("TND") ? 3 : 0;
          c.seed = ++k;
          r.push_back(c);
        }
  return r;
}

std::vector<FiaCase> feature_cases() {
  std::vector<FiaCase> r;
  std::uint32_t k = 1000;
  std::set<std::string> names;
  auto add = [&](FiaCase c) {
    c.seed = ++k;
    c.dtype = kDtypes[(k + k / 3) % 3];
    c.gqa = kGqa[(k / 2 + k / 7) % 3];
    c.lengths = static_cast<Lengths>((k + k / 5) % 3);
    if (valid(c) && names.insert(c.name()).second) r.push_back(c);
  };
  // pse_shift over masks and storages.
  for (const std::string layout : {"BNSD", "BSH", "BSND_NBSD"})
    for (int m : {-1, 0, 1, 3, 4, 10, 11})  // 10: decode, 11: decode + mask
      for (int store = 0; store < 3; ++store)
        add({.layout = layout, .mode = m >= 10 ? m - 11 : m, .decode = m >= 10,
             .kv = store == 2 ? Kv::paged_bnsd : Kv::contiguous, .padding = store == 1,
             .pse = true});
  // Shared prefix (with masks, pse and int8 KV).
  for (const std::string layout : {"BNSD", "BSND", "BSH", "NSD", "BNSD_BSND"})
    for (int m : {-1, 0, 1, 3, 10, 11}) {
      add({.layout = layout, .mode = m >= 10 ? m - 11 : m, .decode = m >= 10, .prefix = true});
      add({.layout = layout, .mode = m >= 10 ? m - 11 : m, .decode = m >= 10, .pse = true,
           .prefix = true, .antiquant = Antiquant::sep_channel});
    }
  // Rope (MLA), contiguous and paged, with a different value D.
  for (const std::string layout : {"BNSD", "BSH", "TND", "NTD_TND", "BSND_NBSD"})
    for (int m : {-1, 3, 4, 10})
      for (Kv kv : {Kv::contiguous, Kv::paged_bsh, Kv::paged_bnsd})
        add({.layout = layout, .mode = m >= 10 ? -1 : m, .decode = m >= 10, .kv = kv, .rope = true,
             .dv = m == 3});
  // Value D != query D.
  for (const std::string& layout : kLayouts)
    add({.layout = layout, .mode = is_token(layout) ? 2 : 1, .dv = true});
  // Antiquant: every mode, decode and prefill, contiguous and paged.
  for (int a = 1; a <= static_cast<int>(Antiquant::key_channel_value_token); ++a)
    for (const std::string layout : {"BNSD", "BSH", "BSND"})
      for (int m : {-1, 1, 10, 11})
        for (Kv kv : {Kv::contiguous, Kv::paged_bsh, Kv::paged_bnsd})
          add({.layout = layout, .mode = m >= 10 ? m - 11 : m, .decode = m >= 10, .kv = kv,
               .padding = layout == std::string("BSND") && kv == Kv::contiguous && m == 1,
               .antiquant = static_cast<Antiquant>(a)});
  // Quantised output.
  for (int q = 1; q <= static_cast<int>(OutQuant::channel_offset); ++q)
    for (const std::string layout : {"BNSD", "BSH", "TND", "BSND_NBSD"})
      for (int m : {-1, 1, 2, 4, 10})
        add({.layout = layout, .mode = m >= 10 ? -1 : m, .decode = m >= 10,
             .kv = m == 2 ? Kv::paged_bsh : Kv::contiguous, .padding = m == 1 && q % 2 == 1,
             .quant = static_cast<OutQuant>(q)});
  return r;
}

class FiaParity : public ::testing::TestWithParam<FiaCase> {};

TEST_P(FiaParity, MatchesReference) { expect_parity(build_case(GetParam())); }

std::string case_name(const ::testing::TestParamInfo<FiaCase>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Core, FiaParity, ::testing::ValuesIn(core_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Grid, FiaParity, ::testing::ValuesIn(grid_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Features, FiaParity, ::testing::ValuesIn(feature_cases()), case_name);

}  // namespace
}  // namespace fia_test
