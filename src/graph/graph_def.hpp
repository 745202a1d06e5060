// A graph being built: nodes (tasks), their dependencies, and task groups.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/task.hpp"

namespace npugraph::detail {

struct Node {
  Task task;
  std::vector<std::uint32_t> deps;
  std::uint64_t stream_id = 0;  // the stream it was captured on (for messages and DOT)
  int group = -1;               // task group index, -1: none
};

struct GraphDefData {
  std::vector<Node> nodes;
  std::vector<std::vector<std::uint32_t>> groups;  // each group's kernel nodes, in issue order

  std::uint32_t add(Node node);
  // "task #3 'add'"
  std::string describe(std::uint32_t node) const;
  // Graphviz text; `names` overrides the task names (used when rebuilding from an ExecGraph).
  // Graphviz text. `names` (per node) replaces the task names, `details` (per node, may be empty)
  // adds lines under them (DOT-escaped here).
  std::string dot(const std::string& title, const std::vector<const char*>& names = {},
                  const std::vector<std::string>& details = {}) const;
  // The same content as a Chrome-trace JSON document (Note [Graph dump as JSON]).
  std::string json(std::uint64_t graph_id, const std::vector<const char*>& names = {},
                   const std::vector<std::string>& details = {}) const;
};

}  // namespace npugraph::detail
