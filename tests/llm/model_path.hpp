// Where the real model file is: the same lookup as tools/fetch_model.py.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace ngtest {

inline constexpr const char* kModelFileName = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr std::uintmax_t kModelFileSize = 98362432;

// $NPUGRAPH_MODEL, else $NPUGRAPH_MODEL_DIR/<name>, else ${XDG_CACHE_HOME:-~/.cache}/npugraph/models/<name>.
inline std::filesystem::path model_path() {
  if (const char* m = std::getenv("NPUGRAPH_MODEL"); m && *m) return m;
  std::filesystem::path dir;
  if (const char* d = std::getenv("NPUGRAPH_MODEL_DIR"); d && *d) {
    dir = d;
  } else {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    std::filesystem::path cache = xdg && *xdg ? std::filesystem::path(xdg)
                                              : std::filesystem::path(home ? home : "") / ".cache";
    dir = cache / "npugraph" / "models";
  }
  return dir / kModelFileName;
}

// The model's path, or a message saying why it is not there.
inline std::optional<std::filesystem::path> model_or_reason(std::string& reason) {
  const auto p = model_path();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) {
    reason = "model not fetched (" + p.string() +
             "): run /usr/bin/python3 tools/fetch_model.py, or set NPUGRAPH_MODEL";
    return std::nullopt;
  }
  return p;
}

}  // namespace ngtest

// Skips the test when the model file is not there.
#define NGTEST_REQUIRE_MODEL(var)                                    \
  std::filesystem::path var;                                         \
  do {                                                               \
    std::string reason_;                                             \
    auto found_ = ::ngtest::model_or_reason(reason_);                \
    if (!found_) GTEST_SKIP() << reason_;                            \
    var = *found_;                                                   \
  } while (0)
