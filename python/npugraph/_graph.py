"""``npugraph.npu.graph``: the capture context manager, with a check for torch ops inside it.

Note [Torch ops inside a capture]
Only npugraph operations are captured into a graph. A torch op issued inside ``with
npugraph.npu.graph(g):`` (``x.add_(1)``) runs once, right then, and is not part of the graph: replays
do not repeat it. While the capture runs, a torch ``TorchDispatchMode`` watches the capturing thread's
torch ops (it sees no other thread's) and, by ``capture_error_mode``:

- ``"global"`` / ``"thread_local"``: raises ``npugraph.StateError`` naming the op (``aten.add_.Tensor``)
  before it runs; the capture is invalid — leaving the ``with`` block abandons it (and raises, if
  the error was caught inside the block);
- ``"relaxed"``: warns once per op (``RuntimeWarning``) and lets it run.

Ops that only make a view or an uninitialised tensor (``x[0]``, ``x.view(...)``, ``torch.empty``)
compute nothing and are allowed: a view passed to a captured op aliases the memory every replay
reads. npugraph's own torch calls (sharing tensors through DLPack, ``npugraph.empty``/``zeros`` with
torch dtypes) are not checked. Without torch imported, nothing is checked.
"""
import sys as _sys
import warnings as _warnings

from . import _C

__all__ = ["graph"]

# Allocation-only ops: nothing to replay (the memory stays valid, its contents were undefined).
_ALLOCATION_OPS = frozenset(
    ["aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default",
     "aten.new_empty.default", "aten.new_empty_strided.default"])


def _computes_nothing(func):
    """A view (every result aliases an input without writing it) or an allocation."""
    if str(func) in _ALLOCATION_OPS:
        return True
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.returns:
        return False
    return all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _make_guard(torch, graph_id, mode):
    from torch.utils._python_dispatch import TorchDispatchMode

    class _TorchOpGuard(TorchDispatchMode):
        """Flags torch ops issued on the capturing thread (Note [Torch ops inside a capture])."""

        def __init__(self):
            super().__init__()
            self.violation = None
            self.warned = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not _C._in_internal_torch() and not _computes_nothing(func):
                name = str(func)
                text = (f"torch op {name} was issued inside the capture of graph {graph_id}: only "
                        f"npugraph operations are captured into the graph, so it would run once now "
                        f"and replays would not repeat it")
                if mode == "relaxed":
                    if name not in self.warned:
                        self.warned.add(name)
                        _warnings.warn(f"npugraph.npu.graph: {text} (capture_error_mode='relaxed': "
                                       f"it runs eagerly)", RuntimeWarning, stacklevel=3)
                else:
                    message = (f"npugraph.npu.graph: {text}. The op did not run and the capture is "
                               f"invalid (leaving the with block discards it). Run it before or after "
                               f"the capture, or capture with capture_error_mode='relaxed' to only warn")
                    if self.violation is None:
                        self.violation = message
                    raise _C.StateError(message)
            return func(*args, **(kwargs or {}))

    return _TorchOpGuard()


class graph:
    """``with npugraph.npu.graph(g, pool=None, stream=None, capture_error_mode="global",
    auto_dispatch_capture=False):`` captures the work issued inside the block into ``g``
    (torch_npu.npu.graph): it makes a side stream current (or ``stream``), captures into ``g``'s
    private pool (or ``pool``), and ends the capture when the block ends — or abandons it when an
    exception leaves the block.

    ``capture_error_mode``: ``"global"`` / ``"thread_local"`` / ``"relaxed"`` — which synchronizing
    calls invalidate the capture, and whether a torch op issued inside the block raises or warns
    (Note [Torch ops inside a capture] in ``npugraph/_graph.py``).
    ``auto_dispatch_capture=True``: each ``npu_fused_infer_attention_score`` call is recorded in its
    own task group, for ``g.update(cpu_update_input=...)``.
    """

    def __init__(self, npu_graph, pool=None, stream=None, capture_error_mode="global",
                 auto_dispatch_capture=False):
        self._capture = _C.npu._GraphCapture(npu_graph, pool=pool, stream=stream,
                                             capture_error_mode=capture_error_mode,
                                             auto_dispatch_capture=auto_dispatch_capture)
        self._graph = npu_graph
        self._mode = capture_error_mode
        self._guard = None

    def __enter__(self):
        self._capture.__enter__()
        torch = _sys.modules.get("torch")
        if torch is not None and hasattr(torch, "utils"):
            try:
                guard = _make_guard(torch, self._graph.id, self._mode)
                guard.__enter__()
            except BaseException:
                self._capture.__exit__(RuntimeError, None, None)  # abandon: nothing was captured yet
                raise
            self._guard = guard
        return None

    def __exit__(self, exc_type, exc, tb):
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.__exit__(None, None, None)
            if guard.violation is not None and exc_type is None:  # raised, then caught in the block
                self._capture.__exit__(_C.StateError, None, None)  # abandons the capture
                raise _C.StateError(guard.violation + "; the capture was discarded")
        return self._capture.__exit__(exc_type, exc, tb)
