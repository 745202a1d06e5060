#include "graph/graph_def.hpp"

#include <sstream>
#include <string_view>

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

std::string json_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

// Note [Graph dump as JSON]
// debug_dump(path) with a path ending in ".json" writes the graph as a Chrome-trace document (the
// format torch_npu's NPUGraph.debug_dump writes, and Perfetto / chrome://tracing open): one "X"
// event per task on the track "stream<id>" of its stream, its args naming the task ("Task Id", its
// index in topological order), its kind ("Task Type"), stream, dependencies, task group and the
// parameters the next replay would use (as in the DOT label). A task's "ts" is its position on its
// own stream (0, 1, ...), "dur" 1: the raw dump orders each stream and nothing across streams. The
// aligned view (npugraph/_npugraph_utils.py, written beside it by Python's debug_dump) moves each
// task after its dependencies and draws the cross-stream edges.
std::string GraphDefData::json(std::uint64_t graph_id, const std::vector<const char*>& names,
                               const std::vector<std::string>& details) const {
  std::ostringstream os;
  os << "{\"schema\": \"npugraph.graph_dump/1\", \"graph\": " << graph_id
     << ", \"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  os << "  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << graph_id
     << ", \"args\": {\"name\": \"graph " << graph_id << "\"}}";
  std::vector<std::int64_t> group_of(nodes.size(), -1);
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::uint32_t i : groups[g]) group_of[i] = static_cast<std::int64_t>(g);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> position;  // (stream id, tasks so far)
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::uint64_t ts = 0;
    bool seen = false;
    for (auto& [stream, count] : position)
      if (stream == n.stream_id) {
        ts = count++;
        seen = true;
      }
    if (!seen) {
      position.emplace_back(n.stream_id, 1);
      os << ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << graph_id
         << ", \"tid\": \"stream" << n.stream_id << "\", \"args\": {\"name\": \"stream " << n.stream_id
         << "\"}}";
    }
    const char* name = names.empty() ? task_name(n.task) : names[i];
    os << ",\n  {\"name\": \"" << json_escape(name) << "\", \"cat\": \"" << task_type_name(n.task)
       << "\", \"ph\": \"X\", \"pid\": " << graph_id << ", \"tid\": \"stream" << n.stream_id
       << "\", \"ts\": " << ts << ", \"dur\": 1, \"args\": {\"Task Id\": " << i << ", \"Task Type\": \""
       << task_type_name(n.task) << "\", \"Stream Id\": " << n.stream_id << ", \"deps\": [";
    for (std::size_t k = 0; k < n.deps.size(); ++k) os << (k ? ", " : "") << n.deps[k];
    os << "]";
    if (group_of[i] >= 0) os << ", \"Task Group\": " << group_of[i];
    if (i < details.size() && !details[i].empty()) os << ", \"detail\": \"" << json_escape(details[i]) << "\"";
    os << "}}";
  }
  os << "\n]}\n";
  return os.str();
}

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
