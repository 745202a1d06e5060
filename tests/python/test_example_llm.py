"""examples/llm/decode.py on the real model (SmolLM2-135M-Instruct Q4_1) for a few tokens: SmolLM2's
decode step written in Python with npugraph's ops, captured once with auto_dispatch_capture and
updated every step, must exit 0 with graph and eager logits bitwise equal and the C++ engine's
tokens. Skipped without the model (tools/fetch_model.py) or the `gguf` package (the project venv).
"""
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("gguf")
npugraph = pytest.importorskip("npugraph")

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llm" / "decode.py"
sys.path.insert(0, str(EXAMPLE.parent))
from decode import default_model  # noqa: E402 - the example's model lookup (tools/fetch_model.py's)


def test_python_decode_step_graph_equals_eager_bitwise_on_smollm2():
    model = default_model()
    if not model.is_file():
        pytest.skip(f"model not fetched ({model}): run /usr/bin/python3 tools/fetch_model.py")
    package_root = pathlib.Path(npugraph.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--model", str(model), "--tokens", "4"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "graph vs eager logits: bitwise-equal" in proc.stdout, proc.stdout
    assert "tokens vs the C++ engine (npugraph.llm.Engine): identical" in proc.stdout, proc.stdout
