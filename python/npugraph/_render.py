"""``NPUGraph.render(path="graph.svg")``: the graph's DOT dump drawn by Graphviz (Debian: graphviz,
installed by make setup). The DOT text is ``g.dot()`` / ``g.debug_dump(path)``: every task with its
parameters as the next replay uses them, task groups outlined with their handle index,
ExternalEvent names."""
import os as _os
import shutil as _shutil
import subprocess as _subprocess

from . import _C


def render(self, path="graph.svg"):
    """Writes the graph drawn by Graphviz to ``path`` (the format from its suffix: .svg, .png,
    .pdf; default graph.svg) and returns the path. Raises UnsupportedError when Graphviz's ``dot``
    is not installed (``g.debug_dump(path)`` still writes the DOT text)."""
    if not isinstance(path, str):
        raise TypeError(f"NPUGraph.render: path = {path!r}: expected a str")
    fmt = _os.path.splitext(path)[1].lstrip(".").lower() or "svg"
    if fmt not in ("svg", "png", "pdf"):
        raise _C.ArgumentError(f"NPUGraph.render: path = '{path}': the suffix must be .svg, .png or .pdf")
    dot = _shutil.which("dot")
    if dot is None:
        raise _C.UnsupportedError("NPUGraph.render: Graphviz's `dot` is not installed (Debian: apt-get "
                                  "install graphviz); g.debug_dump(path) writes the DOT text without it")
    # dot is not ours: it gets no sanitizer runtime a sanitized test run preloads into Python.
    env = {k: v for k, v in _os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    proc = _subprocess.run([dot, f"-T{fmt}", "-o", path], input=self.dot(), capture_output=True,
                           text=True, timeout=120, env=env)
    if proc.returncode != 0:
        raise _C.Error(f"NPUGraph.render: dot failed for '{path}': {proc.stderr.strip()[:500]}")
    return path
