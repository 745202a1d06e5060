"""npugraph's GGUF reader and tokenizer against independent implementations, on the real model.

make_reference.py writes what llama.cpp's `gguf` package, Hugging Face `tokenizers` and `jinja2` say
about the file; the C++ tests GgufReference.* and TokenizerReference.* (tests/llm/
test_model_reference.cpp) compare npugraph's answers with it. This test runs both steps:

    .venv/bin/python -m pytest tests/python/llm

Skipped without the packages (tools/requirements-test.txt), without the model (tools/fetch_model.py)
or without a built test binary ($NPUGRAPH_TESTS_BINARY, else the newest build*/npugraph_tests).
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))
import make_reference  # noqa: E402


def model_or_skip() -> pathlib.Path:
    path = make_reference.default_model()
    if not path.is_file():
        pytest.skip(f"model not fetched ({path}): run /usr/bin/python3 tools/fetch_model.py")
    return path


def find_tests_binary() -> pathlib.Path:
    explicit = os.environ.get("NPUGRAPH_TESTS_BINARY")
    if explicit:
        return pathlib.Path(explicit)
    found = [p for p in REPO.glob("build*/npugraph_tests") if os.access(p, os.X_OK)]
    if not found:
        pytest.skip("no build*/npugraph_tests: build the C++ tests (or set NPUGRAPH_TESTS_BINARY)")
    return max(found, key=lambda p: p.stat().st_mtime)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    model = model_or_skip()
    out = tmp_path_factory.mktemp("llm-reference")
    assert make_reference.main([str(out), "--model", str(model)]) == 0
    return out


def test_reference_describes_the_whole_model(reference):
    tensors = (reference / "tensors.tsv").read_text().splitlines()
    assert len(tensors) == 272
    counts = {}
    for line in tensors:
        kind = line.split("\t")[1]
        counts[kind] = counts.get(kind, 0) + 1
    assert counts == {"F32": 61, "Q4_1": 210, "Q8_0": 1}
    assert len((reference / "metadata.tsv").read_text().splitlines()) == 33
    n_encode = int.from_bytes((reference / "encode.bin").read_bytes()[:4], "little")
    assert n_encode >= 2000  # >= 1,000 strings, each with and without special-token parsing


def test_cpp_reader_and_tokenizer_match_the_reference(reference):
    binary = find_tests_binary()
    env = dict(os.environ, NPUGRAPH_LLM_REFERENCE=str(reference))
    proc = subprocess.run([str(binary), "--gtest_filter=GgufReference.*:TokenizerReference.*"],
                          env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert re.search(r"\[  PASSED  \] 6 tests", out), out[-3000:]
    assert "SKIPPED" not in out, out[-3000:]
    for line in out.splitlines():
        if line.startswith("[ reference]"):
            print(line)
