// general.architecture -> its Architecture (Note [Architectures]).
#include <array>

#include "llm/arch/architecture.hpp"
#include "npugraph/error.hpp"

namespace npugraph::llm {
namespace {

std::array<const Architecture*, 4> all() {
  return {&llama_architecture(), &qwen2_architecture(), &qwen3_architecture(), &gemma3_architecture()};
}

}  // namespace

std::string architecture_names() {
  std::string out;
  for (const Architecture* a : all()) out += (out.empty() ? "" : ", ") + std::string(a->name());
  return out;
}

const Architecture& architecture(std::string_view name, const std::string& file) {
  for (const Architecture* a : all())
    if (a->name() == name) return *a;
  NG_THROW(ArgumentError, file, ": general.architecture = '", name, "': npugraph runs ", architecture_names(),
           " (one file per architecture in src/llm/arch)");
}

}  // namespace npugraph::llm
