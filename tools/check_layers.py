#!/usr/bin/env python3
"""Checks that includes run one way between the layers (docs/architecture.md):

    core <- runtime <- graph <- {ops, backends, dist} <- llm <- python

A file may include headers of its own layer or of a lower one. Public headers (include/npugraph/)
belong to the layer that implements them. Prints every upward include and the folder-level edges,
and exits 1 when there is an upward edge or a folder-level loop.

    python3 tools/check_layers.py [--edges]
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RANK = {"core": 0, "runtime": 1, "graph": 2, "ops": 3, "backends": 3, "dist": 3, "llm": 4, "python": 5}

# Public headers -> the layer implementing them.
PUBLIC = {
    "device.hpp": "core", "dtype.hpp": "core", "shape.hpp": "core", "tensor.hpp": "core",
    "error.hpp": "core",
    "stream.hpp": "runtime", "event.hpp": "runtime", "external_event.hpp": "runtime",
    "memory.hpp": "runtime", "kernel.hpp": "runtime", "tasks.hpp": "runtime",
    "graph.hpp": "graph", "task_group.hpp": "graph", "trace.hpp": "runtime",
    "dist.hpp": "dist",  # npugraph::dist (MPI): beside the ops, not in the umbrella header
    "npugraph.hpp": "ops",  # the umbrella re-exports everything up to the ops
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_header(path: str):
    """The layer of an included path ("runtime/task.hpp", "npugraph/stream.hpp")."""
    parts = path.split("/")
    if parts[0] == "npugraph":
        if len(parts) > 2:
            return parts[1] if parts[1] in RANK else None  # npugraph/ops/fia.hpp, npugraph/llm/...
        return PUBLIC.get(parts[1])
    return parts[0] if parts[0] in RANK else None


def layer_of_file(path: pathlib.Path):
    rel = path.relative_to(ROOT).parts
    if rel[0] == "src":
        return rel[1] if rel[1] in RANK else None
    if rel[0] == "include":
        return layer_of_header("/".join(rel[1:]))
    if rel[0] == "python":
        return "python"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", action="store_true", help="print the folder-level include edges")
    args = parser.parse_args()
    files = [p for d in ("src", "include", "python/src") for p in (ROOT / d).rglob("*")
             if p.suffix in (".hpp", ".h", ".cpp", ".cu", ".cuh")]
    upward, edges = [], {}
    for f in sorted(files):
        src_layer = layer_of_file(f)
        if src_layer is None:
            continue
        for inc in INCLUDE.findall(f.read_text(errors="replace")):
            dst_layer = layer_of_header(inc)
            if dst_layer is None or dst_layer == src_layer:
                continue
            edges.setdefault((src_layer, dst_layer), 0)
            edges[(src_layer, dst_layer)] += 1
            if RANK[dst_layer] >= RANK[src_layer]:
                upward.append(f"{f.relative_to(ROOT)} ({src_layer}) includes {inc} ({dst_layer})")
    loops = [(a, b) for (a, b) in edges if (b, a) in edges]
    if args.edges:
        for (a, b), n in sorted(edges.items(), key=lambda e: (RANK[e[0][0]], e[0])):
            print(f"{a:>8} -> {b:<8} {n} includes")
    for line in upward:
        print("upward include:", line)
    for a, b in loops:
        print(f"folder-level loop: {a} <-> {b}")
    print(f"{len(files)} files, {sum(edges.values())} cross-layer includes, {len(upward)} upward, "
          f"{len(loops)} loops")
    return 1 if upward or loops else 0


if __name__ == "__main__":
    sys.exit(main())
