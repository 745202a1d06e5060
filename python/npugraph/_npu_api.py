"""The torch.cuda / torch_npu names of ``npugraph.npu`` written in Python: memory statistics, the
device context, capture queries and ``make_graphed_callables``. Each follows the torch.cuda
function of the same name; where npugraph differs (one CPU device, no autograd), the docstring says.
"""
import contextlib as _contextlib
import functools as _functools
import platform as _platform

from . import _C
from . import _rng

__all__ = [
    "_launch_host_func", "_sleep", "_subscribe_report", "_unsubscribe_report", "device",
    "empty_cache", "get_device_name", "get_device_properties", "get_rng_state", "initial_seed", "is_bf16_supported",
    "is_current_stream_capturing", "make_graphed_callables", "manual_seed", "manual_seed_all",
    "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved",
    "memory_snapshot", "memory_stats", "MemPool", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "seed", "seed_all", "set_compile_mode", "set_rng_state",
    "use_mem_pool",
]


def _check_device(device, call):
    if device is not None:
        _C.npu.set_device(device)  # raises naming the value for anything but the one device


_POOL_TYPES = ("all", "small_pool", "large_pool")
_METRICS = ("current", "peak", "allocated", "freed")


def memory_stats(device=None):
    """torch.cuda.memory_stats: the caching allocator's counters with torch's keys —
    ``{allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
    inactive_split_bytes, requested_bytes}.{all, small_pool, large_pool}.{current, peak,
    allocated, freed}``, ``num_alloc_retries``, ``num_ooms``, ``num_sync_all_streams``,
    ``num_device_alloc``, ``num_device_free``, ``max_split_size``,
    ``oversize_{allocations,segments}.*`` — plus npugraph's ``pools`` (live pools, graph pools
    included). npugraph's allocator never splits a block (every block is its own segment, live
    blocks are the active ones): ``active*`` equal ``allocation`` / ``allocated_bytes``, and
    ``inactive_split*`` and ``oversize_*`` stay 0; ``max_split_size`` is -1 (no limit), as torch
    reports it. Blocks under 1 MiB count as the small pool (include/npugraph/allocator_stats.hpp)."""
    _check_device(device, "memory_stats")
    s = _C._allocator_stats()
    out = {}
    zero = dict.fromkeys(_METRICS, 0)
    for stat, source in (("allocation", "allocation"), ("segment", "segment"), ("active", "allocation"),
                         ("inactive_split", None), ("allocated_bytes", "allocated_bytes"),
                         ("reserved_bytes", "reserved_bytes"), ("active_bytes", "allocated_bytes"),
                         ("inactive_split_bytes", None), ("requested_bytes", "requested_bytes")):
        for pool in _POOL_TYPES:
            for metric in _METRICS:
                out[f"{stat}.{pool}.{metric}"] = (s[f"{source}.{pool}.{metric}"] if source else zero[metric])
    for name in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                 "num_device_free"):
        out[name] = s[name]
    out["max_split_size"] = -1
    for stat in ("oversize_allocations", "oversize_segments"):
        for metric in _METRICS:
            out[f"{stat}.{metric}"] = 0
    out["pools"] = _C.memory_stats()["pools"]
    return dict(sorted(out.items()))


def reset_accumulated_memory_stats(device=None):
    """torch.cuda.reset_accumulated_memory_stats: zeroes the ``allocated`` / ``freed`` totals and
    the ``num_*`` event counts of memory_stats()."""
    _check_device(device, "reset_accumulated_memory_stats")
    _C.reset_accumulated_memory_stats()


def memory_snapshot(mempool_id=None):
    """torch.cuda.memory_snapshot: the allocator's segments in torch's shape — dicts with
    ``device``, ``address``, ``total_size``, ``allocated_size``, ``active_size``,
    ``requested_size``, ``stream``, ``segment_type`` (``"small"`` under 1 MiB, else ``"large"``),
    ``segment_pool_id`` (``(0, 0)`` for the default pool, ``(0, id)`` for a graph pool or MemPool),
    ``is_expandable`` (False), ``frames`` ([]: no allocation history is recorded) and ``blocks``:
    npugraph never splits a segment, so each holds one block (``address``, ``size``,
    ``requested_size``, ``state`` ``"active_allocated"`` or ``"inactive"`` (cached for reuse on its
    stream), ``frames``). ``mempool_id`` (a MemPool's ``id``) keeps that pool's segments only."""
    out = []
    for seg in _C._memory_snapshot():
        pool = (0, seg["pool_id"])
        if mempool_id is not None and tuple(mempool_id) != pool:
            continue
        live = seg["allocated"]
        block = {"address": seg["address"], "size": seg["size"],
                 "requested_size": seg["requested_size"],
                 "state": "active_allocated" if live else "inactive", "frames": []}
        used = seg["size"] if live else 0
        out.append({"device": 0, "address": seg["address"], "total_size": seg["size"],
                    "allocated_size": used, "active_size": used,
                    "requested_size": seg["requested_size"], "stream": seg["stream"],
                    "segment_type": "small" if seg["size"] < (1 << 20) else "large",
                    "segment_pool_id": pool, "is_expandable": False, "frames": [], "blocks": [block]})
    return out


class MemPool(_C.npu._PoolHandle):
    """torch.cuda.MemPool: a private pool of npugraph's caching allocator. ``use_mem_pool(pool)``
    routes the thread's npugraph allocations to it; ``graph(g, pool=pool)`` captures into it (it
    is a pool handle, like graph_pool_handle()'s). ``allocator`` must be None: npugraph has one
    allocator (a custom one raises UnsupportedError)."""

    def __init__(self, allocator=None, use_on_oom=False):
        if allocator is not None:
            raise _C.UnsupportedError(f"MemPool: allocator = {allocator!r}: npugraph has one caching "
                                      f"allocator; pass allocator=None")
        del use_on_oom  # one allocator: nothing to fall back to
        super().__init__()

    @property
    def id(self):
        """``(0, n)``, the ``segment_pool_id`` of its segments in memory_snapshot()."""
        return (0, _C.npu._PoolHandle.id.fget(self))

    def snapshot(self):
        """memory_snapshot() of this pool's segments."""
        return memory_snapshot(mempool_id=self.id)


@_contextlib.contextmanager
def use_mem_pool(pool, device=None):
    """torch.cuda.use_mem_pool: inside the block, npugraph's allocations on this thread come from
    ``pool`` (a MemPool or a graph pool handle) — except while the current stream captures, when the
    capture's pool is used. Torch's own tensors keep torch's allocator."""
    _check_device(device, "use_mem_pool")
    if not isinstance(pool, _C.npu._PoolHandle):
        raise TypeError(f"use_mem_pool: pool = {pool!r}: expected an npugraph.npu.MemPool "
                        f"(or a graph_pool_handle())")
    scope = _C.npu._UsePool(pool)
    try:
        yield
    finally:
        del scope  # restores this thread's previous pool


def memory_allocated(device=None):
    """Bytes handed out to live tensors (every pool, graph pools included)."""
    _check_device(device, "memory_allocated")
    return _C.memory_stats()["allocated_bytes"]


def max_memory_allocated(device=None):
    """The peak of memory_allocated() since the start or reset_peak_memory_stats()."""
    _check_device(device, "max_memory_allocated")
    return _C.memory_stats()["peak_allocated_bytes"]


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the system (cached free blocks included)."""
    _check_device(device, "memory_reserved")
    return _C.memory_stats()["reserved_bytes"]


def max_memory_reserved(device=None):
    """The peak of memory_reserved() since the start or reset_peak_memory_stats()."""
    _check_device(device, "max_memory_reserved")
    return _C.memory_stats()["peak_reserved_bytes"]


def reset_peak_memory_stats(device=None):
    """Restarts the peaks of max_memory_allocated() / max_memory_reserved() from the current values."""
    _check_device(device, "reset_peak_memory_stats")
    _C.reset_peak_memory_stats()


def empty_cache():
    """Returns the default pool's cached free blocks to the system; memory of live tensors and of
    graph pools stays. Waits for queued work; refused inside a capture (a synchronizing call)."""
    _C.empty_cache()


@_functools.lru_cache(maxsize=1)
def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def get_device_name(device=None):
    """The name of the device: ``"npugraph cpu (<CPU model>)"`` (npugraph has one device, the CPU)."""
    _check_device(device, "get_device_name")
    return f"npugraph cpu ({_cpu_model()})"


class _DeviceProperties:
    """What torch.npu.get_device_properties returns, for npugraph's one device (the CPU)."""

    __slots__ = ("name", "total_memory", "multi_processor_count")

    def __init__(self, name, total_memory, multi_processor_count):
        self.name, self.total_memory, self.multi_processor_count = name, total_memory, multi_processor_count

    def __repr__(self):
        return (f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory >> 20}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    """torch.npu.get_device_properties: ``name`` (get_device_name()), ``total_memory`` (the
    machine's physical memory in bytes) and ``multi_processor_count`` (its CPU cores)."""
    _check_device(device, "get_device_properties")
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 0
    return _DeviceProperties(get_device_name(), total, os.cpu_count() or 1)


def mem_get_info(device=None):
    """torch.npu.mem_get_info: ``(free, total)`` in bytes for the whole device, as
    ``aclrtGetMemInfo`` / ``cudaMemGetInfo`` give them, other processes' use included. npugraph's
    device is the host: ``total`` is its physical memory (``get_device_properties().total_memory``)
    and ``free`` the kernel's estimate of what new allocations can get without swapping
    (``MemAvailable`` of /proc/meminfo; where that cannot be read, the free pages)."""
    _check_device(device, "mem_get_info")
    import os

    total = get_device_properties().total_memory
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, total
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"), total
    except (ValueError, OSError):
        return 0, total


class device(_contextlib.AbstractContextManager):
    """``with npugraph.npu.device(0):`` — torch.cuda.device. npugraph has one device (index 0,
    ``"cpu"``, ``"npu"``, ``"npu:0"``); any other value raises naming it. Nothing changes inside."""

    def __init__(self, device):
        _check_device(device, "device")
        self.idx = 0

    def __exit__(self, *exc):
        return False


def is_current_stream_capturing():
    """True when the calling thread's current stream is capturing into a graph."""
    return _C.npu.current_stream().is_capturing()


def _copy_into(static, new, where):
    import numpy as np

    if type(new) is not type(static) or tuple(new.shape) != tuple(static.shape) or new.dtype != static.dtype:
        raise _C.ArgumentError(
            f"make_graphed_callables: {where}: got a {type(new).__name__} of shape {tuple(new.shape)} "
            f"and dtype {new.dtype}; the graph was captured with a {type(static).__name__} of shape "
            f"{tuple(static.shape)} and dtype {static.dtype} (every call must match its sample_args)")
    if isinstance(static, np.ndarray):
        np.copyto(static, new)
    else:
        static.copy_(new)


def _is_tensor(x):
    import numpy as np

    return isinstance(x, np.ndarray) or type(x).__name__ == "Tensor"


def _needs_autograd(fns, samples):
    """Whether torch's autograd takes part: a torch sample or a module parameter requires grad."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    from torch.utils._pytree import tree_flatten

    for fn, args in zip(fns, samples):
        flat = tree_flatten(args)[0]
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in flat):
            return True
        if isinstance(fn, torch.nn.Module) and any(p.requires_grad for p in fn.parameters()):
            return True
    return False


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False,
                           pool=None):
    """torch.cuda.make_graphed_callables. Each callable runs ``num_warmup_iters`` times eagerly on
    ``sample_args``, is captured once into its own NPUGraph (the graphs share one memory pool,
    ``pool`` or a new one), and comes back graphed. Torch ops are captured with npugraph's (Note
    [Torch ops in a capture] in npugraph/_torch_capture.py).

    With autograd (a torch sample that requires grad, or a module with such parameters, grad mode
    on) it is torch's: arguments are pytrees of tensors; each callable's forward and its backward
    (``torch.autograd.grad`` of its outputs with respect to its inputs and parameters) are captured
    into two graphs, backwards in reverse order; the result is an autograd function whose forward
    replays the first and whose backward replays the second, and a module comes back as itself with
    ``forward`` replaced (graphed while it stays in the training mode it was captured in).
    ``allow_unused_input`` lets an input the outputs do not depend on get no gradient.

    Without autograd (numpy arrays or tensors that do not require grad) a callable comes back as a
    function that copies its arguments into the captured inputs, replays, and returns the captured
    outputs (which the next call overwrites, as in torch)."""
    single = callable(callables)
    fns = (callables,) if single else tuple(callables)
    samples = (sample_args,) if single else tuple(sample_args)
    if len(fns) != len(samples):
        raise _C.ArgumentError(f"make_graphed_callables: {len(fns)} callables but {len(samples)} "
                               f"sample_args tuples: pass one tuple of arguments per callable")
    if not isinstance(num_warmup_iters, int) or isinstance(num_warmup_iters, bool) or num_warmup_iters < 0:
        raise TypeError(f"make_graphed_callables: num_warmup_iters = {num_warmup_iters!r}: must be an int >= 0")
    if _needs_autograd(fns, samples):
        from . import _graphed

        return _graphed.make_graphed_callables(single, fns, samples, num_warmup_iters, allow_unused_input, pool)
    del allow_unused_input  # no backward graph to prune
    shared_pool = pool if pool is not None else _C.npu.graph_pool_handle()
    from ._graph import graph as _graph_ctx

    graphed = []
    for i, (fn, args) in enumerate(zip(fns, samples)):
        if not callable(fn):
            raise TypeError(f"make_graphed_callables: callables[{i}] = {fn!r} is not callable")
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        for j, a in enumerate(args):
            if not _is_tensor(a):
                raise TypeError(f"make_graphed_callables: sample_args[{i}][{j}] is a {type(a).__name__}: "
                                f"every argument must be a tensor (numpy array or torch CPU tensor)")
        for _ in range(num_warmup_iters):
            fn(*args)
        _C.npu.synchronize()
        g = _C.npu.NPUGraph()
        with _graph_ctx(g, pool=shared_pool):
            outputs = fn(*args)

        def run(*new_args, _g=g, _static=args, _out=outputs, _i=i):
            if len(new_args) != len(_static):
                raise TypeError(f"make_graphed_callables: callable {_i} takes {len(_static)} "
                                f"argument(s), got {len(new_args)}")
            for j, (s, n) in enumerate(zip(_static, new_args)):
                if n is not s:
                    _copy_into(s, n, f"argument {j}")
            _g.replay()
            return _out

        run.graph = g
        graphed.append(run)
    return graphed[0] if single else tuple(graphed)


# --- torch_npu's housekeeping names that graph-mode code calls ---

def set_compile_mode(jit_compile=False):
    """torch_npu.npu.set_compile_mode: chooses between CANN's JIT-compiled and binary kernels.
    npugraph's kernels are compiled ahead of time, so the choice changes nothing; the argument is
    checked (a bool) and accepted."""
    if not isinstance(jit_compile, bool):
        raise TypeError(f"set_compile_mode: jit_compile = {jit_compile!r}: expected a bool")


def _stream_checked(stream, call):
    if not isinstance(stream, _C.npu.Stream):
        raise TypeError(f"{call}: stream = {stream!r}: expected an npugraph.npu.Stream")
    return stream


def _subscribe_report(stream):
    """torch_npu.npu._subscribe_report: binds a report thread to `stream` so that host functions
    launched on it can run. npugraph runs them on the stream's own worker, so nothing is needed."""
    _stream_checked(stream, "_subscribe_report")


def _unsubscribe_report(stream):
    """torch_npu.npu._unsubscribe_report: the counterpart of _subscribe_report (nothing to undo)."""
    _stream_checked(stream, "_unsubscribe_report")


def _launch_host_func(stream, fn, args=None):
    """torch_npu.npu._launch_host_func: launch_host_func under its private name."""
    _C.npu.launch_host_func(stream, fn, args)


def _sleep(cycles):
    """torch.cuda._sleep / torch_npu.npu._sleep: keeps the current stream busy for about `cycles`
    device cycles (taken as nanoseconds: a 1 GHz clock), so that work queued behind it waits."""
    if not isinstance(cycles, int) or isinstance(cycles, bool) or cycles < 0:
        raise TypeError(f"_sleep: cycles = {cycles!r}: expected an int >= 0")
    import time

    seconds = cycles / 1e9
    _C.npu.launch_host_func(_C.npu.current_stream(), lambda _: time.sleep(seconds))


def manual_seed(seed):
    """torch.npu.manual_seed: npugraph's device is the CPU, so this seeds torch's CPU generator
    (torch.manual_seed), the one torch ops on npu tensors draw from. Inside a capture only the
    generator's own seed is accepted, and does nothing (Note [Random numbers in a graph])."""
    import torch

    # the CPU generator itself: torch.manual_seed would call back into torch.npu.manual_seed_all
    # when npu is a real device (Note [The npu device])
    _rng.manual_seed(seed, torch)


def manual_seed_all(seed):
    """torch.npu.manual_seed_all: as manual_seed (one device)."""
    manual_seed(seed)


def seed():
    """torch.npu.seed: seeds the generator from a non-deterministic source."""
    import torch

    if _C.npu.current_stream().is_capturing():
        raise _C.StateError("seed: a graph cannot reseed the generator; seed it before the capture")
    _rng.wait_issued()
    torch.default_generator.seed()


def seed_all():
    """torch.npu.seed_all: as seed (one device)."""
    seed()


def initial_seed():
    """torch.npu.initial_seed: the generator's initial seed."""
    import torch

    _rng.wait_issued()
    return torch.default_generator.initial_seed()


def get_rng_state(device="npu"):
    """torch.npu.get_rng_state: the CPU generator's state (a uint8 tensor); inside a capture, a
    tensor each replay fills at that point (Note [Random numbers in a graph])."""
    _check_device(device, "get_rng_state")
    import torch

    return _rng.get_state(torch)


def set_rng_state(new_state, device="npu"):
    """torch.npu.set_rng_state: restores a state from get_rng_state(); inside a capture, at that
    point of every replay (Note [Random numbers in a graph])."""
    _check_device(device, "set_rng_state")
    import torch

    _rng.set_state(new_state, torch)


def is_bf16_supported():
    """torch.npu.is_bf16_supported: True (npugraph's kernels and torch's CPU ops take bfloat16)."""
    return True
