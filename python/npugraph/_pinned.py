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
- ``host_memory_stats()``: ``allocations`` and ``allocated_bytes`` count the blocks the allocator
  holds (in use or cached), each with ``current`` / ``peak`` / ``allocated`` / ``freed``, as
  torch's host allocator reports them; ``num_host_alloc`` / ``num_host_free`` count the system
  allocations and frees.

A block is a ``bytearray``; the tensor reads it through a numpy view whose finalizer returns the
block when torch frees the tensor's storage (the last view of it). ``PYTORCH_NPU_ALLOC_CONF``
with ``pin_memory_expandable_segments:True`` makes a capture refuse to begin, as torch_npu's does
(expandable host segments cannot be captured).

Inside a capture the copy into the block is recorded like every torch op on npugraph's device (the
source may be a result the capture has not computed yet, ``torch.full(...).pin_memory()``): each
replay copies again, and the pinned tensor holds the data from the first replay on. On the device
the copy is a host copy made once, at capture. Not routed here: ``torch.empty(..., pin_memory=True)``
and ``DataLoader(pin_memory=True)``.
"""
import os as _os
import threading as _threading

from . import _C

__all__ = ["host_empty_cache", "host_memory_stats", "reset_peak_host_memory_stats",
           "reset_accumulated_host_memory_stats"]

_ROUND = 512
_DEFAULT = "default"
_lock = _threading.RLock()  # a block's finalizer may run under it (a GC pass)
_free = {}  # pool key -> {size: [block, ...]}
_live = {}  # address -> block, for blocks some tensor uses
_users = {}  # pool key -> ids of the graphs that pinned blocks in it
_stats = {}
_owner_class = []


def _reset_stats(accumulated=True, peak=True):
    for name in ("allocations", "allocated_bytes"):
        if accumulated:
            _stats[name + ".allocated"] = _stats[name + ".freed"] = 0
        if peak:
            _stats[name + ".peak"] = _stats.get(name + ".current", 0)
        _stats.setdefault(name + ".current", 0)
    if accumulated:
        _stats["num_host_alloc"] = _stats["num_host_free"] = 0


_reset_stats()


def _count(sign, nbytes):
    for name, amount in (("allocations", 1), ("allocated_bytes", nbytes)):
        _stats[name + ".current"] += sign * amount
        _stats[name + (".allocated" if sign > 0 else ".freed")] += amount
        _stats[name + ".peak"] = max(_stats[name + ".peak"], _stats[name + ".current"])
    _stats["num_host_alloc" if sign > 0 else "num_host_free"] += 1


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
        _free.setdefault(block.pool, {}).setdefault(block.size, []).append(block)


def _acquire(nbytes, pool):
    size = max(_ROUND, -(-nbytes // _ROUND) * _ROUND)
    with _lock:
        cached = _free.get(pool, {}).get(size)
        block = cached.pop() if cached else None
    if block is None:
        block = _Block(size, pool)
        with _lock:
            _count(+1, size)
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


def pin_memory(tensor, device=None):
    """Tensor.pin_memory() under the shim: a contiguous copy in a cached host block (Note [Pinned
    host memory])."""
    del device
    import numpy as np
    import torch

    if tensor.device.type != "cpu":
        raise RuntimeError(f"pin_memory: the tensor is on {tensor.device}: only host (CPU) tensors can be "
                           f"pinned")
    if tensor.layout != torch.strided:
        raise RuntimeError(f"pin_memory: the tensor's layout is {tensor.layout}: npugraph pins strided "
                           f"(dense) tensors only")
    if is_pinned(tensor):
        return tensor
    nbytes = tensor.numel() * tensor.element_size()
    block = _acquire(nbytes, capture_pool() or _DEFAULT)
    view = np.frombuffer(block.raw, dtype=np.uint8).view(_owner_type(np))
    view._npugraph_block = block
    flat = torch.from_numpy(view)
    block.address = flat.data_ptr()
    with _lock:
        _live[block.address] = block
    del view
    pinned = flat[:nbytes].view(tensor.dtype).view(tensor.shape) if nbytes else \
        torch.empty(tensor.shape, dtype=tensor.dtype)
    pinned.copy_(tensor)
    return pinned


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
                _count(-1, block.size)


def host_memory_stats():
    """torch.npu.host_memory_stats: the pinned host allocator's counters (Note [Pinned host memory])."""
    with _lock:
        return dict(sorted(_stats.items()))


def reset_peak_host_memory_stats():
    """torch.npu.reset_peak_host_memory_stats: each ``.peak`` counter starts again from ``.current``."""
    with _lock:
        _reset_stats(accumulated=False)


def reset_accumulated_host_memory_stats():
    """torch.npu.reset_accumulated_host_memory_stats: the ``.allocated`` / ``.freed`` counters and
    ``num_host_alloc`` / ``num_host_free`` start again from 0."""
    with _lock:
        _reset_stats(peak=False)
