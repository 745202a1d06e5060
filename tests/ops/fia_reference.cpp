#include "ops/fia_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fia_test {

namespace {

enum class Lay { bnsd, bsnd, bsh, nsd, tnd, nbsd };

Lay parse(const std::string& layout) {
  if (layout == "BNSD") return Lay::bnsd;
  if (layout == "BSND") return Lay::bsnd;
  if (layout == "BSH") return Lay::bsh;
  if (layout == "NSD" || layout == "NTD") return Lay::nsd;  // NTD: [N, T, D] indexes like NSD
  if (layout == "TND") return Lay::tnd;
  if (layout == "NBSD") return Lay::nbsd;
  throw std::invalid_argument("reference: unknown layout " + layout);
}

std::int64_t index(Lay l, std::int64_t B, std::int64_t heads, std::int64_t seq, std::int64_t D,
                   std::int64_t b, std::int64_t n, std::int64_t s, std::int64_t d) {
  switch (l) {
    case Lay::bnsd: return ((b * heads + n) * seq + s) * D + d;
    case Lay::bsnd: return ((b * seq + s) * heads + n) * D + d;
    case Lay::bsh: return (b * seq + s) * (heads * D) + n * D + d;
    case Lay::nsd: return (n * seq + s) * D + d;
    case Lay::tnd: return (s * heads + n) * D + d;
    case Lay::nbsd: return ((n * B + b) * seq + s) * D + d;
  }
  return 0;
}

}  // namespace

std::int64_t ref_index(const std::string& layout, std::int64_t B, std::int64_t heads,
                       std::int64_t seq, std::int64_t D, std::int64_t b, std::int64_t n,
                       std::int64_t s, std::int64_t d) {
  return index(parse(layout), B, heads, seq, D, b, n, s, d);
}

namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::int64_t length_of(const std::vector<std::int64_t>& values, std::int64_t b, std::int64_t full) {
  if (values.empty()) return full;
  if (values.size() == 1) return values[0];
  return values[static_cast<std::size_t>(b)];
}

double round_half_even(double x) {
  const double f = std::floor(x);
  const double r = x - f;
  if (r > 0.5) return f + 1;
  if (r < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t x : shape) n *= x;
  return n;
}

// Where one KV column of a batch comes from.
struct Token {
  bool prefix = false;
  std::int64_t pos = 0;    // prefix: its index; key: the index in the key's S (paged: t)
  std::int64_t block = 0;  // paged: block id and row
  std::int64_t row = 0;
};

// The value of an antiquant parameter for element d of KV head kvh of `tok` in batch b (see
// fia.hpp for the shapes). `which`: 0 key / 1 value of a combined [2, ...] parameter, -1 separate.
double param_at(const RefTensor& p, std::int64_t mode, int which, std::int64_t D, std::int64_t KVN,
                std::int64_t b, std::int64_t kvh, const Token& tok, std::int64_t d,
                std::int64_t block_size) {
  std::int64_t n = numel(p.shape), base = 0;
  if (which >= 0) {
    n /= 2;
    base = which * n;
  }
  const std::int64_t S = p.shape.back();
  switch (mode) {
    case 0:  // per-tensor, or per-channel: every accepted shape flattens to kvh * D + d
      return n == 1 ? p.values[base] : p.values[base + kvh * D + d];
    case 1:  // per-token [B, S] / [1, B, S] / combined [2, B, S]
      return p.values[base + b * S + tok.pos];
    case 2:  // per-tensor per-head [KV_N]
      return p.values[base + kvh];
    case 3:  // per-token per-head [B, KV_N, S]
      return p.values[base + (b * KVN + kvh) * S + tok.pos];
    case 4:  // paged per-token [blocks, block_size]
      return p.values[base + tok.block * block_size + tok.row];
    case 5:  // paged per-token per-head [blocks, KV_N, block_size]
      return p.values[base + (tok.block * KVN + kvh) * block_size + tok.row];
    default: throw std::invalid_argument("reference: antiquant mode");
  }
}

// Mask/pse element for (b, [n,] i, j) in the shapes fia.hpp lists (the last two dims are (i, j),
// or only j for decode masks; a leading dim of 1 broadcasts over batch).
double mask_at(const RefTensor& m, bool decode, std::int64_t b, std::int64_t i, std::int64_t j) {
  const auto& s = m.shape;
  const std::int64_t skv = s.back();
  if (decode) {
    const std::int64_t bb = s[0] == 1 ? 0 : b;
    return m.values[bb * skv + j];
  }
  const std::int64_t sq = s[s.size() - 2];
  const std::int64_t bb = s.size() >= 3 && s[0] != 1 ? b : 0;
  return m.values[(bb * sq + i) * skv + j];
}

double pse_at(const RefTensor& p, std::int64_t N, std::int64_t b, std::int64_t n, std::int64_t i,
              std::int64_t j) {
  const std::int64_t bb = p.shape[0] == 1 ? 0 : b;
  return p.values[((bb * N + n) * p.shape[2] + i) * p.shape[3] + j];
}

}  // namespace

RefResult fia_reference(const RefArgs& a, const RefInputs& in) {
  const std::size_t us = a.layout.find('_');
  const std::string in_name = a.layout.substr(0, us);
  const Lay lin = parse(in_name);
  const Lay lout = parse(us == std::string::npos ? in_name : a.layout.substr(us + 1));
  const bool token = in_name == "TND" || in_name == "NTD";
  const bool decode = !token && a.Sq == 1;
  const bool paged = !a.block_table.empty();
  const std::int64_t B = a.B, N = a.N, KVN = a.KVN, Dk = a.Dk, Dv = a.Dv ? a.Dv : a.Dk;
  const std::int64_t group = N / KVN;
  const bool int8_out = a.quant_scale2.given();
  const bool separate = a.key_antiquant_scale.given();
  const bool antiquant = separate || a.antiquant_scale.given();

  // Per-batch lengths and first rows.
  std::vector<std::int64_t> lq(B), lkv(B), q_first(B, 0), kv_first(B, 0);
  for (std::int64_t b = 0; b < B; ++b) {
    if (token) {
      q_first[b] = b == 0 ? 0 : a.actual_seq_lengths[b - 1];
      lq[b] = a.actual_seq_lengths[b] - q_first[b];
      if (paged) {
        lkv[b] = length_of(a.actual_seq_lengths_kv, b, 0);
      } else {
        kv_first[b] = b == 0 ? 0 : a.actual_seq_lengths_kv[b - 1];
        lkv[b] = a.actual_seq_lengths_kv[b] - kv_first[b];
      }
    } else {
      lq[b] = decode ? 1 : length_of(a.actual_seq_lengths, b, a.Sq);
      lkv[b] = length_of(a.actual_seq_lengths_kv, b, a.Skv);
      if (a.query_padding_size && !decode && !a.actual_seq_lengths.empty())
        q_first[b] = a.Sq - std::max<std::int64_t>(0, *a.query_padding_size) - lq[b];
      if (a.kv_padding_size && !a.actual_seq_lengths_kv.empty())
        kv_first[b] = a.Skv - std::max<std::int64_t>(0, *a.kv_padding_size) - lkv[b];
    }
  }
  const bool left_padding = (a.query_padding_size && !decode && !a.actual_seq_lengths.empty()) ||
                            (a.kv_padding_size && !a.actual_seq_lengths_kv.empty());
  const std::int64_t P = a.prefix_seq == 0 ? 0
                         : a.actual_shared_prefix_len.empty() ? a.prefix_seq
                                                              : a.actual_shared_prefix_len[0];

  RefResult r;
  const std::int64_t out_batches = token ? 1 : B;
  r.out.assign(static_cast<std::size_t>(out_batches * N * a.Sq * Dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(out_batches * N * a.Sq), kInf);
  const Lay kv_layout = lin;

  // Element d of key (or value, or key rope) head kvh for column `tok` of batch b.
  auto kv_at = [&](const std::vector<double>& x, const std::vector<double>& prefix, std::int64_t D,
                   int which, std::int64_t b, std::int64_t kvh, const Token& tok,
                   std::int64_t d) {
    double raw;
    if (tok.prefix) {
      raw = prefix[index(kv_layout, 1, KVN, a.prefix_seq, D, 0, kvh, tok.pos, d)];
    } else if (paged) {
      raw = a.cache_4d ? x[((tok.block * KVN + kvh) * a.block_size + tok.row) * D + d]
                       : x[(tok.block * a.block_size + tok.row) * (KVN * D) + kvh * D + d];
    } else {
      raw = x[index(kv_layout, B, KVN, a.Skv, D, b, kvh, tok.pos, d)];
    }
    if (!antiquant || which < 0) return raw;
    const RefTensor& sc = separate ? (which == 0 ? a.key_antiquant_scale : a.value_antiquant_scale)
                                   : a.antiquant_scale;
    const RefTensor& of = separate ? (which == 0 ? a.key_antiquant_offset : a.value_antiquant_offset)
                                   : a.antiquant_offset;
    const std::int64_t mode = separate ? (which == 0 ? a.key_antiquant_mode : a.value_antiquant_mode)
                                       : a.antiquant_mode;
    const int half = separate ? -1 : which;
    const double s = param_at(sc, mode, half, D, KVN, b, kvh, tok, d, a.block_size);
    const double o = of.given() ? param_at(of, mode, half, D, KVN, b, kvh, tok, d, a.block_size) : 0;
    return (raw + o) * s;
  };

  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t L = P + lkv[b];
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t kvh = n / group;
      for (std::int64_t i = 0; i < lq[b]; ++i) {
        const std::int64_t row = q_first[b] + i;  // the query's S index (or token)
        const std::int64_t ob = token ? 0 : b;
        std::vector<double> s(static_cast<std::size_t>(L), -kInf);
        std::vector<bool> visible(static_cast<std::size_t>(L), false);
        double mx = -kInf;
        for (std::int64_t j = 0; j < L; ++j) {
          bool vis = true;
          if (!decode) {
            const std::int64_t shift = L - lq[b];
            switch (a.sparse_mode) {
              case 0:
                if (a.atten_mask.given() && !left_padding)
                  vis = j - i <= a.next_tokens && i - j <= a.pre_tokens;
                break;
              case 1: break;
              case 2: vis = j <= i; break;
              case 3: vis = j <= i + shift; break;
              case 4: vis = j - i <= a.next_tokens + shift && i - j <= a.pre_tokens - shift; break;
              default: throw std::invalid_argument("reference: sparse_mode");
            }
          }
          const bool full_mask = a.atten_mask.given() && (decode || a.sparse_mode <= 1);
          if (full_mask && mask_at(a.atten_mask, decode, b, i, j) != 0) vis = false;
          if (!vis) continue;
          Token tok;
          if (j < P) {
            tok = {true, j, 0, 0};
          } else {
            const std::int64_t t = j - P;
            if (paged) {
              tok = {false, t, a.block_table[b * a.max_blocks + t / a.block_size], t % a.block_size};
            } else {
              tok = {false, kv_first[b] + t, 0, 0};
            }
          }
          double dot = 0;
          for (std::int64_t d = 0; d < Dk; ++d)
            dot += in.q[index(lin, B, N, a.Sq, Dk, ob, n, row, d)] *
                   kv_at(in.k, a.key_shared_prefix, Dk, 0, b, kvh, tok, d);
          for (std::int64_t d = 0; d < a.Dr; ++d)
            dot += in.q_rope[index(lin, B, N, a.Sq, a.Dr, ob, n, row, d)] *
                   kv_at(in.k_rope, {}, a.Dr, -1, b, kvh, tok, d);
          s[j] = a.scale * dot;
          if (a.pse_shift.given()) s[j] += pse_at(a.pse_shift, N, b, n, i, j);
          visible[j] = true;
          mx = std::max(mx, s[j]);
        }
        // learnable_sink: one more logit in the softmax (and the lse), with no value vector.
        const bool has_sink = !a.learnable_sink.empty();
        const double sink = has_sink ? a.learnable_sink[static_cast<std::size_t>(n)] : -kInf;
        mx = std::max(mx, sink);
        if (mx == -kInf) continue;  // nothing visible (and no sink): out 0, lse +inf
        double sum = has_sink ? std::exp(sink - mx) : 0.0;
        for (std::int64_t j = 0; j < L; ++j)
          if (visible[j]) sum += std::exp(s[j] - mx);
        std::vector<double> o(static_cast<std::size_t>(Dv), 0.0);
        for (std::int64_t j = 0; j < L; ++j) {
          if (!visible[j]) continue;
          Token tok;
          if (j < P) {
            tok = {true, j, 0, 0};
          } else {
            const std::int64_t t = j - P;
            tok = paged ? Token{false, t, a.block_table[b * a.max_blocks + t / a.block_size],
                                t % a.block_size}
                        : Token{false, kv_first[b] + t, 0, 0};
          }
          const double p = std::exp(s[j] - mx) / sum;
          for (std::int64_t d = 0; d < Dv; ++d)
            o[d] += p * kv_at(in.v, a.value_shared_prefix, Dv, 1, b, kvh, tok, d);
        }
        for (std::int64_t d = 0; d < Dv; ++d) {
          double x = o[d];
          if (int8_out) {
            const std::int64_t c = numel(a.quant_scale2.shape) == 1 ? 0 : n * Dv + d;
            double y = x * a.quant_scale2.values[c];
            if (a.quant_offset2.given()) y += a.quant_offset2.values[c];
            x = std::clamp(round_half_even(y), -128.0, 127.0);
          }
          r.out[index(lout, B, N, a.Sq, Dv, ob, n, row, d)] = x;
        }
        r.lse[token ? row * N + n : (b * N + n) * a.Sq + row] = std::log(sum) + mx;
      }
    }
  }
  return r;
}

}  // namespace fia_test
