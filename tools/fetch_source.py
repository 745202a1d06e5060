#!/usr/bin/env python3
"""Fetches the source distributions npugraph builds from, from PyPI:

  xgrammar  xgrammar 0.2.9 (Apache-2.0): the grammar engine behind npugraph-serve's structured
            output (response_format json_object / json_schema; Note [Structured output] in
            apps/serve/grammar.hpp). Its C++ core is compiled into the server from this sdist
            (cmake/Xgrammar.cmake); none of it is kept in this repository.

This script downloads the pinned sdist (file name, size and SHA-256 checked), unpacks it into the
source folder and prints the unpacked folder's path. It does nothing (but print the path) when the
folder is already there, complete (a stamp file written after unpacking).

Source folder: $NPUGRAPH_SOURCE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/npugraph/src.
CMake finds the folder the same way (or through -DNPUGRAPH_XGRAMMAR_DIR).

Standard library only; run with the system interpreter: /usr/bin/python3 tools/fetch_source.py [NAME]
  --check   only say whether the unpacked folder is there (exit 1 when not), download nothing
"""
import argparse
import dataclasses
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile
import urllib.request

import fetch_model  # beside this script: the cache folder and the hash


@dataclasses.dataclass(frozen=True)
class Source:
    folder: str  # the sdist's top folder
    url: str     # PyPI's file URL (files.pythonhosted.org), stable for a release
    size: int
    sha256: str


SOURCES = {
    "xgrammar": Source(
        "xgrammar-0.2.9",
        "https://files.pythonhosted.org/packages/3a/2f/5bf8e8fa6619cff534932f79b0abc81a417d354bc5093252c1a6081d0a93/"
        "xgrammar-0.2.9.tar.gz", 2763853,
        "87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90"),
}


def source_dir() -> pathlib.Path:
    explicit = os.environ.get("NPUGRAPH_SOURCE_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    return fetch_model.cache_root() / "src"


def stamp(name: str) -> pathlib.Path:
    return source_dir() / f".{SOURCES[name].folder}.complete"


def fetch(name: str) -> pathlib.Path:
    s = SOURCES[name]
    target = source_dir() / s.folder
    if stamp(name).is_file() and target.is_dir():
        return target
    source_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=source_dir(), prefix=".fetch-") as tmp:
        archive = pathlib.Path(tmp) / "sdist.tar.gz"
        print(f"fetch_source: downloading {s.url.rsplit('/', 1)[1]} ({s.size} bytes)", file=sys.stderr)
        with urllib.request.urlopen(s.url, timeout=180) as response, open(archive, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
        if archive.stat().st_size != s.size:
            sys.exit(f"fetch_source: {name}: {archive.stat().st_size} bytes, expected {s.size}")
        digest = fetch_model.sha256(archive)
        if digest != s.sha256:
            sys.exit(f"fetch_source: {name}: SHA-256 {digest}, expected {s.sha256}")
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            bad = [m.name for m in members if not (m.name == s.folder or m.name.startswith(s.folder + "/"))
                   or ".." in pathlib.PurePosixPath(m.name).parts or not (m.isfile() or m.isdir())]
            if bad:
                sys.exit(f"fetch_source: {name}: unexpected members {bad[:5]}")
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, members=members, **safe)
        if target.exists():
            shutil.rmtree(target)
        os.replace(pathlib.Path(tmp) / s.folder, target)
    stamp(name).write_text(f"{s.sha256}\n")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", default="all", choices=sorted(SOURCES) + ["all"])
    parser.add_argument("--check", action="store_true", help="verify only, download nothing")
    args = parser.parse_args()
    names = sorted(SOURCES) if args.name == "all" else [args.name]
    status = 0
    for name in names:
        if args.check:
            if not stamp(name).is_file():
                print(f"fetch_source: {name} is not unpacked in {source_dir()}", file=sys.stderr)
                status = 1
                continue
            print(source_dir() / SOURCES[name].folder)
        else:
            print(fetch(name))
    return status


if __name__ == "__main__":
    sys.exit(main())
