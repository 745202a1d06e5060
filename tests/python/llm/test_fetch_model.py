"""tools/fetch_model.py without the network: where it looks, and what it accepts as the model."""
import importlib.util
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tools" / "fetch_model.py"


def load():
    spec = importlib.util.spec_from_file_location("fetch_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_model_dir_follows_the_environment(monkeypatch, tmp_path):
    fm = load()
    monkeypatch.delenv("NPUGRAPH_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fm.model_path() == tmp_path / "xdg" / "npugraph" / "models" / fm.FILE_NAME
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert fm.model_path() == tmp_path / "home" / ".cache" / "npugraph" / "models" / fm.FILE_NAME
    monkeypatch.setenv("NPUGRAPH_MODEL_DIR", str(tmp_path / "models"))
    assert fm.model_path() == tmp_path / "models" / fm.FILE_NAME


def test_a_wrong_file_is_not_taken_for_the_model(tmp_path):
    fm = load()
    wrong = tmp_path / fm.FILE_NAME
    wrong.write_bytes(b"GGUF" + bytes(100))
    assert not fm.verified(wrong)
    assert not fm.verified(tmp_path / "absent.gguf")


def test_check_mode_reports_a_missing_model_without_downloading(tmp_path):
    env = dict(os.environ, NPUGRAPH_MODEL_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert "missing" in proc.stderr
    assert list(tmp_path.iterdir()) == []
