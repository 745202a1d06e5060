import os

import numpy as np
import pytest
import torch

# The real-model checks (SmolLM2 and Gemma 3 270M against the numpy reference, the Python decode
# example, the whole-file reader reference, the Unicode table over every code point) take three
# minutes in Release and five times that under ASan: they run once, in the Release build's first
# suite (torch 1.13). The sanitizer builds (CMakeLists.txt sets NPUGRAPH_SANITIZED) and the torch 2.x
# suite (NPUGRAPH_SKIP_REAL_MODELS) skip them and keep every other test, the tiny-model engine tests
# (the same engine, reference and numpy code on small files) included.
_RELEASE_ONLY = ("test_smollm2_", "test_gemma3_270m_", "test_example_llm.py", "llm/test_reference.py",
                 "test_every_code_point_classifies")


def pytest_collection_modifyitems(config, items):
    # npugraph-serve's tests use no torch and no extension: one run is enough (the Release build's,
    # torch 1.13); the torch 2.x suite and the sanitizer builds' (which build no server) skip them.
    if os.environ.get("NPUGRAPH_SKIP_SERVE"):
        skip_serve = pytest.mark.skip(reason="npugraph-serve: tested once, by the Release build's first suite")
        for item in items:
            if "serve/" in item.nodeid.replace(os.sep, "/"):
                item.add_marker(skip_serve)
    if not (os.environ.get("NPUGRAPH_SANITIZED") or os.environ.get("NPUGRAPH_SKIP_REAL_MODELS")):
        return
    skip = pytest.mark.skip(reason="real-model test: run once, by the Release build's first suite (make test-release)")
    for item in items:
        if any(part in item.nodeid for part in _RELEASE_ONLY):
            item.add_marker(skip)


if os.environ.get("NPUGRAPH_REQUIRE_INSTALLED"):  # make test-wheel: the installed package, not build/
    import npugraph

    assert "site-packages" in npugraph.__file__, npugraph.__file__


@pytest.fixture
def shim():
    """The torch_npu shim installed for the test (npugraph.compat), uninstalled after it."""
    import npugraph.compat as compat

    mod = compat.install()
    try:
        yield mod
    finally:
        compat.uninstall()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def randn(shape, dtype, rng, kind="torch"):
    """A tensor of standard normal values, as torch (any dtype) or numpy (float16/float32)."""
    values = rng.standard_normal(shape).astype(np.float32)
    if kind == "numpy":
        return values.astype(dtype)
    return torch.from_numpy(values).to(dtype)


def run_isolated(scenario, timeout=120):
    """Runs scenarios.<scenario>() in a fresh interpreter, so that a crash (the bug a test guards
    against) fails that test instead of killing the run; returns its stdout."""
    import os
    import subprocess
    import sys

    import npugraph
    here = os.path.dirname(os.path.abspath(__file__))
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(npugraph.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, here, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", f"import scenarios; scenarios.{scenario}()"], cwd=here,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (f"{scenario} exited with {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    assert "SCENARIO OK" in proc.stdout, proc.stdout[-3000:]
    return proc.stdout


def pytest_report_header(config):
    """Which of the two matrices (docs/install.md "Two torches") this run is."""
    return f"npugraph matrix: torch {torch.__version__}, numpy {np.__version__}"
