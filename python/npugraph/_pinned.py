"""Pinned host memory under the torch_npu shim: ``Tensor.pin_memory()``, ``is_pinned()``, graph pools
for blocks pinned inside a capture, and torch_npu's host-allocator statistics.

Note [Pinned host memory]
On the device, ``pin_memory()`` copies a tensor into page-locked host memory from torch_npu's
caching host allocator, the memory an asynchronous host-to-device copy reads. npugraph's device is
the host, so nothing needs locking, but programs written for the device pin memory, check
``is_pinned()``, capture copies out of pinned tensors, and read ``host_memory_stats()``; the shim
gives them the allocator's behaviour:

- blocks come from a cache (sizes rounded up to 512 bytes); a block whose last tensor dies goes back
  to its pool's free list, and ``host_empty_cache()`` frees the default pool's free blocks;
- a block pinned inside a capture comes from that capture's pool (the graph's, or the ``pool``
  handle given to ``npu.graph``): freed, it stays in that pool, so later ``pin_memory()`` calls
  outside never get it and the graph's replays keep reading what was captured; ``host_empty_cache``
  leaves it. When the last graph that pinned blocks in a pool is reset or destroyed, the pool's
  free blocks go back to the default pool (in-use ones follow when freed);
- ``host_memory_stats()`` has torch_npu's keys (torch 2.x's host allocator's): ``allocations`` and
  ``allocated_bytes`` count the blocks the allocator holds (in use or cached), ``active_requests``
  and ``active_bytes`` the blocks handed out to tensors (up when ``pin_memory()`` hands one out,
  new or cached; down when its last tensor dies), each with ``current`` / ``peak`` / ``allocated``
  / ``freed``; ``num_host_alloc`` / ``num_host_free`` count the system allocations and frees, and
  ``host_alloc_time`` / ``host_free_time`` time them (microseconds: ``total`` / ``max`` / ``min`` /
  ``count`` / ``avg``, torch's DurationStat: ``min`` is the least nonzero time).

A block is a ``bytearray``; the tensor reads it through a numpy view whose finalizer returns the
block when torch frees the tensor's storage (the last view of it). ``PYTORCH_NPU_ALLOC_CONF``
with ``pin_memory_expandable_segments:True`` makes a capture refuse to begin, as torch_npu's does
(expandable host segments cannot be captured).

Inside a capture the copy into the block is recorded like every torch op on npugraph's device (the
source may be a result the capture has not computed yet, ``torch.full(...).pin_memory()``): each
replay copies again, and the pinned tensor holds the data from the first replay on. On the device
the copy is a host copy made once, at capture.

torch's factories given ``pin_memory=True`` (``torch.empty``, ``zeros``, ``ones``, ``full``,
``tensor``, ``arange``, ``rand``, the ``*_like`` ones, the window functions ... ``PIN_FACTORIES``,
and ``Tensor.new_empty`` / ``new_zeros`` / ``new_ones`` / ``new_full`` / ``new_empty_strided``)
make their result as without it and place it in a block here, with its size, strides and dtype
(the uninitialised ones copy nothing); torch itself would ask CUDA for pinned memory and fail.
``DataLoader(..., pin_memory=True)`` pins each batch with ``Tensor.pin_memory()`` as its iterator
hands the batch out, through torch's own ``pin_memory(batch)`` walk, in every thread and worker
setting: torch's pin thread is not started, because it selects its device through ``torch.cuda``
(torch 1.13) or ``torch.accelerator`` (torch 2.x), which do not know npugraph's device (torch 2.x
would also drop pinning with a warning that no accelerator is found).
"""
import os as _os
import threading as _threading
import time as _time

from . import _C

__all__ = ["host_empty_cache", "host_memory_stats", "host_memory_stats_as_nested_dict",
           "reset_peak_host_memory_stats", "reset_accumulated_host_memory_stats"]

_ROUND = 512
_DEFAULT = "default"
_lock = _threading.RLock()  # a block's finalizer may run under it (a GC pass)
_free = {}  # pool key -> {size: [block, ...]}
_live = {}  # address -> block, for blocks some tensor uses
_users = {}  # pool key -> ids of the graphs that pinned blocks in it
_stats = {}
_owner_class = []


_STATS = ("allocations", "allocated_bytes", "active_requests", "active_bytes")
_TIMES = ("host_alloc_time", "host_free_time")


def _reset_stats(accumulated=True, peak=True):
    """torch's Stat and DurationStat resets: accumulated -> ``allocated`` / ``freed`` (a time's
    ``total`` / ``count``) are 0; peak -> ``peak`` is ``current`` (a time's ``max`` / ``min`` are 0)."""
    for name in _STATS:
        if accumulated:
            _stats[name + ".allocated"] = _stats[name + ".freed"] = 0
        if peak:
            _stats[name + ".peak"] = _stats.get(name + ".current", 0)
        _stats.setdefault(name + ".current", 0)
    for name in _TIMES:
        if accumulated:
            _stats[name + ".total"] = _stats[name + ".count"] = 0
        if peak:
            _stats[name + ".max"] = _stats[name + ".min"] = 0
    if accumulated:
        _stats["num_host_alloc"] = _stats["num_host_free"] = 0


_reset_stats()


def _bump(name, amount):
    """Moves the Stat `name` by `amount` (its current, peak and allocated or freed)."""
    _stats[name + ".current"] += amount
    _stats[name + (".allocated" if amount > 0 else ".freed")] += abs(amount)
    _stats[name + ".peak"] = max(_stats[name + ".peak"], _stats[name + ".current"])


def _count(sign, nbytes, micros):
    """A block made (+1) or freed (-1) by the system, taking `micros` microseconds."""
    _bump("allocations", sign)
    _bump("allocated_bytes", sign * nbytes)
    _stats["num_host_alloc" if sign > 0 else "num_host_free"] += 1
    name = "host_alloc_time" if sign > 0 else "host_free_time"  # torch's DurationStat.increase
    _stats[name + ".total"] += micros
    _stats[name + ".count"] += 1
    _stats[name + ".max"] = max(_stats[name + ".max"], micros)
    _stats[name + ".min"] = micros if _stats[name + ".min"] == 0 else min(_stats[name + ".min"], micros)


def _active(sign, nbytes):
    """A block handed out to a tensor (+1) or back from it (-1)."""
    _bump("active_requests", sign)
    _bump("active_bytes", sign * nbytes)


def _micros_since(start):
    return int((_time.perf_counter() - start) * 1e6)


class _Block:
    __slots__ = ("raw", "size", "pool", "address")

    def __init__(self, size, pool):
        self.raw, self.size, self.pool, self.address = bytearray(size), size, pool, None


def _owner_type(np):
    if not _owner_class:
        class _PinnedView(np.ndarray):
            """The numpy view a pinned tensor's storage holds: its end returns the block."""

            def __del__(self):
                block = self.__dict__.pop("_npugraph_block", None)
                if block is not None:
                    _release(block)

        _owner_class.append(_PinnedView)
    return _owner_class[0]


def _release(block):
    with _lock:
        _live.pop(block.address, None)
        _active(-1, block.size)
        _free.setdefault(block.pool, {}).setdefault(block.size, []).append(block)


def _acquire(nbytes, pool):
    size = max(_ROUND, -(-nbytes // _ROUND) * _ROUND)
    with _lock:
        cached = _free.get(pool, {}).get(size)
        block = cached.pop() if cached else None
        if block is not None:
            _active(+1, size)
    if block is None:
        start = _time.perf_counter()
        block = _Block(size, pool)
        micros = _micros_since(start)
        with _lock:
            _count(+1, size, micros)
            _active(+1, size)
    return block


def capture_pool():
    """The pool key of the capture running on this thread's current stream (None: not capturing);
    the capture's graph becomes one of the pool's users."""
    from . import _torch_capture

    if not _C.npu.current_stream().is_capturing():
        return None
    found = _torch_capture.current_pool_key()
    if found is None:
        return None
    key, graph_id = found
    with _lock:
        _users.setdefault(key, set()).add(graph_id)
    return key


def _check_pinnable(tensor, what):
    import torch

    if tensor.device.type != "cpu":
        raise RuntimeError(f"{what}: the tensor is on {tensor.device}: only host (CPU) tensors can be "
                           f"pinned")
    if tensor.layout != torch.strided:
        raise RuntimeError(f"{what}: the tensor's layout is {tensor.layout}: npugraph pins strided "
                           f"(dense) tensors only")


def _empty_pinned(size, stride, dtype):
    """An uninitialised tensor of this size, stride and dtype in a cached host block."""
    import numpy as np
    import torch

    extent = 0 if any(n == 0 for n in size) else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    nbytes = extent * torch._utils._element_size(dtype)
    if not nbytes:
        return torch.empty_strided(size, stride, dtype=dtype)
    block = _acquire(nbytes, capture_pool() or _DEFAULT)
    view = np.frombuffer(block.raw, dtype=np.uint8).view(_owner_type(np))
    view._npugraph_block = block
    flat = torch.from_numpy(view)
    block.address = flat.data_ptr()
    with _lock:
        _live[block.address] = block
    del view
    return flat[:nbytes].view(dtype).as_strided(size, stride)


def pin_memory(tensor, device=None):
    """Tensor.pin_memory() under the shim: a contiguous copy in a cached host block (Note [Pinned
    host memory])."""
    del device
    _check_pinnable(tensor, "pin_memory")
    if is_pinned(tensor):
        return tensor
    pinned = _empty_pinned(tensor.shape, _contiguous_strides(tensor.shape), tensor.dtype)
    pinned.copy_(tensor)
    return pinned


def _contiguous_strides(size):
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


# torch's factories that take pin_memory=True (torch 1.13 and 2.10 alike), and the Tensor methods;
# the ones whose result is uninitialised need no copy into the pinned block
PIN_FACTORIES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange",
                 "linspace", "logspace", "eye", "empty_strided", "tensor", "scalar_tensor", "normal",
                 "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                 "randint_like", "tril_indices", "triu_indices", "bartlett_window", "blackman_window",
                 "hamming_window", "hann_window", "kaiser_window")
PIN_METHODS = ("new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided")
_UNINITIALISED = frozenset(["empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"])


def pinning_factory(name, fn):
    """torch.`name` (or Tensor.`name`) under the shim: with ``pin_memory=True`` its result is made
    as without it and placed in a cached host block (Note [Pinned host memory]), same size, strides
    and dtype, ``requires_grad`` as asked; without it, `fn` as it is."""
    import functools

    copy = name not in _UNINITIALISED

    @functools.wraps(fn)
    def factory(*args, pin_memory=False, **kwargs):
        if not pin_memory:
            return fn(*args, **kwargs)
        grad = kwargs.pop("requires_grad", False)
        made = fn(*args, **kwargs)
        _check_pinnable(made, f"{name}(..., pin_memory=True)")
        pinned = _empty_pinned(made.shape, made.stride(), made.dtype)
        if copy:
            pinned.copy_(made)
        return pinned.requires_grad_() if grad else pinned

    return factory


def _storage_address(tensor):
    storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
    return storage.data_ptr()


def is_pinned(tensor, device=None):
    """Tensor.is_pinned() under the shim: whether the tensor's memory is a pinned block."""
    del device
    if tensor.device.type != "cpu" or tensor.numel() == 0 or tensor.is_sparse or tensor.is_mkldnn:
        return False
    with _lock:
        return _storage_address(tensor) in _live


def graph_gone(graph_id):
    """A graph was reset or destroyed: the pools it was the last user of are released."""
    with _lock:
        emptied = []
        for key, users in _users.items():
            users.discard(graph_id)
            if not users:
                emptied.append(key)
        for key in emptied:
            del _users[key]
            release_pool(key)


def release_pool(key):
    """The pool's last graph is gone: its free blocks go back to the default pool, and its blocks
    in use go there when freed."""
    with _lock:
        for sizes in _free.pop(key, {}).values():
            for block in sizes:
                block.pool = _DEFAULT
                _free.setdefault(_DEFAULT, {}).setdefault(block.size, []).append(block)
        for block in _live.values():
            if block.pool == key:
                block.pool = _DEFAULT


def check_capture_allowed():
    """torch_npu refuses to capture with expandable pinned segments configured."""
    conf = _os.environ.get("PYTORCH_NPU_ALLOC_CONF", "")
    for item in conf.split(","):
        key, _, value = item.partition(":")
        if key.strip() == "pin_memory_expandable_segments" and value.strip().lower() == "true":
            raise _C.StateError(
                "PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True: pinned host memory in "
                "expandable segments cannot be captured into a graph (torch_npu refuses it at "
                "capture_begin); unset it to capture")


def host_empty_cache():
    """torch.npu.host_empty_cache: frees the default pool's cached pinned blocks (graph pools keep
    theirs)."""
    with _lock:
        for sizes in _free.pop(_DEFAULT, {}).values():
            for block in sizes:
                start = _time.perf_counter()
                block.raw = None  # the block's memory goes back to the system
                _count(-1, block.size, _micros_since(start))


def host_memory_stats():
    """torch.npu.host_memory_stats: the pinned host allocator's counters, torch_npu's keys (Note
    [Pinned host memory])."""
    with _lock:
        stats = dict(_stats)
    for name in _TIMES:  # torch_npu: total / count, 0 before the first
        count = stats[name + ".count"]
        stats[name + ".avg"] = stats[name + ".total"] // count if count else 0
    return dict(sorted(stats.items()))


def host_memory_stats_as_nested_dict():
    """torch.npu.host_memory_stats_as_nested_dict: host_memory_stats() nested at each dot."""
    nested = {}
    for key, value in host_memory_stats().items():
        name, _, field = key.partition(".")
        if field:
            nested.setdefault(name, {})[field] = value
        else:
            nested[name] = value
    return nested


def reset_peak_host_memory_stats():
    """torch.npu.reset_peak_host_memory_stats: each ``.peak`` counter starts again from ``.current``."""
    with _lock:
        _reset_stats(accumulated=False)


def reset_accumulated_host_memory_stats():
    """torch.npu.reset_accumulated_host_memory_stats: the ``.allocated`` / ``.freed`` counters and
    ``num_host_alloc`` / ``num_host_free`` start again from 0."""
    with _lock:
        _reset_stats(peak=False)


_LOADER_WARNING = "'pin_memory' argument is set as true but no accelerator is found"


def loader_iter_methods(init, next_):
    """``__init__`` and ``__next__`` for torch's DataLoader iterators under the shim:
    ``DataLoader(..., pin_memory=True)`` yields batches pinned by ``Tensor.pin_memory()`` (torch's
    own ``pin_memory(batch)`` walk: tensors, mappings, named tuples, sequences, objects with a
    ``pin_memory`` method). torch's pin thread is not used: it selects a device through
    ``torch.cuda`` (torch 1.13) or ``torch.accelerator`` (torch 2.x), neither of which knows
    npugraph's device; the iterator pins each batch as it hands it out (Note [Pinned host memory])."""
    import functools
    import warnings

    @functools.wraps(init)
    def __init__(self, loader, *args, **kwargs):
        with warnings.catch_warnings():  # torch 2.x: pinning is not dropped here
            warnings.filterwarnings("ignore", message=_LOADER_WARNING)
            init(self, loader, *args, **kwargs)
        self._npugraph_pin_memory = bool(loader.pin_memory)
        self._pin_memory = False  # no pin thread (read by the multi-process iterator after this)

    @functools.wraps(next_)
    def __next__(self):
        batch = next_(self)
        if getattr(self, "_npugraph_pin_memory", False):
            from torch.utils.data._utils.pin_memory import pin_memory as pin_batch

            batch = pin_batch(batch)
        return batch

    return __init__, __next__
