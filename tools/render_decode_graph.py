"""Renders the picture of a captured decode step for the README (docs/images/decode_step.svg) and
an excerpt of its Chrome trace (docs/images/decode_step_trace.json).

SmolLM2's decode step as examples/llm/decode.py writes it, cut to its first LAYERS layers so the
picture stays readable, captured with auto_dispatch_capture=True, updated once, dumped with
g.dot() (task names, tensors, the current actual_seq_lengths_kv of every attention group) and
rendered by Graphviz's `dot` when it is installed (Debian: graphviz); then one update + replay is
recorded with npugraph.profile.

    PYTHONPATH=build/python .venv/bin/python tools/render_decode_graph.py [--layers 2] [--model PATH]
"""
import argparse
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "llm"))

import decode  # noqa: E402 - the example's Model and DecodeStep

import npugraph  # noqa: E402
from npugraph import npu  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(decode.default_model()))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs" / "images"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    m = decode.Model(args.model)
    m.blocks = m.blocks[: args.layers]
    m.layers = len(m.blocks)
    step = decode.DecodeStep(m, batch=1, max_context=256)
    step.write_inputs([1], [0])
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        step.issue([1])
    step.write_inputs([1], [7])
    with npugraph.profile(str(out / "decode_step_trace.json")):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [8]}])
        g.replay()
    dot_text = g.dot()
    (out / "decode_step.dot").write_text(dot_text)
    print(f"{out / 'decode_step.dot'}: {g.num_tasks} tasks, {len(g.groups())} task groups")
    if shutil.which("dot"):
        subprocess.run(["dot", "-Tsvg", str(out / "decode_step.dot"), "-o", str(out / "decode_step.svg")],
                       check=True)
        print(out / "decode_step.svg")
    else:
        print("graphviz `dot` not found: install it (apt-get install graphviz) to render the svg")
    print(out / "decode_step_trace.json")


if __name__ == "__main__":
    main()
