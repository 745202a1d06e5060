// The models tools/fetch_model.py fetches, by name, for the command-line apps (npugraph-generate,
// npugraph-serve): --model smollm2 | gemma3, anything else a path.
#pragma once

#include <cstdlib>
#include <string>

namespace npugraph::apps {

// $NPUGRAPH_MODEL_DIR, else $XDG_CACHE_HOME (or ~/.cache) /npugraph/models.
inline std::string model_dir() {
  if (const char* d = std::getenv("NPUGRAPH_MODEL_DIR"); d && *d) return d;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  return (xdg && *xdg ? std::string(xdg) : std::string(home ? home : "") + "/.cache") + "/npugraph/models";
}

inline std::string model_named(const std::string& v) {
  if (v == "smollm2") return model_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (v == "gemma3") return model_dir() + "/gemma-3-270m-q4_k_m.gguf";
  return v;
}

// $NPUGRAPH_MODEL, else smollm2.
inline std::string default_model() {
  if (const char* m = std::getenv("NPUGRAPH_MODEL"); m && *m) return m;
  return model_named("smollm2");
}

}  // namespace npugraph::apps
