// The peer: n independent empty continue_nodes fed by one broadcast_node in a oneTBB flow graph; one
// try_put + wait_for_all per iteration. TBB runs them on all cores, as npugraph's replay does.
#if NPUGRAPH_HAVE_TBB
#include <oneapi/tbb/flow_graph.h>

#include <memory>
#include <vector>

#include "bench_util.hpp"

namespace {

namespace flow = oneapi::tbb::flow;
using Node = flow::continue_node<flow::continue_msg>;

void BM_Independent_TbbFlowGraph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  flow::graph g;
  flow::broadcast_node<flow::continue_msg> start(g);
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < n; ++i) {
    nodes.push_back(std::make_unique<Node>(g, [](const flow::continue_msg&) {}));
    flow::make_edge(start, *nodes.back());
  }
  for (auto _ : state) {
    start.try_put(flow::continue_msg());
    g.wait_for_all();
  }
  npugraph::bench::per_task_counter(state, n);
}
BENCHMARK(BM_Independent_TbbFlowGraph)->Arg(1000)->UseRealTime();

}  // namespace
#endif
