#!/usr/bin/env python3
"""Renders the README's Performance section from benchmark results.

Loads every JSON file in the results folder (Google Benchmark's --benchmark_out format, or the same
shape written by a Python bench), renders the sections declared in bench/tables.py as Markdown
tables, prints them, and rewrites README.md between `<!-- perf:begin -->` and `<!-- perf:end -->`.
Missing results render as "—"; nothing is typed by hand.

    /usr/bin/python3 tools/perf_table.py [--results build/bench-results] [--readme README.md]
                                         [--tables bench/tables.py] [--no-write]
"""
import argparse
import glob
import importlib.util
import json
import os
import re
import statistics
import sys

BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
MISSING = "—"
# Run modifiers Google Benchmark appends to a registered name.
MODIFIERS = re.compile(r"/(real_time|manual_time|process_time|iterations:\d+|repeats:\d+|"
                       r"threads:\d+|min_time:[\d.]+|min_warmup_time:[\d.]+)")
TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load_tables(path):
    spec = importlib.util.spec_from_file_location("bench_tables", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tables"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


class Results:
    """The benchmarks of every results file, by file stem and registered name."""

    def __init__(self, folder):
        self.files, self.contexts = {}, {}
        for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
            stem = os.path.splitext(os.path.basename(path))[0]
            try:
                with open(path) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                print(f"perf_table: skipping {path}: {e}", file=sys.stderr)
                continue
            by_name = {}
            for b in data.get("benchmarks", []):
                if b.get("error_occurred"):
                    continue
                name = MODIFIERS.sub("", b.get("run_name", b.get("name", "")))
                by_name.setdefault(name, []).append(b)
            self.files[stem] = by_name
            self.contexts[stem] = data.get("context", {})

    def value(self, file, name, metric):
        """The median of `metric` for a benchmark, or None."""
        runs = self.files.get(file, {}).get(name, [])
        medians = [b for b in runs if b.get("aggregate_name") == "median"]
        plain = [b for b in runs if b.get("run_type", "iteration") == "iteration"]
        values = [self._metric(b, metric) for b in (medians or plain)]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    @staticmethod
    def _metric(b, metric):
        if metric in ("real_time", "cpu_time"):
            t = b.get(metric)
            return None if t is None else t * TO_NS[b.get("time_unit", "ns")]
        v = b.get(metric)
        return v if isinstance(v, (int, float)) else None


def fmt_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


FORMATS = {
    "time": fmt_time,
    "ns": lambda v: f"{v:.3g} ns",
    "s": lambda v: fmt_time(v * 1e9),  # a counter in seconds (e.g. s_per_task)
    "us": lambda v: f"{v / 1e3:.3g} µs",
    "GBps": lambda v: f"{v:.1f} GB/s",
    "GFLOPs": lambda v: f"{v:.0f} GFLOP/s",
    "pct": lambda v: f"{100 * v:.0f} %",
    "x": lambda v: f"{v:.3g}×",
    "bytes": lambda v: f"{v:.0f} B",
    "num": lambda v: f"{v:.4g}",
}


class Renderer:
    def __init__(self, tables, results):
        self.t, self.results = tables, results

    def number(self, cell, cells):
        """A cell's value: a float, a str (text) or None (missing)."""
        if isinstance(cell, str):  # a column key of the row
            cell = cells.get(cell)
        if isinstance(cell, self.t.M):
            return self.results.value(cell.file, cell.name, cell.metric)
        if isinstance(cell, self.t.R):
            num, den = self.number(cell.num, cells), self.number(cell.den, cells)
            ok = isinstance(num, float | int) and isinstance(den, float | int) and den != 0
            return num / den if ok else None
        if isinstance(cell, self.t.T):
            return cell.text
        return None

    def cell_text(self, cell, cells):
        value = self.number(cell, cells)
        if value is None:
            return MISSING
        if isinstance(value, str):
            return value
        return FORMATS[cell.fmt](value)

    def section(self, s):
        lines = [f"### {s.title}", ""]
        lines.append("| | " + " | ".join(c.title for c in s.columns) + " |")
        lines.append("| --- |" + " ---: |" * len(s.columns))
        for r in s.rows:
            cells = {c.key: r.cells.get(c.key, c.default) for c in s.columns}
            texts = [self.cell_text(cells[c.key], cells) if cells[c.key] is not None else ""
                     for c in s.columns]
            lines.append(f"| {r.label} | " + " | ".join(texts) + " |")
        if not s.rows:
            lines.append("| (no rows yet) |" + " |" * len(s.columns))
        lines += [""] + [n + "\n" for n in s.notes]
        return "\n".join(lines).rstrip() + "\n"

    def document(self):
        parts = [self.machine_line(), ""] + [self.section(s) for s in self.t.SECTIONS]
        return "\n".join(parts)

    def machine_line(self):
        ctx = next((c for c in self.results.contexts.values() if "num_cpus" in c), None)
        files = ", ".join(f"{f}.json" for f in sorted(self.results.files)) or "none"
        if ctx is None:
            return f"Generated by `tools/perf_table.py` from build/bench-results ({files})."
        load = ctx.get("load_avg")
        load = f", load average {load[0]:.1f} at the start" if load else ""
        # bench/support/machine.cpp: the CPU model and the Highway target the kernels ran on.
        model = ctx.get("npugraph_cpu_model")
        model = f" \"{model}\" ({ctx.get('npugraph_simd_target', '?')} kernels)," if model else ""
        return (f"Generated by `make bench` (`tools/perf_table.py`) on {ctx.get('date', '?')[:10]}:"
                f"{model} {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz{load},"
                f" from {files}.")


def rewrite_readme(path, body):
    with open(path) as f:
        text = f.read()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        print(f"perf_table: {path} has no {BEGIN} ... {END} markers; not written", file=sys.stderr)
        return False
    new = text[:start + len(BEGIN)] + "\n" + body + text[end:]
    if new != text:
        with open(path, "w") as f:
            f.write(new)
    return True


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description="Render the README's Performance section.")
    ap.add_argument("--results", default=os.path.join(root, "build", "bench-results"))
    ap.add_argument("--readme", default=os.path.join(root, "README.md"))
    ap.add_argument("--tables", default=os.path.join(root, "bench", "tables.py"))
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    body = Renderer(load_tables(args.tables), Results(args.results)).document()
    print(body)
    if not args.no_write:
        rewrite_readme(args.readme, body)


if __name__ == "__main__":
    main()
