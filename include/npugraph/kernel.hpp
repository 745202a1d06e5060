// Kernels: the identity (a KernelDef) plus a parameter block of plain bytes.
//
// An op validates its arguments and plans on the host, then issues `launch(stream, kernel, params)`.
// What happens to the launch depends on the stream's mode: it is enqueued (eager), recorded as a graph
// task (capture), or bound to the next task of the group being updated (update, docs/semantics.md §5).
// Everything an update may change must live in the parameter block; the kernel itself reads only the
// block and the ExecContext, so a captured launch can be replayed and re-parameterised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "npugraph/stream.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph {

// How a backend spreads a kernel's chunks over threads (the cpu backend: its compute pool).
class ChunkRunner {
 public:
  using ChunkFn = void (*)(void* obj, std::int64_t begin, std::int64_t end);
  virtual void run_chunks(std::int64_t n, std::int64_t grain, int threads, ChunkFn fn, void* obj) = 0;

 protected:
  ~ChunkRunner() = default;
};

// Passed to a kernel while it runs. parallel_for's chunks are a pure function of (n, grain): which
// thread runs a chunk never changes the result, so eager and replayed results are bitwise equal.
class ExecContext {
 public:
  // `runner` null: chunks run one after another on the calling thread.
  ExecContext(ChunkRunner* runner, int num_threads) : runner_(runner), num_threads_(num_threads) {}

  // Threads a kernel may plan for (fixed per stream; default: the machine's cores).
  int num_threads() const { return num_threads_; }

  // Calls f(begin, end) for consecutive chunks [k*grain, min(n, (k+1)*grain)).
  template <class F>
  void parallel_for(std::int64_t n, std::int64_t grain, F&& f) const {
    using Fn = std::remove_reference_t<F>;
    run_chunks(n, grain, [](void* obj, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(obj))(b, e); },
               const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  void run_chunks(std::int64_t n, std::int64_t grain, ChunkRunner::ChunkFn fn, void* obj) const {
    if (runner_) return runner_->run_chunks(n, grain, num_threads_, fn, obj);
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    for (std::int64_t b = 0; b < n; b += grain) fn(obj, b, b + grain < n ? b + grain : n);
  }
  ChunkRunner* runner_;
  int num_threads_;
};

using KernelFn = void (*)(const void* params, std::size_t size, const ExecContext& ctx);
// Returns an empty string when `updated` may replace `captured` in a task update, else the reason.
using UpdateCheckFn = std::string (*)(std::span<const std::byte> captured,
                                      std::span<const std::byte> updated);

// A kernel's launcher on a CUDA stream (`stream` is the cudaStream_t): what the CUDA backend calls.
// `params` is the host copy of the parameter block: the launcher may read it for the launch
// configuration only (grid size), i.e. only what the kernel's check_update keeps fixed. The kernels
// it launches read `device_params`, the device-resident copy of the same bytes, and nothing else of
// the block: in a graph the backend rewrites that copy to install an update (docs/backends.md).
using CudaLaunchFn = void (*)(const void* params, std::size_t size, const void* device_params,
                              void* stream);

// What a parameter block holds, for people: the op's tensors (dtype and shape) and the values an
// update may change, on one or a few lines ("query float16[1, 32, 1, 128] ... scale 0.5"). The graph
// dump (Graph::dot) shows it for every kernel task, with the parameters each replay would use now.
// `captured` is the block the task was captured with (the same bytes as `params` until an update):
// what an update cannot change may be read from it when a kernel's update blocks leave it out.
using DescribeFn = std::string (*)(std::span<const std::byte> params, std::span<const std::byte> captured);

// One per kernel, with static storage duration: its address is the kernel identity. One slot per
// device kind; a backend runs the kernel only when its slot is set (launch() refuses it otherwise).
struct KernelDef {
  const char* name;
  KernelFn cpu = nullptr;
  CudaLaunchFn cuda = nullptr;
  UpdateCheckFn check_update = nullptr;
  DescribeFn describe = nullptr;
};

// An op's host path that fails while `stream` is in task-update mode abandons the update: docs/semantics.md
// §5 says that on any error nothing is installed, the stream leaves update mode and the handle is
// free again — argument errors included. Call this from a catch block before rethrowing (no cost on
// the success path: what hot ops such as FIA do), or hold an UpdateErrorGuard. Leaves another
// thread's update alone; never throws.
void abandon_update_on_error(const Stream& stream) noexcept;

// Calls abandon_update_on_error(stream) when an exception leaves its scope.
class UpdateErrorGuard {
 public:
  explicit UpdateErrorGuard(const Stream& stream) noexcept;
  ~UpdateErrorGuard();
  UpdateErrorGuard(const UpdateErrorGuard&) = delete;
  UpdateErrorGuard& operator=(const UpdateErrorGuard&) = delete;

 private:
  Stream stream_;  // a copy: the guard may outlive the caller's temporary
  int exceptions_;
};

// Issues one kernel launch on `stream` (see the header comment for what that means per mode).
void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params);

// The tensors a launch reads or writes (undefined ones are skipped). Passed to launch(), they stay
// alive as long as the work may touch them: until a queued launch has run, for as long as a captured
// one's graph lives, until an updated task's parameters are replaced (Note [Keep-alive]). Without
// them, the caller keeps its tensors alive until the work is done (as with CUDA).
using TensorUses = std::span<const Tensor* const>;
void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params,
            TensorUses uses);

// Note [Capture state]
// An op may leave host state with a captured launch — what it derived from the arguments it was
// captured with (FIA keeps its plan) — and read it back when a task update re-issues the launch, to
// skip the work that unchanged arguments decide. `capture_state` stays with the captured task for as
// long as its graph lives; an eager launch, and a launch bound in an update, ignore it.
// captured_state() returns it while this thread updates `stream` and its next launch will replace a
// task of `kernel` that was captured with one; null otherwise (another kernel, no update, another
// thread's update). It is a cache: the op still checks that the arguments it derived it from are the
// ones it is given. An update launch may pass that state back as its `capture_state` (a non-owning
// shared_ptr will do): it vouches that it built the block from it, so that everything
// KernelDef::check_update compares is the captured block's, and the runtime skips check_update for
// that launch. Any other launch in an update is checked as always. A vouching launch that reads
// exactly the captured launch's tensors (the same storages) may pass no `uses`: the captured task's
// keep-alive, which lives as long as the graph, covers them, and the runtime skips comparing the
// uses and their devices.
void launch(const Stream& stream, const KernelDef& kernel, std::span<const std::byte> params,
            TensorUses uses, std::shared_ptr<const void> capture_state);
const void* captured_state(const Stream& stream, const KernelDef& kernel);

// Note [Kernel fusion]
// When a graph is instantiated for the cpu, two neighbouring kernel tasks run as one task when a
// fusion is registered for their pair of kernels (first, then second) and its `match` accepts their
// parameter blocks, as torch_npu's super-kernel scopes fuse an Ascend graph's neighbours. Neighbours:
// the second task is the first's only successor and the first is the second's only predecessor, and
// neither is in a task group (an update could rewrite a block after `match` accepted it). Pairs are
// taken in task order, and a task joins at most one pair. `cpu` receives both blocks and must give
// the bits the two kernels give one after the other — the same floating-point operations in the
// same order, for instance row by row instead of pass by pass — so that a replay stays bitwise equal
// to eager (docs/semantics.md). `match` must refuse what it cannot promise that for: other dtypes,
// memory that one kernel writes and the other reads at other offsets. In a trace the pair is one
// task named `name`, and its errors name both tasks. Eager launches and the CUDA backend run the
// two kernels as launched.
using FusedKernelFn = void (*)(const void* first, std::size_t first_size, const void* second,
                               std::size_t second_size, const ExecContext& ctx);
using FusionMatchFn = bool (*)(std::span<const std::byte> first, std::span<const std::byte> second);
struct KernelFusion {
  const char* name;  // the fused task's name, e.g. "add+rms_norm"
  const KernelDef* first;
  const KernelDef* second;
  FusionMatchFn match;
  FusedKernelFn cpu;
};
// Registers `fusion` (static storage duration) for the graphs instantiated after it; thread-safe.
// ArgumentError when a field is null or a fusion for the same pair is registered already.
void register_kernel_fusion(const KernelFusion& fusion);
// The fusion registered for (first, second), or null.
const KernelFusion* find_kernel_fusion(const KernelDef& first, const KernelDef& second);
// Whether graphs instantiated from now on fuse (already instantiated graphs keep their tasks). On by
// default; NPUGRAPH_KERNEL_FUSION=0 in the environment (read once, at the first query) starts it off.
void set_kernel_fusion(bool on);
bool kernel_fusion();

namespace detail {
template <class T>
inline constexpr bool is_span_v = false;
template <class T, std::size_t N>
inline constexpr bool is_span_v<std::span<T, N>> = true;
}  // namespace detail

// A parameter struct as its bytes. Not for spans: a span of fixed extent (std::as_bytes of a
// one-element span) is trivially copyable too, and would otherwise be sent as the span object
// instead of the bytes it views; spans go to the overloads above.
template <class P>
  requires std::is_trivially_copyable_v<P> && (!detail::is_span_v<P>)
void launch(const Stream& stream, const KernelDef& kernel, const P& params) {
  launch(stream, kernel, std::span<const std::byte>(std::as_bytes(std::span<const P, 1>(&params, 1))));
}
template <class P>
  requires std::is_trivially_copyable_v<P> && (!detail::is_span_v<P>)
void launch(const Stream& stream, const KernelDef& kernel, const P& params, TensorUses uses) {
  launch(stream, kernel, std::span<const std::byte>(std::as_bytes(std::span<const P, 1>(&params, 1))),
         uses);
}

}  // namespace npugraph
