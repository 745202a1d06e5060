"""``npugraph.npu.graph``: the capture context manager, and the direct ``capture_begin`` /
``capture_end`` of ``NPUGraph``; both record the torch ops issued inside the capture into the graph
(Note [Torch ops in a capture] in ``npugraph/_torch_capture.py``).
"""
from . import _C
from . import _torch_capture

__all__ = ["graph", "capture_begin", "capture_end"]


_EMPTY = ("The NPU Graph is empty: graph {} recorded no task (torch_npu's warning). Work issued on "
          "another stream than the capturing one, or on another thread, is not captured.")


def _warn_if_empty(npu_graph):
    if npu_graph.num_tasks == 0:
        import warnings

        warnings.warn(_EMPTY.format(npu_graph.id), UserWarning, stacklevel=3)


def _finish(npu_graph, capture):
    """After the C++ capture ended: a capture that refused a torch op is discarded, and raises; an
    empty one warns, as torch_npu's does."""
    if capture is not None and capture.violation is not None:
        npu_graph.reset()
        raise _C.StateError(capture.violation + "; the capture was discarded")
    _warn_if_empty(npu_graph)


_cpp_capture_begin = _C.npu.NPUGraph.capture_begin
_cpp_capture_end = _C.npu.NPUGraph.capture_end


def capture_begin(self, pool=None, capture_error_mode="global"):
    """Begins capturing the current stream (which must not be the default stream) into this graph,
    with the torch ops this thread issues on it (torch.cuda.CUDAGraph.capture_begin)."""
    _cpp_capture_begin(self, pool=pool, capture_error_mode=capture_error_mode)
    try:
        _torch_capture.begin(self.id)
    except BaseException:
        _cpp_capture_end(self)
        self.reset()
        raise


def capture_end(self):
    """Ends the capture begun on the current stream and instantiates the graph; a capture in which a
    torch op was refused is discarded and raises StateError naming the op."""
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
        self._graph = npu_graph
        self._capture_state = None

    def __enter__(self):
        self._capture.__enter__()
        try:
            self._capture_state = _torch_capture.begin(self._graph.id)
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
            _warn_if_empty(self._graph)
        return suppressed
