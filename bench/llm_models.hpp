// Where the benchmarks find the models tools/fetch_model.py fetches: $NPUGRAPH_MODEL_DIR, else
// ${XDG_CACHE_HOME:-~/.cache}/npugraph/models (bench/llm, bench/profile).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

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

}  // namespace npugraph_bench
