// The peer: a chain of n empty continue_nodes in a oneTBB flow graph; one try_put + wait_for_all per
// iteration (the same "launch and wait for the whole graph" as the npugraph case).
#if NPUGRAPH_HAVE_TBB
#include <oneapi/tbb/flow_graph.h>

#include <memory>
#include <vector>

#include "bench_util.hpp"

namespace {

namespace flow = oneapi::tbb::flow;
using Node = flow::continue_node<flow::continue_msg>;

void BM_Chain_TbbFlowGraph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  flow::graph g;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < n; ++i) {
    nodes.push_back(std::make_unique<Node>(g, [](const flow::continue_msg&) {}));
    if (i) flow::make_edge(*nodes[i - 1], *nodes[i]);
  }
  for (auto _ : state) {
    nodes.front()->try_put(flow::continue_msg());
    g.wait_for_all();
  }
  npugraph::bench::per_task_counter(state, n);
}
BENCHMARK(BM_Chain_TbbFlowGraph)->Arg(1000)->UseRealTime();

}  // namespace
#endif
