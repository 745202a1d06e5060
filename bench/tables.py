"""The README's Performance tables, declared. `tools/perf_table.py` renders them from the JSON files
that `make bench` writes into build/bench-results/ (one per benchmark binary or script, named after
it: bench_attention.json, torch_attention.json, ...). No figure is typed here: cells name results.

A section is a table: columns (key, title) and rows (a label and one cell per column key). Cells:
  M(file, name, metric="real_time", fmt="time")
      the median of benchmark `name` in results file `file` (no ".json"): the `_median` aggregate
      of a repeated Google Benchmark run (or the median of its plain runs). `name` is the name the
      benchmark was registered under; run modifiers (/real_time, /min_time:..., /iterations:N,
      /threads:N) are ignored. metric: "real_time" / "cpu_time" (read as ns) or a counter's name.
  R(num, den, fmt="x")
      num / den, each a column key of the same row or a cell. fmt "x" prints 12.3x; put the slower
      one over the faster one so that bigger is better (e.g. R("peer", "ours") = our speed-up).
  T("text")
      fixed text (targets, notes).
A column may give a default cell (e.g. the ratio columns), used by rows that do not set that key.
fmt: "time" (ns/us/ms/s, picked by size), "ns", "us", "GBps", "GFLOPs", "pct" (0.85 -> 85 %),
"x", "bytes", "num". A cell whose results are missing renders as "—".
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class M:
    file: str
    name: str
    metric: str = "real_time"
    fmt: str = "time"


@dataclass(frozen=True)
class R:
    num: object  # column key or cell
    den: object
    fmt: str = "x"


@dataclass(frozen=True)
class T:
    text: str


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    default: object = None  # a cell used by rows that leave this key out


@dataclass
class Row:
    label: str
    cells: dict = field(default_factory=dict)


def row(label, **cells):
    return Row(label, cells)


@dataclass
class Section:
    title: str
    columns: list
    rows: list
    notes: list = field(default_factory=list)  # lines printed under the table


# --- Roofline and attention kernels (issue 6) -------------------------------------------------

ATT = "bench_attention"
TORCH = "torch_attention"


def _att_row(label, case, target, limit=None, rate="GBps"):
    """One bench_attention case: ours (fast kernel), the simple kernel, PyTorch twice."""
    frac = "bw_frac" if rate == "GBps" else "peak_frac"
    return row(label,
               ours=M(ATT, f"fia/{case}/fast"),
               rate=M(ATT, f"fia/{case}/fast", rate, rate),
               limit=limit or M(ATT, f"fia/{case}/fast", frac, "pct"),
               target=T(target),
               simple=M(ATT, f"fia/{case}/simple"),
               torch=M(TORCH, f"fia/{case}/torch"),
               torch_f32=M(TORCH, f"fia/{case}/torch_f32"))


ROOFLINE = Section(
    title="Roofline of the run (bench_attention measures it first)",
    columns=[Column("value", "measured")],
    rows=[
        row("DRAM read bandwidth (1 GiB streamed, all cores, best of 5 passes)",
            value=M(ATT, "roofline/dram_read", "GBps", "GBps")),
        row("fp32 FMA peak (12 SIMD FMA chains per core, all cores)",
            value=M(ATT, "roofline/fma_f32", "GFLOPs", "GFLOPs")),
    ],
)

ATTENTION = Section(
    title="Attention kernels (bench_attention; peer: bench/attention/torch_peer.py)",
    columns=[
        Column("ours", "npugraph"),
        Column("rate", "throughput"),
        Column("limit", "of limit"),
        Column("target", "target"),
        Column("simple", "simple kernel"),
        Column("vs_simple", "speed-up", R("simple", "ours")),
        Column("torch", "PyTorch"),
        Column("vs_torch", "speed-up", R("torch", "ours")),
        Column("torch_f32", "PyTorch, fp32 KV"),
        Column("vs_torch_f32", "speed-up", R("torch_f32", "ours")),
    ],
    rows=[
        _att_row("decode fp16, B 1, N 32, D 128, KV 4096", "decode_f16", "≥ 85 %"),
        _att_row("decode bf16, same", "decode_bf16", "≥ 85 %"),
        _att_row("decode fp16, paged (block 128, shuffled)", "decode_f16_paged128", "≥ 85 %"),
        _att_row("decode fp16, GQA 32 on 8 KV heads: time / 32 KV heads", "decode_f16_gqa4",
                 "≤ 30 %", limit=R(M(ATT, "fia/decode_f16_gqa4/fast"),
                                   M(ATT, "fia/decode_f16/fast"), "pct")),
        _att_row("decode fp16, B 16, ragged KV 512..4096, paged", "decode_f16_b16_ragged",
                 "≥ 80 %"),
        _att_row("prefill bf16, N 32, D 128, 2048 tokens, causal", "prefill_bf16_causal", "≥ 50 %",
                 rate="GFLOPs"),
    ],
    notes=[
        "Medians. Decode throughput is the KV bytes read (lengths × KV heads × D × 2 bytes × K"
        " and V) per second, as a fraction of the DRAM read bandwidth above; prefill counts unmasked FLOPs"
        " only (4·D per visible query-key pair per head), as a fraction of the FMA peak. The GQA"
        " row's *of limit* is its time over the 32-KV-head row's (its KV is a quarter of the size)."
        " *simple kernel*: FiaKernelMode::simple, the kernel the fast ones replace. *PyTorch*:"
        " matmul → softmax → matmul in float32 on every core, converting the fp16/bf16 cache inside"
        " the timed call (gathering paged blocks, repeat_interleave for GQA); *fp32 KV*: the cache"
        " already float32. Speed-ups: their time over ours.",
    ],
)

# --- Host path (issue 5) ------------------------------------------------------------------------
# Placeholder for the host-path rows (owner: the runtime engineer). Planned rows, one per target of
# issue 5, each with our figure, the peer's, their ratio and the target, e.g.
#   row("replay, 1,000-task chain, per task",
#       ours=M("bench_runtime", "replay/chain/1000", "ns_per_task", "ns"),
#       peer=M("bench_runtime", "tbb_flow_graph/chain/1000", "ns_per_task", "ns"),
#       peer_name=T("oneTBB flow graph"), target=T("≤ 15 ns, ≥ 2× oneTBB")),
# and likewise: independent tasks (vs oneTBB flow graph and a plain loop), eager enqueue per launch,
# launch + synchronize of a 1-task graph, update per FIA task, one batched update of 80 groups
# (C++, and from Python through bench/bench_python.py's python.json), memory per task of a
# 100,000-task graph (fmt "bytes"). Rows whose results are missing render as "—".
HOST = Section(
    title="Host path (bench_runtime, bench/bench_python.py)",
    columns=[
        Column("ours", "npugraph"),
        Column("peer_name", "peer"),
        Column("peer", "peer's figure"),
        Column("ratio", "peer / npugraph", R("peer", "ours")),
        Column("target", "target"),
    ],
    rows=[],
)

SECTIONS = [ROOFLINE, ATTENTION, HOST]
