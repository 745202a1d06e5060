// The CUDA backend's graphs: instantiate, replay, updates (docs/backends.md, "The CUDA backend").
//
// Note [CUDA graphs from the node table]
// instantiate() builds the device form from the ExecGraph's node table, not from stream capture of
// the user's launches: the node table already holds every task, its group and its parameters, so a
// task group's kernel nodes are known by construction. Every kernel node gets a device-resident
// parameter block (one allocation per graph, 256-byte slots, a pinned host mirror for uploads).
// When every node is device work (kernel, fill, copy), the table is issued once, in topological
// order, onto a capturing stream and instantiated as one cudaGraphExec: a replay is then one
// cudaGraphLaunch. The capture is a chain in topological order, which is correct for any DAG but
// drops the parallelism between independent branches (explicit edges via
// cudaStreamUpdateCaptureDependencies are the next step). A graph holding host-visible nodes
// (events, ExternalEvents, host functions, nested graphs) replays by walking the table on the
// stream's worker, issuing each node as the eager queue would; its kernels read the same blocks.
//
// Note [CUDA replay binds sets]
// A replay takes the parameter set of each task group as the cpu executor does (Note [Update
// order]): the newer of the stream-ordered `current` and the launch table pinned at launch, at the
// group's first task. If that set is not the one the group's device blocks hold (sets are
// immutable and stamped, so a stamp says which), the replay copies it into them — from the pinned
// mirror, on the replaying stream, before the graph's kernels — so the kernels, which read only
// their block (Note [CUDA kernels read the device block]), see exactly the set the cpu would run.
// So both update orders need nothing at update time (published() does nothing, as on the cpu): a
// stream-ordered update is installed by its patch task in its stream's order (after that stream's
// prior work: the patch synchronizes first), a launch-ordered one reaches the replays launched
// after it through their pinned table. cudaGraphExecKernelNodeSetParams is not used: it would need
// each kernel's argument layout, and a block copy ordered before the launch already serves both
// orders with one mechanism. Replays of one graph run one at a time (Note [Replay order]); on the
// device, each replay's stream first waits for the previous replay's end (an event), and the host
// waits for it before rewriting the pinned mirror that a pending upload may still read.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_queue.hpp"
#include "graph/exec_graph.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail::cuda {
namespace {

constexpr std::size_t kSlot = 256;

std::size_t round_up(std::size_t n) { return (n + kSlot - 1) / kSlot * kSlot; }

bool device_only(const ExecGraph& g) {
  return std::all_of(g.nodes.begin(), g.nodes.end(), [](const ExecNode& n) {
    return n.kind == TaskKind::kernel || n.kind == TaskKind::fill || n.kind == TaskKind::copy;
  });
}

// The host bytes of node `i` as captured (its group's captured set for a grouped task).
std::span<const std::byte> captured_params(const ExecGraph& g, std::uint32_t i) {
  const ExecNode& n = g.nodes[i];
  if (n.group < 0) return {n.params, n.param_size};
  const GroupSlot& slot = *g.groups[static_cast<std::size_t>(n.group)];
  return slot.captured->params[n.group_pos].span();
}

// Copies `set` into the device blocks of group `g` on `stream` (Note [CUDA replay binds sets]).
void bind_group(const ExecGraph& graph, CudaGraph& cg, std::size_t g, const ParamSet& set, cudaStream_t stream) {
  if (cg.bound_valid[g] && cg.bound[g] == set.stamp) return;
  // The mirror may still feed an upload of the previous replay: wait for that replay's end.
  check(cudaEventSynchronize(cg.last_replay), cg.device, "cudaEventSynchronize");
  const GroupSlot& slot = *graph.groups[g];
  for (std::size_t pos = 0; pos < slot.nodes.size(); ++pos) {
    const std::uint32_t node = slot.nodes[pos];
    const ParamBytes& p = set.params[pos];
    const std::size_t room = (node + 1 < cg.offset.size() ? cg.offset[node + 1] : cg.bytes) - cg.offset[node];
    NG_CHECK_ARG(p.size() <= room, "graph ", graph.graph_id, " ", graph.describe(node), ": updated parameter block of ",
                 p.size(), " bytes does not fit the ", room, " bytes captured");
    auto* host = static_cast<unsigned char*>(cg.staging) + cg.offset[node];
    auto* dev = static_cast<unsigned char*>(cg.device_blocks) + cg.offset[node];
    std::memcpy(host, p.data(), p.size());
    check(cudaMemcpyAsync(dev, host, p.size(), cudaMemcpyHostToDevice, stream), cg.device, "cudaMemcpyAsync");
  }
  cg.bound[g] = set.stamp;
  cg.bound_valid[g] = true;
}

void launch_node(const KernelDef& def, std::span<const std::byte> host, const CudaGraph& cg, std::uint32_t node,
                 cudaStream_t stream) {
  def.cuda(host.data(), host.size(), static_cast<unsigned char*>(cg.device_blocks) + cg.offset[node], stream);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    NG_THROW(StateError, "cuda:", cg.device, ": kernel '", def.name, "' failed to launch: ", cudaGetErrorName(err),
             ": ", cudaGetErrorString(err));
}

// Issues the device-only table in topological order onto `stream` (capturing at instantiate).
void issue_table(const ExecGraph& g, const CudaGraph& cg, cudaStream_t stream) {
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const ExecNode& n = g.nodes[i];
    if (n.kind == TaskKind::kernel) {
      launch_node(*g.defs[i], captured_params(g, i), cg, i, stream);
    } else if (n.kind == TaskKind::copy) {
      CopyArgs a;
      std::memcpy(&a, n.params, sizeof a);
      if (a.nbytes) check(cudaMemcpyAsync(a.dst, a.src, a.nbytes, cudaMemcpyDefault, stream), cg.device, "cudaMemcpyAsync");
    } else {
      FillArgs a;
      std::memcpy(&a, n.params, sizeof a);
      check(fill_pattern(a.dst, a.count, a.elem_size, a.pattern, stream), cg.device, "fill kernel");
    }
  }
}

void try_capture(const ExecGraph& g, CudaGraph& cg) {
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return (void)cudaGetLastError();
  cudaGraph_t graph = nullptr;
  bool ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    try {
      issue_table(g, cg, s);
    } catch (const Error&) {
      ok = false;
    }
    ok = cudaStreamEndCapture(s, &graph) == cudaSuccess && ok;
  }
  cudaGraphExec_t exec = nullptr;
  if (ok && graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) cg.exec = exec;
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaStreamDestroy(s);
  (void)cudaGetLastError();  // a failed capture leaves the walk in charge, with no error behind
}

}  // namespace

CudaGraph::~CudaGraph() {
  if (runtime_exiting()) return;  // the driver may be gone; the process is ending anyway
  DeviceGuard guard(device);
  if (last_replay) (void)cudaEventSynchronize(last_replay);
  if (exec) (void)cudaGraphExecDestroy(exec);
  if (device_blocks) (void)cudaFree(device_blocks);
  if (staging) (void)cudaFreeHost(staging);
  if (last_replay) (void)cudaEventDestroy(last_replay);
  (void)cudaGetLastError();
}

std::unique_ptr<BackendGraph> CudaBackend::instantiate(ExecGraph& graph) {
  DeviceGuard guard(device_);
  auto cg = std::make_unique<CudaGraph>(device_);
  cg->offset.assign(graph.nodes.size(), 0);
  for (std::uint32_t i = 0; i < graph.nodes.size(); ++i) {
    cg->offset[i] = cg->bytes;
    if (graph.nodes[i].kind != TaskKind::kernel) continue;
    NG_CHECK_ARG(graph.defs[i] && graph.defs[i]->cuda, "graph ", graph.graph_id, " ", graph.describe(i),
                 ": has no implementation for the cuda backend");
    cg->bytes += round_up(std::max<std::size_t>(captured_params(graph, i).size(), 1));
  }
  cg->bound.assign(graph.groups.size(), 0);
  cg->bound_valid.assign(graph.groups.size(), true);  // the blocks start with the captured sets
  check(cudaEventCreateWithFlags(&cg->last_replay, cudaEventDisableTiming), device_, "cudaEventCreate");
  if (cg->bytes) {
    check(cudaMalloc(&cg->device_blocks, cg->bytes), device_, "cudaMalloc (graph parameter blocks)");
    check(cudaMallocHost(&cg->staging, cg->bytes), device_, "cudaMallocHost (graph parameter staging)");
    for (std::uint32_t i = 0; i < graph.nodes.size(); ++i)
      if (graph.nodes[i].kind == TaskKind::kernel) {
        const auto p = captured_params(graph, i);
        if (!p.empty()) std::memcpy(static_cast<unsigned char*>(cg->staging) + cg->offset[i], p.data(), p.size());
      }
    check(cudaMemcpy(cg->device_blocks, cg->staging, cg->bytes, cudaMemcpyHostToDevice), device_, "cudaMemcpy");
  }
  for (std::size_t g = 0; g < graph.groups.size(); ++g)
    if (graph.groups[g]->captured) cg->bound[g] = graph.groups[g]->captured->stamp;
  if (!graph.nodes.empty() && device_only(graph)) try_capture(graph, *cg);
  return cg;
}

void CudaBackend::published(ExecGraph&, std::span<const std::uint32_t>) {}  // Note [CUDA replay binds sets]

void CudaGraph::replay(ExecGraph& graph, TablePin pin, LaunchTicket ticket, StreamState& stream) {
  // A stream of the graph's device (check_replay_device): a CUDA queue.
  run_cuda_graph(graph, std::move(pin), std::move(ticket), static_cast<CudaStreamQueue&>(*stream.queue).impl());
}

void run_cuda_graph(ExecGraph& graph, TablePin pin, LaunchTicket ticket, CudaStreamQueue::Impl& q) {
  const bool had_turn = ticket.held();
  const std::uint64_t turn = ticket.turn();
  ticket.consume();
  if (!begin_replay(graph, had_turn ? &turn : nullptr, *q.owner)) return;
  auto& cg = static_cast<CudaGraph&>(*graph.backend);
  struct End {
    ExecGraph& graph;
    CudaGraph& cg;
    cudaStream_t stream;
    bool had_turn;
    ~End() {
      (void)cudaEventRecord(cg.last_replay, stream);
      end_replay(graph, had_turn);
    }
  } end{graph, cg, q.stream, had_turn};
  std::lock_guard lock(cg.mu);
  const TablePin table = pin.get() ? std::move(pin) : graph.pin_table();
  auto launched = [&](std::size_t g) -> ParamSet* {
    const LaunchTable* t = table.get();
    return t && g < t->sets.size() ? t->sets[g].get() : nullptr;
  };
  check(cudaStreamWaitEvent(q.stream, cg.last_replay, 0), cg.device, "cudaStreamWaitEvent");
  if (cg.exec) {
    for (std::size_t g = 0; g < graph.groups.size(); ++g) {
      const SetRef set = graph.groups[g]->pick(launched(g));
      bind_group(graph, cg, g, *set.get(), q.stream);
    }
    check(cudaGraphLaunch(cg.exec, q.stream), cg.device, "cudaGraphLaunch");
    return;
  }
  std::vector<SetRef> pinned(graph.groups.size());
  for (std::uint32_t i = 0; i < graph.nodes.size(); ++i) {
    const ExecNode& n = graph.nodes[i];
    if (n.kind == TaskKind::kernel) {
      std::span<const std::byte> host{n.params, n.param_size};
      if (n.group >= 0) {
        const auto g = static_cast<std::size_t>(n.group);
        if (n.group_pos == 0) {
          pinned[g] = graph.groups[g]->pick(launched(g));
          bind_group(graph, cg, g, *pinned[g].get(), q.stream);
        }
        host = pinned[g]->params[n.group_pos].span();
      }
      launch_node(*graph.defs[i], host, cg, i, q.stream);
    } else if (!q.execute_builtin(n.kind, n.params, n.object, n.value, WaitSite{q.owner, graph.graph_id, i})) {
      return;  // a cancelled ExternalEvent wait (Note [Stalls]): the rest of the replay is skipped
    }
  }
}

}  // namespace npugraph::detail::cuda
