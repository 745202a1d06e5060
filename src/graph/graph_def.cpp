#include "graph/graph_def.hpp"

#include <sstream>

#include "npugraph/error.hpp"

namespace npugraph::detail {

std::uint32_t GraphDefData::add(Node node) {
  const auto id = static_cast<std::uint32_t>(nodes.size());
  for (std::uint32_t d : node.deps)
    NG_CHECK_ARG(d < id, "graph: dependency = ", d, ": must name an existing node (there are ", id, ")");
  nodes.push_back(std::move(node));
  return id;
}

std::string GraphDefData::describe(std::uint32_t node) const {
  return cat("task #", node, " '", task_name(nodes[node].task), "'");
}

namespace {

// A DOT label line: quotes and backslashes escaped, newlines as left-justified line breaks.
std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\l";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string GraphDefData::dot(const std::string& title, const std::vector<const char*>& names,
                              const std::vector<std::string>& details) const {
  std::ostringstream os;
  os << "digraph \"" << title << "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  auto node_line = [&](std::uint32_t i, const char* indent) {
    const Node& n = nodes[i];
    const bool kernel = n.task.kind == TaskKind::kernel;
    const char* name = names.empty() ? task_name(n.task) : names[i];
    os << indent << "n" << i << " [label=\"#" << i << " " << name << "\\nstream " << n.stream_id;
    if (i < details.size() && !details[i].empty()) os << "\\n" << dot_escape(details[i]) << "\\l";
    os << "\"" << (kernel ? "" : ", style=rounded") << "];\n";
  };
  std::vector<char> in_group(nodes.size(), 0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) continue;
    os << "  subgraph cluster_group_" << g << " {\n    label=\"task group " << g << " (handle index " << g
       << ")\";\n    style=dashed; color=blue;\n";
    for (std::uint32_t i : groups[g]) {
      in_group[i] = 1;
      node_line(i, "    ");
    }
    os << "  }\n";
  }
  for (std::uint32_t i = 0; i < nodes.size(); ++i)
    if (!in_group[i]) node_line(i, "  ");
  for (std::uint32_t i = 0; i < nodes.size(); ++i)
    for (std::uint32_t d : nodes[i].deps) os << "  n" << d << " -> n" << i << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace npugraph::detail
