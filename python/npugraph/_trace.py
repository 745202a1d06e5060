"""``with npugraph.profile("trace.json"):`` — a Chrome-trace timeline of what ran (npugraph/trace.hpp).

Every task the streams run inside the block is recorded: eager kernels and built-in tasks, each
task of a replayed graph (graph id, task number, task group), ExternalEvent waits (with the event's
name: a long one is a wait for an update), stream-ordered update installs, and on the host the
replay launches and task updates. The file opens in https://ui.perfetto.dev or chrome://tracing;
one lane per stream.
"""
import json as _json

from . import _C

__all__ = ["profile"]


class profile:
    """Records a timeline while the block runs and writes it to ``path`` (Chrome trace JSON).
    Without a path, the trace is kept as ``.trace`` (a dict) after the block. Waits for the
    streams (``npu.synchronize()``) before it stops, so queued work is in the trace."""

    def __init__(self, path=None):
        if path is not None and not isinstance(path, str):
            raise TypeError(f"profile: path = {path!r}: expected a str or None")
        self.path = path
        self.trace = None

    def __enter__(self):
        _C.start_trace()
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            _C.npu.synchronize()
        except Exception:  # noqa: BLE001 - the block's error (or this one) is the user's to see
            if exc_type is None:
                _C.stop_trace(self.path)
                raise
        text = _C.stop_trace(None)
        self.trace = _json.loads(text)
        if self.path is not None:
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(text)
        return False
