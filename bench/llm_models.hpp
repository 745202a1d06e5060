// Where the benchmarks find the models tools/fetch_model.py fetches: $NPUGRAPH_MODEL_DIR, else
// ${XDG_CACHE_HOME:-~/.cache}/npugraph/models (bench/llm, bench/profile).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "npugraph/dtype.hpp"

namespace npugraph_bench {

inline constexpr const char* kSmolLm2File = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kGemma3File = "gemma-3-270m-q4_k_m.gguf";

inline std::filesystem::path model_dir() {
  if (const char* d = std::getenv("NPUGRAPH_MODEL_DIR"); d && *d) return d;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  return std::filesystem::path(xdg && *xdg ? std::string(xdg) : std::string(home ? home : "") + "/.cache") /
         "npugraph" / "models";
}

// The engines' KV cache dtype: $NPUGRAPH_BENCH_KV_DTYPE = f32 (the default; EngineOptions' default),
// f16 or bf16. llama.cpp's llama-bench and llama-server keep an f16 cache unless told otherwise,
// so the comparisons with them set f16. Another value exits naming it and the rule.
inline npugraph::DType bench_kv_dtype() {
  const char* v = std::getenv("NPUGRAPH_BENCH_KV_DTYPE");
  const std::string s = v ? v : "";
  if (s.empty() || s == "f32") return npugraph::DType::f32;
  if (s == "f16") return npugraph::DType::f16;
  if (s == "bf16") return npugraph::DType::bf16;
  std::fprintf(stderr, "NPUGRAPH_BENCH_KV_DTYPE = '%s': must be f32, f16 or bf16\n", s.c_str());
  std::exit(2);
}

}  // namespace npugraph_bench
