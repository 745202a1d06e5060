// The cpu backend's executable form of a graph: which neighbouring kernel tasks run as one (Note
// [Kernel fusion] in npugraph/kernel.hpp), decided once, when the graph is instantiated.
#include <span>

#include "backends/cpu/run_state.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph::detail {
namespace {

// A kernel task outside every group: its block is fixed for the graph's life.
bool fixed_kernel(const ExecGraph& g, std::uint32_t id) {
  const ExecNode& n = g.nodes[id];
  return n.kind == TaskKind::kernel && n.group < 0 && g.defs[id] != nullptr;
}

}  // namespace

CpuGraph::CpuGraph(ExecGraph& g) : graph(&g) {
  if (!kernel_fusion()) return;
  const auto n = static_cast<std::uint32_t>(g.nodes.size());
  std::vector<Fused> plan;
  // In task order (a topological one): a task pairs with its only successor when that successor has
  // no other predecessor; a task already absorbed starts no pair.
  for (std::uint32_t i = 0; i < n; ++i) {
    const ExecNode& a = g.nodes[i];
    if (a.succ_end - a.succ_begin != 1 || (!plan.empty() && plan[i].absorbed) || !fixed_kernel(g, i)) continue;
    const std::uint32_t j = g.succ[a.succ_begin];
    if (!g.nodes[j].single_pred || !fixed_kernel(g, j)) continue;
    const KernelFusion* f = find_kernel_fusion(*g.defs[i], *g.defs[j]);
    if (!f) continue;
    const ExecNode& b = g.nodes[j];
    if (!f->match(std::span<const std::byte>(a.params, a.param_size),
                  std::span<const std::byte>(b.params, b.param_size)))
      continue;
    if (plan.empty()) plan.resize(n);
    plan[i].run = f;
    plan[j].absorbed = true;
    ++fused_count;
  }
  fused = std::move(plan);
}

}  // namespace npugraph::detail
