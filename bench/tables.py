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
               probe=M(ATT, f"fia/{case}/fast", "bw_frac_probe", "pct") if rate == "GBps" and not limit
               else T(""),
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
        Column("probe", "of probe"),
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
        _att_row("in cache: decode fp16, N 8, KV 2048 (8 MiB)", "decode_f16_hot", "—"),
        _att_row("in cache: decode fp16, GQA 32 on 8, KV 2048 (8 MiB)", "decode_f16_gqa4_hot", "—"),
    ],
    notes=[
        "Medians. Decode throughput is the KV bytes read (lengths × KV heads × D × 2 bytes × K"
        " and V) per second, as a fraction of the DRAM read bandwidth above; prefill counts unmasked FLOPs"
        " only (4·D per visible query-key pair per head), as a fraction of the FMA peak. The GQA"
        " row's *of limit* is its time over the 32-KV-head row's (its KV is a quarter of the size)."
        " *of probe*: the same throughput over a 256 MiB read probe run right around the case (this"
        " VM's bandwidth drifts between about 40 and 75 GB/s with its neighbours' load).",
        " *simple kernel*: FiaKernelMode::simple, the kernel the fast ones replace. *PyTorch*:"
        " matmul → softmax → matmul in float32 on every core, converting the fp16/bf16 cache inside"
        " the timed call (gathering paged blocks, repeat_interleave for GQA); *fp32 KV*: the cache"
        " already float32. Speed-ups: their time over ours.",
        " *in cache*: one 8 MiB KV that stays in the last-level cache, the kernels' own rate; its"
        " *of limit* over 100 % is headroom over DRAM, near the DRAM row's rate the case is"
        " compute-bound (GQA 4: 4 FP32 FMAs per fp16 KV element, 4 FLOP per byte).",
    ],
)

# --- Host path (issue 5) ------------------------------------------------------------------------

CH, IND, RT, UPD, PY = "bench_chain", "bench_independent", "bench_runtime", "bench_update", "python"


def _per_task(file, name):
    return M(file, name, "s_per_task", "s")


HOST = Section(
    title="Host path (bench_chain, bench_independent, bench_runtime, bench_update, bench/bench_python.py)",
    columns=[
        Column("ours", "npugraph"),
        Column("peer_name", "peer"),
        Column("peer", "peer's figure"),
        Column("ratio", "peer / npugraph", R("peer", "ours")),
        Column("floor", "plain loop (floor)"),
        Column("target", "target"),
    ],
    rows=[
        row("replay + wait, 1,000-task chain, per task",
            ours=_per_task(CH, "BM_Chain_Npugraph/1000"), peer_name=T("oneTBB flow graph"),
            peer=_per_task(CH, "BM_Chain_TbbFlowGraph/1000"), floor=_per_task(CH, "BM_Chain_PlainLoop/1000"),
            target=T("≤ 15 ns, ≥ 2× oneTBB")),
        row("replay + wait, 1,000 independent tasks, per task",
            ours=_per_task(IND, "BM_Independent_Npugraph/1000"), peer_name=T("oneTBB flow graph"),
            peer=_per_task(IND, "BM_Independent_TbbFlowGraph/1000"),
            floor=_per_task(IND, "BM_Independent_PlainLoop/1000"), target=T("")),
        row("eager enqueue, per launch", ours=_per_task(RT, "BM_EagerEnqueue"), target=T("≤ 150 ns")),
        row("launch + synchronize, 1-task graph", ours=M(RT, "BM_LaunchSynchronize1Task"),
            target=T("≤ 5 µs")),
        row("capture + instantiate, per task (1,000 tasks)",
            ours=_per_task(RT, "BM_CaptureInstantiate/1000")),
        row("capture + instantiate, per task (100,000 tasks)",
            ours=_per_task(RT, "BM_CaptureInstantiate/100000")),
        row("replay + wait, captured 100,000-task chain, per task",
            ours=_per_task(RT, "BM_ReplayCaptured/100000")),
        row("heap bytes per task, 1,000-task graph",
            ours=M(RT, "BM_MemoryPerTask/1000", "bytes_per_task", "bytes")),
        row("heap bytes per task, 100,000-task graph",
            ours=M(RT, "BM_MemoryPerTask/100000", "bytes_per_task", "bytes"), target=T("linear")),
        row("update of 1 FIA task, stream order (vs re-capture of the 1-task graph)",
            ours=M(UPD, "BM_Update_Fia1_StreamOrder"), peer_name=T("re-capture + instantiate"),
            peer=M(UPD, "BM_Recapture_Fia1"), target=T("≤ 300 ns")),
        row("update of 1 FIA task, launch order",
            ours=M(UPD, "BM_Update_Fia1_LaunchOrder"), peer_name=T("re-capture + instantiate"),
            peer=M(UPD, "BM_Recapture_Fia1"), target=T("≤ 300 ns")),
        row("update of 1 FIA task, stream order (vs re-capture of a decode step's graph)",
            ours=M(UPD, "BM_Update_Fia1_StreamOrder"), peer_name=T("re-capture + instantiate, 80 layers"),
            peer=M(UPD, "BM_Recapture_DecodeStep"), target=T("≥ 1000× cheaper")),
        row("batched update of 80 FIA groups, stream order",
            ours=M(UPD, "BM_Update_Fia80Batched_StreamOrder"), peer_name=T("re-capture + instantiate, 80 layers"),
            peer=M(UPD, "BM_Recapture_DecodeStep"), target=T("≤ 20 µs")),
        row("batched update of 80 FIA groups, launch order",
            ours=M(UPD, "BM_Update_Fia80Batched_LaunchOrder"), target=T("≤ 20 µs")),
        row("update of 1 FIA task, host values only (fused_infer_attention_score_update)",
            ours=M(UPD, "BM_Update_Fia1_HostValues"), target=T("≤ 300 ns")),
        row("batched update of 80 FIA groups, host values only",
            ours=M(UPD, "BM_Update_Fia80Batched_HostValues"), target=T("≤ 20 µs")),
        row("batched update of 80 FIA groups after a cache flush, `.out` form",
            ours=M(UPD, "BM_Update_Fia80Batched_StreamOrder_Cold")),
        row("batched update of 80 FIA groups after a cache flush, host values only",
            ours=M(UPD, "BM_Update_Fia80Batched_HostValues_Cold"),
            peer_name=T("the `.out` form"), peer=M(UPD, "BM_Update_Fia80Batched_StreamOrder_Cold")),
        row("Python: NPUGraph.update of 80 recorded FIA calls (80 dicts)",
            ours=M(PY, "BM_Python_GraphUpdate80"), target=T("≤ 60 µs")),
        row("Python: NPUGraph.update of 80 recorded FIA calls (1 dict for all)",
            ours=M(PY, "BM_Python_GraphUpdate80One")),
        row("Python: update triple (begin + FIA .out + end)", ours=M(PY, "BM_Python_UpdateTriple")),
        row("Python: replay(blocking=False)", ours=M(PY, "BM_Python_ReplayAsync")),
        row("Python: replay() of the seed graph, blocking", ours=M(PY, "BM_Python_ReplayBlocking")),
        row("Python: eager FIA, seed shape", ours=M(PY, "BM_Python_EagerFia")),
    ],
    notes=[
        "Medians. *replay + wait*: one launch and one synchronize per iteration (for oneTBB: try_put +"
        " wait_for_all), divided by the tasks. *plain loop*: the same empty kernel called through a"
        " function pointer n times — the floor. *update*: task_update_begin + the FIA `.out` call (all"
        " its checks and planning) + task_update_end; the decode-step graph has 80 layers of 24 empty"
        " kernels + 1 FIA group. Python figures: bench/bench_python.py (per call, µs).",
    ],
)

# --- Decode engine (bench_llm; peer: bench/llm/llama_cpp_peer.py) ---------------------------------

# --- Linear kernels of the decode engine (issue 13) -------------------------------------------

LIN = "bench_linear"


def _lin_row(label, case, target="≥ 85 %", kind="gemv"):
    """One bench_linear GEMV case (cold weights from DRAM), on the best target and with AVX2 forced
    (kind "gemv_q8": with q8 activations; "gemv_q8p": q8 activations on rows16 weights)."""
    return row(label,
               ours=M(LIN, f"{kind}/{case}"),
               rate=M(LIN, f"{kind}/{case}", "GBps", "GBps"),
               limit=M(LIN, f"{kind}/{case}", "bw_frac", "pct"),
               probe=M(LIN, f"{kind}/{case}", "bw_frac_probe", "pct"),
               best=M(LIN, f"{kind}/{case}", "bw_frac_best", "pct"),
               avx2=M(LIN, f"{kind}/{case}/avx2"),
               avx2_limit=M(LIN, f"{kind}/{case}/avx2", "bw_frac", "pct"),
               avx2_best=M(LIN, f"{kind}/{case}/avx2", "bw_frac_best", "pct"),
               target=T(target))


LINEAR = Section(
    title="Linear kernels of the decode engine (bench_linear; AVX2 forced on the same machine beside the best target)",
    columns=[
        Column("ours", "npugraph"),
        Column("rate", "weights read"),
        Column("limit", "of limit"),
        Column("probe", "of probe"),
        Column("best", "best batch"),
        Column("avx2", "AVX2 forced"),
        Column("avx2_limit", "of limit"),
        Column("avx2_best", "best batch"),
        Column("target", "target"),
    ],
    rows=[
        _lin_row("Q4_1 GEMV 1536×576 (gate / up), 1 token", "Q4_1/1536x576/T:1"),
        _lin_row("Q4_1 GEMV 576×1536 (down), 1 token", "Q4_1/576x1536/T:1"),
        _lin_row("Q8_0 GEMV 49152×576 (output projection), 1 token", "Q8_0/49152x576/T:1"),
        _lin_row("Q4_1 GEMV 576×576 (q / o), 1 token", "Q4_1/576x576/T:1"),
        _lin_row("Q4_1 GEMV 1536×576, 8 tokens", "Q4_1/1536x576/T:8", ""),
        _lin_row("f16 GEMV 1536×576, 1 token", "F16/1536x576/T:1"),
        _lin_row("Q4_1 GEMV 1536×576, 1 token, q8 activations", "Q4_1/1536x576/T:1", kind="gemv_q8"),
        _lin_row("Q4_1 GEMV 576×1536, 1 token, q8 activations", "Q4_1/576x1536/T:1", kind="gemv_q8"),
        _lin_row("Q8_0 GEMV 49152×576, 1 token, q8 activations (the engine's tied output)",
                 "Q8_0/49152x576/T:1", kind="gemv_q8"),
        _lin_row("Q4_1 GEMV 1536×576, 8 tokens, q8 activations", "Q4_1/1536x576/T:8", "", kind="gemv_q8"),
        _lin_row("Q4_1 GEMV 1536×576, 1 token, q8, rows16 weights (the engine's)", "Q4_1/1536x576/T:1",
                 kind="gemv_q8p"),
        _lin_row("Q4_1 GEMV 576×1536, 1 token, q8, rows16 weights", "Q4_1/576x1536/T:1", kind="gemv_q8p"),
        _lin_row("Q4_1 GEMV 576×576, 1 token, q8, rows16 weights", "Q4_1/576x576/T:1", kind="gemv_q8p"),
        _lin_row("Q8_0 GEMV 49152×576, 1 token, q8, rows16 weights", "Q8_0/49152x576/T:1", kind="gemv_q8p"),
        _lin_row("Q4_1 GEMV 1536×576, 8 tokens, q8, rows16 weights", "Q4_1/1536x576/T:8", "", kind="gemv_q8p"),
    ],
    notes=[
        "Medians of one call among 16 on successive weight copies (≥ 1 GiB in all, so weights come"
        " from DRAM) and one synchronize. *of limit*: weight bytes ÷ time over the DRAM read bandwidth"
        " bench_linear measures first (roofline/dram_read); *of probe*: over a 256 MiB read probe run"
        " around the case; *best batch*: the fastest batch of 16 calls (a shared machine only slows"
        " batches down). *AVX2 forced*: the same case with Highway's dispatch limited to AVX2 on this"
        " machine (hwy::SetSupportedTargetsForTest) — the AVX2 code path, on this machine's cores,"
        " not a figure for an AVX2-only CPU. *q8*: x quantised to int8 per block of 32 (Note [Q8"
        " activations]); *rows16 weights*: pack_rows16's layout, one weight row per SIMD lane (Note"
        " [Packed weights]), what the engine's cpu projections use.",
    ],
)

LLM, LCPP = "bench_llm", "llama_cpp"


def _eng(mode, b, metric, fmt="num"):
    return M(LLM, f"engine/{mode}/B:{b}", metric, fmt)


DECODE = Section(
    title="Decode engine: SmolLM2-135M-Instruct Q4_1 (bench_llm; peer: bench/llm/llama_cpp_peer.py)",
    columns=[
        Column("ours", "npugraph"),
        Column("peer_name", "against"),
        Column("peer", "its figure"),
        Column("ratio", "ratio", R("ours", "peer")),
        Column("target", "target"),
    ],
    rows=[
        row("decode tokens/s, batch 1, graph", ours=_eng("graph", 1, "decode_tps"),
            peer_name=T("llama.cpp, tg64 after the prompt"), peer=M(LCPP, "llama_cpp/decode/B:1", "decode_tps", "num"),
            target=T("≥ 2×")),
        row("prefill tokens/s, 131-token prompt", ours=_eng("graph", 1, "prefill_tps"),
            peer_name=T("llama.cpp, pp131"), peer=M(LCPP, "llama_cpp/prefill/B:1", "prefill_tps", "num"),
            target=T("≥ 1×")),
        row("decode tokens/s, batch 1, eager", ours=_eng("eager", 1, "decode_tps"),
            peer_name=T("llama.cpp, tg64 after the prompt"), peer=M(LCPP, "llama_cpp/decode/B:1", "decode_tps", "num")),
        row("decode tokens/s, batch 1, graph, of the roofline", ours=_eng("graph", 1, "decode_tps"),
            peer_name=T("DRAM read ÷ bytes per step"), peer=_eng("graph", 1, "roof_tps"),
            ratio=R("ours", "peer", "pct"), target=T("≥ 80 %")),
        row("bytes read per decode step, batch 1 (weights + KV)", ours=_eng("graph", 1, "bytes_per_step"),
            peer_name=T("DRAM read bandwidth of the run (GB/s)"), peer=M(LLM, "roofline/dram_read", "GBps", "num"),
            ratio=T("")),
        row("decode tokens/s, batch 8, graph", ours=_eng("graph", 8, "decode_tps"),
            peer_name=T("batch 1, graph"), peer=_eng("graph", 1, "decode_tps"), target=T("≥ 5×")),
        row("decode tokens/s, batch 8, graph, of the roofline", ours=_eng("graph", 8, "decode_tps"),
            peer_name=T("8 × DRAM read ÷ bytes per step"), peer=_eng("graph", 8, "roof_tps"),
            ratio=R("ours", "peer", "pct")),
        row("decode tokens/s, batch 1, graph, interleaved with eager (medians of the rounds)",
            ours=M(LLM, "engine/interleaved/B:1", "graph_tps", "num"),
            peer_name=T("eager, same rounds"),
            peer=M(LLM, "engine/interleaved/B:1", "eager_tps", "num"), target=T("≥ 1×")),
        row("decode tokens/s, batch 8, graph, interleaved with eager (medians of the rounds)",
            ours=M(LLM, "engine/interleaved/B:8", "graph_tps", "num"),
            peer_name=T("eager, same rounds"),
            peer=M(LLM, "engine/interleaved/B:8", "eager_tps", "num"), target=T("≥ 1×")),
        row("decode step, batch 1: graph vs eager", ours=_eng("graph", 1, "step_s", "s"),
            peer_name=T("eager step"), peer=_eng("eager", 1, "step_s", "s"), ratio=R("peer", "ours")),
        row("decode step, batch 8: graph vs eager", ours=_eng("graph", 8, "step_s", "s"),
            peer_name=T("eager step"), peer=_eng("eager", 8, "step_s", "s"), ratio=R("peer", "ours")),
        row("host time per graph step, batch 1 (inputs + update + replay)", ours=_eng("graph", 1, "host_s", "s"),
            peer_name=T("the step"), peer=_eng("graph", 1, "step_s", "s"), ratio=R("peer", "ours"),
            target=T("≥ 33× (host ≤ 3 %)")),
        row("host time per graph step, batch 8", ours=_eng("graph", 8, "host_s", "s"),
            peer_name=T("the step"), peer=_eng("graph", 8, "step_s", "s"), ratio=R("peer", "ours"),
            target=T("≥ 33× (host ≤ 3 %)")),
        row("host time per eager step, batch 1 (issuing every op)", ours=_eng("eager", 1, "host_s", "s"),
            peer_name=T("the step"), peer=_eng("eager", 1, "step_s", "s"), ratio=R("peer", "ours")),
        row("update per step, batch 1 (30 FIA groups, one batched update)",
            ours=M(LLM, "recapture/decode_step/B:1", "update_s", "s"),
            peer_name=T("re-capture + instantiate of the step"),
            peer=M(LLM, "recapture/decode_step/B:1", "capture_s", "s"), ratio=R("peer", "ours"),
            target=T("≥ 100×")),
        row("update per step, batch 8", ours=M(LLM, "recapture/decode_step/B:8", "update_s", "s"),
            peer_name=T("re-capture + instantiate of the step"),
            peer=M(LLM, "recapture/decode_step/B:8", "capture_s", "s"), ratio=R("peer", "ours"),
            target=T("≥ 100×")),
        row("greedy tokens equal to llama.cpp's from the start (of 65)",
            ours=M(LCPP, "llama_cpp/greedy_text", "common_prefix", "num"), ratio=T("")),
    ],
    notes=[
        "bench_llm: every figure from the fastest of its iterations (one generate() each: the 131-token"
        " raw prompt, then 64 greedy decode steps; the machine is shared), every core as threads;"
        " llama.cpp (llama-cpp-python, built from source, CPU only) on the same file, prompt and"
        " threads, best of 5. *bytes per step*: every weight tensor of the file (the tied output"
        " projection reads token_embd whole) + the float32 KV the step reads at the mean length;"
        " the model (97 MB) fits this VM's 260 MiB L3, so the DRAM roofline is a floor, not a"
        " ceiling. *re-capture*: a new engine's first decode step captures and instantiates the"
        " bucket's graph (RunStats::capture_seconds); *update*: that engine's batched update per"
        " step. Ratios: bigger is better.",
    ],
)

SECTIONS = [ROOFLINE, ATTENTION, LINEAR, HOST, DECODE]
