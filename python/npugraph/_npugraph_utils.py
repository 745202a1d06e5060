"""The aligned view of a JSON graph dump (torch_npu's ``torch_npu.npu._npugraph_utils``).

``NPUGraph.debug_dump(path)`` with a ``.json`` path writes the graph as a Chrome trace (Note [Graph
dump as JSON] in src/graph/graph_def.cpp): one event per task on its stream's track, each at its
position on that stream, so each stream reads in order but nothing lines up across streams.
``align_trace_json`` writes the view a reader wants beside it (``<path without .json>.aligned.json``):
every task starts when the last of its dependencies has finished (so a task waiting on another
stream sits after what it waits for, and tasks that can run side by side line up), and each
cross-stream dependency becomes a flow arrow. The raw dump is not changed.
"""
import json as _json
import os as _os

__all__ = ["align_trace_json", "aligned_path"]


def aligned_path(debug_path):
    """Where the aligned view of ``debug_path`` goes: ``x.json`` -> ``x.aligned.json``."""
    root, ext = _os.path.splitext(debug_path)
    return root + ".aligned" + (ext or ".json")


def _tasks(events):
    tasks = {}
    for ev in events:
        args = ev.get("args") or {}
        if ev.get("ph") == "X" and "Task Id" in args:
            tasks[args["Task Id"]] = ev
    return tasks


def align_trace_json(debug_path, output_path=None):
    """Writes the aligned view of the JSON dump at ``debug_path`` to ``output_path`` (default:
    ``aligned_path(debug_path)``) and returns that path. Raises ValueError for a file that is not
    an npugraph JSON dump, or whose dependencies form a cycle or name a missing task."""
    with open(debug_path, encoding="utf-8") as f:
        doc = _json.load(f)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise ValueError(f"align_trace_json: {debug_path!r} is not a Chrome-trace JSON graph dump "
                         f"(no traceEvents list)")
    tasks = _tasks(events)
    start, order, state = {}, [], {}

    def visit(tid):  # depth-first topological order, iteratively (graphs of 100k tasks)
        stack = [(tid, False)]
        while stack:
            node, done = stack.pop()
            if done:
                state[node] = 2
                order.append(node)
                continue
            if state.get(node) == 2:
                continue
            if state.get(node) == 1:
                raise ValueError(f"align_trace_json: task {node} depends on itself through a cycle")
            state[node] = 1
            stack.append((node, True))
            for dep in tasks[node]["args"].get("deps", []):
                if dep not in tasks:
                    raise ValueError(f"align_trace_json: task {node} depends on task {dep}, which "
                                     f"the dump does not have")
                if state.get(dep) != 2:
                    stack.append((dep, False))

    for tid in sorted(tasks):
        if state.get(tid) != 2:
            visit(tid)
    aligned, flow = [], 0
    for tid in order:
        ev = dict(tasks[tid])
        deps = ev["args"].get("deps", [])
        t0 = max((start[d] + tasks[d].get("dur", 1) for d in deps), default=0)
        start[tid] = t0
        ev["ts"] = t0
        aligned.append(ev)
        for d in deps:
            src = tasks[d]
            if src.get("tid") == ev.get("tid"):
                continue
            flow += 1
            common = {"name": "dependency", "cat": "dependency", "id": flow, "pid": ev.get("pid")}
            aligned.append(dict(common, ph="s", tid=src.get("tid"), ts=start[d] + src.get("dur", 1) - 1))
            aligned.append(dict(common, ph="f", bp="e", tid=ev.get("tid"), ts=t0))
    meta = [ev for ev in events if ev.get("ph") == "M"]
    out = dict(doc, traceEvents=meta + aligned)
    target = output_path or aligned_path(debug_path)
    with open(target, "w", encoding="utf-8") as f:
        _json.dump(out, f, indent=1)
        f.write("\n")
    return target
