#!/usr/bin/env python3
"""Checks that includes, and links, run one way between the layers (docs/architecture.md):

    core <- runtime <- graph <- {ops, backends, dist} <- llm <- python

A file may include headers of its own layer or of a lower one. Public headers (include/npugraph/)
belong to the layer that implements them. Prints every upward include and the folder-level edges,
and exits 1 when there is an upward edge or a folder-level loop.

With --link BUILD (a configured and built build folder), it also checks that links run one way:
a function declared at namespace scope in a header of layer L must be defined in L or below, never
only in an object of a higher layer (a link-time back edge: the lower layer names what only the
upper one supplies). It reads the built objects' symbols with `nm`, and the headers' declarations
by the project's layout (a namespace-scope declaration starts in column 0; namespaces open with
`namespace x {` and close with `}  // namespace x`). Functions not built in BUILD (a backend or
library left out of it) are not checked. The seams the architecture allows are listed in SEAMS.

    python3 tools/check_layers.py [--edges] [--link BUILD]
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RANK = {"core": 0, "runtime": 1, "graph": 2, "ops": 3, "backends": 3, "dist": 3, "llm": 4, "python": 5}

# Public headers -> the layer implementing them.
PUBLIC = {
    "device.hpp": "core", "dtype.hpp": "core", "shape.hpp": "core", "tensor.hpp": "core",
    "error.hpp": "core",
    "stream.hpp": "runtime", "event.hpp": "runtime", "external_event.hpp": "runtime",
    "memory.hpp": "runtime", "kernel.hpp": "runtime", "tasks.hpp": "runtime",
    "graph.hpp": "graph", "task_group.hpp": "graph", "recorded_updates.hpp": "graph", "trace.hpp": "runtime",
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


# Link-time edges the architecture allows (docs/architecture.md, "Layers"): qualified name -> why.
SEAMS = {
    # The registry: the runtime and the graph layer ask it which backend serves a device.
    "npugraph::detail::backend_for": "the backend registry (backends/registry.cpp)",
    "npugraph::detail::graph_backend_for": "the backend registry (backends/registry.cpp)",
    "npugraph::detail::compiled_backends": "the backend registry (backends/registry.cpp)",
    "npugraph::detail::cuda_device_count": "the backend registry (backends/registry.cpp)",
    "npugraph::detail::require": "the backend registry (backends/registry.cpp)",
}

NAMESPACE_OPEN = re.compile(r"^\s*(?:inline\s+)?namespace\s*([\w:]*)\s*\{\s*(?://.*)?$")
NAMESPACE_CLOSE = re.compile(r"^\s*\}\s*//\s*namespace\b")
NOT_A_FUNCTION = re.compile(r"^(?:class|struct|union|enum|using|typedef|template|namespace|friend|return|"
                            r"static_assert|extern\s+\"C\"|#|//|/\*|\*|\}|\{|[A-Z_]+\()")
FIRST_CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: m.group(0) if "namespace" in m.group(0) else "", text)


def declared_functions(path: pathlib.Path):
    """(qualified name, line) of each function declared (not defined) at namespace scope."""
    text = strip_comments(path.read_text(errors="replace"))
    lines = text.split("\n")
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    stack, found = [], []
    for no, line in enumerate(lines):
        if m := NAMESPACE_OPEN.match(line):
            stack.append(m.group(1))  # "" for an anonymous namespace
            continue
        if NAMESPACE_CLOSE.match(line):
            if stack:
                stack.pop()
            continue
        if not stack or "" in stack or not line or line[0].isspace() or NOT_A_FUNCTION.match(line):
            continue
        m = FIRST_CALL.search(line)
        if not m or m.group(1) in ("operator", "decltype", "alignas", "sizeof", "noexcept"):
            continue
        # Past the parameter list: a body ("{") makes it a definition, ";" a declaration.
        i, depth = offsets[no] + m.end() - 1, 0
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        rest = re.match(r"[^;{]*", text[i:]).group(0)
        if i < len(text) and text[i + len(rest): i + len(rest) + 1] == ";" and "=" not in rest.replace("= delete", "").replace("= default", ""):
            found.append(("::".join(stack + [m.group(1)]), no + 1))
    return found


def layer_headers():
    for d in ("include", "src"):
        for h in sorted((ROOT / d).rglob("*.hpp")):
            layer = layer_of_file(h)
            if layer is not None:
                yield h, layer


NM_LINE = re.compile(r"^(.*?) ([A-Za-z]) [0-9a-f]+(?: [0-9a-f]+)?$")
SYMBOL = re.compile(r"^([a-z_][\w]*(?:::[a-z_][\w]*)*::[A-Za-z_]\w*)(?:\[abi:\w+\])?\(")


def defined_functions(build: pathlib.Path):
    """qualified name -> {layer: object} for the global functions each layered object defines."""
    nm = shutil.which("nm")
    if nm is None:
        raise SystemExit("check_layers --link: `nm` (binutils) is not installed")
    defs = {}
    for obj in sorted(build.glob("CMakeFiles/*.dir/**/*.o")):
        rel = obj.relative_to(build).parts[2:]  # <target>.dir/src/runtime/stream.cpp.o -> src/...
        if not rel:
            continue
        source = ROOT.joinpath(*rel).with_suffix("")
        if source.parts[len(ROOT.parts)] not in ("src", "python"):
            continue
        layer = layer_of_file(source)
        if layer is None:
            continue
        out = subprocess.run([nm, "-C", "--defined-only", "-P", str(obj)], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            # "-P": name type value [size]; a demangled name may hold spaces
            field = NM_LINE.match(line)
            if not field or field.group(2) != "T":
                continue
            if m := SYMBOL.match(field.group(1)):
                defs.setdefault(m.group(1), {}).setdefault(layer, source.relative_to(ROOT))
    return defs


def link_back_edges(build: pathlib.Path):
    """Lines naming each link-time back edge, and the allowed seams found."""
    defs = defined_functions(build)
    if not defs:
        raise SystemExit(f"check_layers --link: no objects of the library under {build} (build it first)")
    edges, seams, seen = [], [], set()
    for header, layer in layer_headers():
        for name, line in declared_functions(header):
            where = defs.get(name)
            if not where or (name, layer) in seen:
                continue
            seen.add((name, layer))
            if min(RANK[l] for l in where) <= RANK[layer]:
                continue
            above = ", ".join(f"{obj} ({l})" for l, obj in sorted(where.items()))
            text = f"{name} declared in {header.relative_to(ROOT)}:{line} ({layer}), defined only in {above}"
            (seams if name in SEAMS else edges).append(text + (f" [{SEAMS[name]}]" if name in SEAMS else ""))
    return edges, seams


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", action="store_true", help="print the folder-level include edges")
    parser.add_argument("--link", metavar="BUILD", type=pathlib.Path,
                        help="also check link-time edges in the objects of this build folder")
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
    back = []
    if args.link:
        back, seams = link_back_edges(args.link.resolve())
        for line in seams:
            print("allowed link edge:", line)
        for line in back:
            print("link-time back edge:", line)
        print(f"link: {len(back)} back edges, {len(seams)} allowed seams")
    return 1 if upward or loops or back else 0


if __name__ == "__main__":
    sys.exit(main())
