"""The torch.cuda / torch_npu names of ``npugraph.npu`` written in Python: memory statistics, the
device context, capture queries and ``make_graphed_callables``. Each follows the torch.cuda
function of the same name; where npugraph differs (one CPU device, no autograd), the docstring says.
"""
import contextlib as _contextlib
import functools as _functools
import platform as _platform

from . import _C

__all__ = [
    "device", "empty_cache", "get_device_name", "is_current_stream_capturing",
    "make_graphed_callables", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
    "memory_reserved", "memory_stats", "reset_peak_memory_stats",
]


def _check_device(device, call):
    if device is not None:
        _C.npu.set_device(device)  # raises naming the value for anything but the one device


def memory_stats(device=None):
    """torch.cuda.memory_stats: the caching allocator's counters as a dict with torch's keys
    (``allocated_bytes.all.current`` / ``.peak``, ``reserved_bytes.all.current`` / ``.peak``,
    ``segment.all.current``) plus npugraph's ``pools``."""
    _check_device(device, "memory_stats")
    s = _C.memory_stats()
    return {
        "allocated_bytes.all.current": s["allocated_bytes"],
        "allocated_bytes.all.peak": s["peak_allocated_bytes"],
        "reserved_bytes.all.current": s["reserved_bytes"],
        "reserved_bytes.all.peak": s["peak_reserved_bytes"],
        "segment.all.current": s["segments"],
        "pools": s["pools"],
    }


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


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False,
                           pool=None):
    """torch.cuda.make_graphed_callables, forward only: each callable runs ``num_warmup_iters``
    times eagerly on ``sample_args``, is captured once into its own NPUGraph (the graphs share one
    memory pool, ``pool`` or a new one), and comes back as a function that copies its arguments
    into the captured inputs, replays, and returns the captured outputs (which the next call
    overwrites, as in torch). Arguments are tensors (numpy arrays or torch CPU tensors) of the
    sample shapes and dtypes. Torch ops are captured with npugraph's (Note [Torch ops in a capture] in
    npugraph/_torch_capture.py). Autograd is not captured: a sample that requires grad raises
    UnsupportedError. ``allow_unused_input`` is accepted for torch compatibility."""
    del allow_unused_input  # no backward graph to prune
    single = callable(callables)
    fns = (callables,) if single else tuple(callables)
    samples = (sample_args,) if single else tuple(sample_args)
    if len(fns) != len(samples):
        raise _C.ArgumentError(f"make_graphed_callables: {len(fns)} callables but {len(samples)} "
                               f"sample_args tuples: pass one tuple of arguments per callable")
    if not isinstance(num_warmup_iters, int) or isinstance(num_warmup_iters, bool) or num_warmup_iters < 0:
        raise TypeError(f"make_graphed_callables: num_warmup_iters = {num_warmup_iters!r}: must be an int >= 0")
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
            if getattr(a, "requires_grad", False):
                raise _C.UnsupportedError(
                    f"make_graphed_callables: sample_args[{i}][{j}] requires grad: npugraph captures "
                    f"the forward pass only (no autograd graph); pass tensors with requires_grad=False")
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
