// --kv-dtype f32|f16|bf16 for the command-line apps (npugraph-generate, npugraph-serve):
// EngineOptions::kv_dtype by its short name.
#pragma once

#include <optional>
#include <string>

#include "npugraph/dtype.hpp"

namespace npugraph::apps {

inline constexpr const char* kKvDtypeNames = "f32, f16 or bf16";

// The dtype `v` names, or nullopt for a name that is none of kKvDtypeNames.
inline std::optional<DType> kv_dtype_named(const std::string& v) {
  if (v == "f32") return DType::f32;
  if (v == "f16") return DType::f16;
  if (v == "bf16") return DType::bf16;
  return std::nullopt;
}

}  // namespace npugraph::apps
