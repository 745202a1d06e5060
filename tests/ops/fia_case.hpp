// FIA's parity harness (docs/adding_an_op.md, "The parity harness"): one FIA scenario, built
// consistently for the kernel (tensors + FiaOptions) and for the reference (RefArgs + RefInputs,
// fia_reference.hpp), and the parity check with its error bounds. Used by the parity suite, the
// update tests, the fast-kernel tests and the paged tests; with the FIA tests' shared helpers
// (layout shapes, the compressed mask, and the host tensors of tests/support).
//
// Error bounds (inputs uniform in [-1, 1), so |out| < 1.5 even with dequantised int8 values): the
// kernel reads the same rounded inputs as the reference (the conversions are exact), computes in
// float32 and rounds once to the output dtype. Rounding costs at most half an ulp: 2^-24 (fp32),
// 2^-11 = 4.9e-4 (fp16), 2^-8 = 3.9e-3 (bf16) relative to max(1, |out|); float32 arithmetic (dots
// of <= 16 terms, exp, sums over <= 256 columns) adds ~1e-6. Bounds on attention_out:
//   |out - ref| <= eps * max(1, |ref|), eps = 1e-5 (fp32), 5e-4 (fp16), 4e-3 (bf16);
// int8 output: |out - ref| <= 1 (the float32 and fp64 values may round to neighbours at .5);
// softmax_lse (float32 for every dtype): |lse - ref| <= 1e-5 * (1 + |ref|); +inf exactly.
#pragma once

#include <cstdint>
#include <string>

#include "npugraph/npugraph.hpp"
#include "ops/fia_reference.hpp"
#include "support/bitwise.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

namespace fia_test {

using npugraph::DType;
using npugraph::Shape;
using npugraph::Tensor;
using ngtest::bitwise_equal;
using ngtest::filled_tensor;
using ngtest::host_tensor;
using ngtest::int_tensor;
using ngtest::random_tensor;
using ngtest::read_back;
using ngtest::round_to;
using ngtest::throws;

// The shape of a (b, heads, seq, d) tensor in `layout` (BSH, BSND, BNSD, NSD, TND, NTD, NBSD;
// TND/NTD: seq is T and B is ignored; NSD: B must be 1).
Shape layout_shape(const std::string& layout, std::int64_t B, std::int64_t heads, std::int64_t seq,
                   std::int64_t D);

// torch_npu's compressed mask for sparse_mode 2-4: bool [2048, 2048], 1 above the diagonal
// (built once; shared).
const Tensor& compressed_mask();

enum class Kv : std::uint8_t { contiguous, paged_bsh, paged_bnsd };
enum class Lengths : std::uint8_t { full, ragged, broadcast };
enum class Antiquant : std::uint8_t {
  none, tensor, channel, token,                        // combined antiquant_scale/offset
  sep_tensor, sep_channel, sep_token, sep_head,        // key_/value_antiquant_* modes 0, 0, 1, 2
  sep_token_head, sep_paged_token, sep_paged_token_head,  // modes 3, 4, 5
  key_channel_value_token                              // key mode 0, value mode 1
};
enum class OutQuant : std::uint8_t { none, tensor, channel, tensor_offset, channel_offset };

struct FiaCase {
  std::string layout = "BNSD";  // input_layout
  DType dtype = DType::f16;
  int gqa = 1;
  int mode = -1;  // -1: no mask; 0: full mask + band; 1: full mask; 2-4: compressed mask
  bool decode = false;
  Kv kv = Kv::contiguous;
  bool padding = false;
  Lengths lengths = Lengths::ragged;
  bool pse = false, prefix = false, rope = false, dv = false;  // dv: value D != query D
  Antiquant antiquant = Antiquant::none;
  OutQuant quant = OutQuant::none;
  bool sink = false;  // learnable_sink [N] in [-2, 2): float32, float16 or bfloat16 as the seed says
  std::uint32_t seed = 1;

  std::string name() const;
};

struct FiaBuilt {
  RefArgs ref;
  RefInputs in;
  Tensor q, k, v;
  npugraph::ops::FiaOptions opt;
};

FiaBuilt build_case(const FiaCase& c);

// Runs the eager form and checks it against the reference (gtest failures, at most 10).
void expect_parity(const FiaBuilt& b);
// Checks computed outputs against the reference.
void expect_matches(const FiaBuilt& b, const Tensor& out, const Tensor& lse);

double out_bound(DType t);

}  // namespace fia_test
