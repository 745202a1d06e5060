"""The checked-in type stubs (python/npugraph/_C/*.pyi, with py.typed) are what pybind11-stubgen
makes of the built extension now: a binding changed without `make stubs` fails here."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import npugraph

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "python" / "npugraph" / "_C"


def test_stubs_are_current(tmp_path):
    stubgen = shutil.which("pybind11-stubgen", path=os.path.dirname(sys.executable)) or shutil.which("pybind11-stubgen")
    if stubgen is None:
        pytest.skip("pybind11-stubgen is not installed (tools/requirements-test.txt puts it in .venv)")
    package_root = pathlib.Path(npugraph.__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(package_root))
    proc = subprocess.run([stubgen, "npugraph._C", "-o", str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ERROR" not in proc.stderr, proc.stderr[-2000:]
    made = {p.name: p.read_text() for p in (tmp_path / "npugraph" / "_C").glob("*.pyi")}
    kept = {p.name: p.read_text() for p in CHECKED_IN.glob("*.pyi")}
    assert made.keys() == kept.keys()
    stale = [name for name in made if made[name] != kept[name]]
    assert not stale, f"stale stubs {stale}: run `make stubs` and commit python/npugraph/_C/"


def test_the_package_is_typed():
    assert (ROOT / "python" / "npugraph" / "py.typed").exists()
