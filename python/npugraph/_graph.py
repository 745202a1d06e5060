"""``npugraph.npu.graph``: the capture context manager, and the direct ``capture_begin`` /
``capture_end`` of ``NPUGraph``; both record the torch ops issued inside the capture into the graph
(Note [Torch ops in a capture] in ``npugraph/_torch_capture.py``).
"""
import logging as _logging
import os as _os
import weakref as _weakref

from . import _C
from . import _npugraph_utils
from . import _pinned
from . import _rng
from . import _torch_capture

__all__ = ["graph", "capture_begin", "capture_end", "replay", "reset", "register_generator_state", "debug_dump",
           "graph_dispatch_mode"]
_log = _logging.getLogger("npugraph.npu")


_EMPTY = ("The NPU Graph is empty: graph {} recorded no task (torch_npu's warning). Work issued on "
          "another stream than the capturing one, or on another thread, is not captured.")


def _warn_if_empty(npu_graph):
    if npu_graph.num_tasks == 0:
        import warnings

        warnings.warn(_EMPTY.format(npu_graph.id), UserWarning, stacklevel=3)


def _finish(npu_graph, capture):
    """After the C++ capture ended: a capture whose torch op failed to record is discarded, and
    raises; an empty one warns, as torch_npu's does."""
    if capture is not None and capture.violation is not None:
        npu_graph.reset()
        raise _C.StateError(capture.violation + "; the capture was discarded")
    _rng.set_graph_draws(npu_graph.id, capture is not None and capture.draws)
    _warn_if_empty(npu_graph)


_cpp_capture_begin = _C.npu.NPUGraph.capture_begin
_cpp_capture_end = _C.npu.NPUGraph.capture_end


def capture_begin(self, pool=None, capture_error_mode="global"):
    """Begins capturing the current stream (which must not be the default stream) into this graph,
    with the torch ops this thread issues on it (torch.cuda.CUDAGraph.capture_begin)."""
    _pinned.check_capture_allowed()
    _watch(self)
    _cpp_capture_begin(self, pool=pool, capture_error_mode=capture_error_mode)
    try:
        _torch_capture.begin(self.id, pool)
    except BaseException:
        _cpp_capture_end(self)
        self.reset()
        raise


def capture_end(self):
    """Ends the capture begun on the current stream and instantiates the graph; a capture in which a
    torch op could not be recorded (a launch failed) is discarded and raises StateError naming the
    op. A refused op (a host read) raised when it was issued and leaves the capture valid."""
    capture = _torch_capture.end(self.id)
    _cpp_capture_end(self)
    _finish(self, capture)


class graph:
    """``with npugraph.npu.graph(g, pool=None, stream=None, capture_error_mode="global",
    auto_dispatch_capture=False):`` captures the work issued inside the block into ``g``
    (torch_npu.npu.graph): it makes a side stream current (or ``stream``), captures into ``g``'s
    private pool (or ``pool``), and ends the capture when the block ends — or abandons it when an
    exception leaves the block.

    ``capture_error_mode``: ``"global"`` / ``"thread_local"`` / ``"relaxed"`` — which synchronizing
    calls invalidate the capture. Torch ops issued inside the block are captured too (Note [Torch
    ops in a capture] in ``npugraph/_torch_capture.py``).
    ``auto_dispatch_capture=True``: each ``npu_fused_infer_attention_score`` call is recorded in its
    own task group, for ``g.update(cpu_update_input=...)``.
    """

    def __init__(self, npu_graph, pool=None, stream=None, capture_error_mode="global",
                 auto_dispatch_capture=False):
        self._capture = _C.npu._GraphCapture(npu_graph, pool=pool, stream=stream,
                                             capture_error_mode=capture_error_mode,
                                             auto_dispatch_capture=auto_dispatch_capture)
        self._graph, self._pool = npu_graph, pool
        self._capture_state = None

    def __enter__(self):
        _pinned.check_capture_allowed()
        _watch(self._graph)
        self._capture.__enter__()
        try:
            self._capture_state = _torch_capture.begin(self._graph.id, self._pool)
        except BaseException:
            self._capture.__exit__(RuntimeError, None, None)  # abandon: nothing was captured yet
            raise
        return None

    def __exit__(self, exc_type, exc, tb):
        capture, self._capture_state = self._capture_state, None
        if capture is not None:
            _torch_capture.end(self._graph.id)
            if capture.violation is not None and exc_type is None:  # raised, then caught in the block
                self._capture.__exit__(_C.StateError, None, None)  # abandons the capture
                raise _C.StateError(capture.violation + "; the capture was discarded")
        suppressed = self._capture.__exit__(exc_type, exc, tb)
        if exc_type is None:
            _rng.set_graph_draws(self._graph.id, capture is not None and capture.draws)
            _warn_if_empty(self._graph)
        return suppressed


_cpp_replay = _C.npu.NPUGraph.replay
_cpp_reset = _C.npu.NPUGraph.reset


def reset(self):
    """Deletes the graph and releases its pool: its pinned host blocks return to the default pool
    (Note [Pinned host memory] in npugraph/_pinned.py)."""
    _cpp_reset(self)
    _graph_gone(self.id)


def _graph_gone(graph_id):
    """What the Python side keeps per graph, let go at its reset or its end."""
    _rng.set_graph_draws(graph_id, False)
    _pinned.graph_gone(graph_id)


_watched = {}  # graph id -> its weakref.finalize


def _watch(npu_graph):
    """Lets go of the graph's Python-side state when the graph object goes, reset or not."""
    if npu_graph.id not in _watched:
        _watched[npu_graph.id] = _weakref.finalize(npu_graph, _unwatch, npu_graph.id)


def _unwatch(graph_id):
    _watched.pop(graph_id, None)
    _graph_gone(graph_id)


_blocking_default = [True]


def set_replay_blocking_default(blocking):
    """What replay(blocking=None) does: wait (True, npugraph's default) or not (the shim's)."""
    _C.npu._set_replay_blocking_default(blocking)
    _blocking_default[0] = bool(blocking)


def replay(self, stream=None, blocking=None):
    """Replays the graph on `stream` (default: the current one); blocking=True waits for it,
    blocking=False returns once it is launched, None: the process default (torch_npu's shim: False).
    A graph whose tasks draw random numbers replays after the drawing work issued before it, on any
    stream (Note [Random numbers in a graph] in npugraph/_rng.py)."""
    if not _rng.graph_draws(self.id):
        return _cpp_replay(self, stream, blocking)
    s = _C.npu.current_stream() if stream is None else stream
    if not isinstance(s, _C.npu.Stream) or s.is_capturing() or \
            (blocking is not None and not isinstance(blocking, bool)):
        return _cpp_replay(self, stream, blocking)  # the C++ call names a bad argument
    _rng.ordered(s, lambda: _cpp_replay(self, s, False))
    if blocking or (blocking is None and _blocking_default[0]):
        s.synchronize()
    return None


def register_generator_state(self, generator):
    """torch.cuda.CUDAGraph.register_generator_state: the graph's random ops draw from `generator`
    when they replay, in host order (Note [Random numbers in a graph]); nothing else is needed, so
    this checks the argument and returns."""
    import torch

    if not isinstance(generator, torch.Generator):
        raise TypeError(f"register_generator_state: generator = {type(generator).__name__}: expected a "
                        f"torch.Generator")
    if generator.device.type not in ("cpu", "npu", "privateuseone"):
        raise ValueError(f"register_generator_state: generator on {generator.device}: npugraph's device "
                         f"draws from CPU generators")


_cpp_debug_dump = _C.npu.NPUGraph.debug_dump


def _has_capture(npu_graph):
    try:
        npu_graph.instantiate()  # checks that a finished capture exists; changes nothing
    except _C.StateError:
        return False
    return True


def debug_dump(self, debug_path):
    """Writes the graph to ``debug_path`` (torch_npu's NPUGraph.debug_dump): with a ``.json`` path,
    a Chrome-trace JSON document (torch_npu's format: ``g.json()``) and beside it the aligned view
    ``<path without .json>.aligned.json`` (``npugraph/_npugraph_utils.py``); any other path gets
    Graphviz DOT (``g.dot()``). Returns None. A graph without a finished capture writes nothing (as
    torch_npu's, which leaves an existing file as it was), and a failure of the aligned view is
    logged, leaving the dump itself in place."""
    path = _os.fspath(debug_path) if isinstance(debug_path, (str, _os.PathLike)) else None
    if not isinstance(path, str):
        raise TypeError(f"debug_dump: debug_path = {debug_path!r}: expected a str (or an os.PathLike "
                        f"of one)")
    if not path.endswith(".json"):
        _cpp_debug_dump(self, path)
        return None
    if not _has_capture(self):
        _log.warning("debug_dump: graph %s has no finished capture: %s not written", self.id, path)
        return None
    _cpp_debug_dump(self, path)
    try:
        _npugraph_utils.align_trace_json(path, None)
    except Exception:  # the aligned view is derived data: the dump stands without it
        _log.warning("debug_dump: the aligned trace of %s could not be written; an existing one was "
                     "not updated", path, exc_info=True)
    return None


class _GraphDispatchMode:
    """What ``NPUGraph.graph_dispatch_mode`` holds in torch_npu master: the one ``update_stream``
    every graph's ``update()`` issues on (Note [One update stream] in include/npugraph/recorded_updates.hpp)."""

    __slots__ = ()

    @property
    def update_stream(self):
        return _C.npu._graph_update_stream()

    def __repr__(self):
        return f"_GraphDispatchMode(update_stream={self.update_stream!r})"


@property
def graph_dispatch_mode(self):
    """torch_npu master's ``g.graph_dispatch_mode``: its ``update_stream`` is the same stream for
    every graph (``g1.graph_dispatch_mode.update_stream == g2.graph_dispatch_mode.update_stream``)."""
    del self
    return _GraphDispatchMode()
