"""PyTorch peer of bench_attention: the same cases with PyTorch's CPU attention, written as a user
writes it (matmul -> softmax -> matmul in float32), on every core.

Two variants per case:
  torch      the cache is fp16/bf16 as in bench_attention; the conversion to float32 (and, for paged
             caches, the gather of the blocks; for GQA, the repeat_interleave of the KV heads)
             happens inside the timed call: what one decode step of a CPU inference loop pays.
  torch_f32  the cache is already float32 (converted outside the timing; twice the bytes in memory):
             the best case for PyTorch, the matmuls and softmax alone.
(torch >= 2.0 adds torch_sdpa: F.scaled_dot_product_attention on the fp32 cache.)
Inputs rotate over copies totalling >= 128 MiB (as in bench_attention), so the KV comes from DRAM.
GBps counts the fp16/bf16 KV bytes of the cache, GFLOPs only unmasked work (the same bytes and
FLOPs as bench_attention), so the figures compare directly.

Writes Google-Benchmark-style JSON (median aggregates, real_time in ns):
    /usr/bin/python3 bench/attention/torch_peer.py --out build/bench-results/torch_attention.json
"""
import argparse
import json
import math
import os

# One BLAS thread: torch's own threads split the batched matmuls over the heads (with OpenBLAS, its
# threads on top of torch's oversubscribe the cores and are slower here). An explicit value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import random
import re
import statistics
import time

import torch
import torch.nn.functional as F

COLD_BYTES = 128 << 20
MAX_COPIES = 8


def ragged_lengths(batch, lo, hi):
    """As fia_cases.cpp: lo..hi evenly spread, the k-th shortest at (7 k) mod batch."""
    lengths = [0] * batch
    for k in range(batch):
        lengths[7 * k % batch] = lo + (hi - lo) * k // (batch - 1)
    return lengths


# The cases of bench/attention/fia_cases.cpp (BNSD; paged caches are [blocks, KV_N, bs, D]).
CASES = [
    dict(name="decode_f16", dtype=torch.float16, kv_lengths=[4096]),
    dict(name="decode_bf16", dtype=torch.bfloat16, kv_lengths=[4096]),
    dict(name="decode_f16_paged128", dtype=torch.float16, kv_lengths=[4096], block_size=128),
    dict(name="decode_f16_gqa4", dtype=torch.float16, kv_heads=8, kv_lengths=[4096]),
    dict(name="decode_f16_b16_ragged", dtype=torch.float16, batch=16,
         kv_lengths=ragged_lengths(16, 512, 4096), block_size=128),
    dict(name="prefill_bf16_causal", dtype=torch.bfloat16, q_len=2048, kv_lengths=[2048],
         causal=True),
]


def attend(q, k, v, scale, mask=None):
    """q [..., Sq, D], k/v [..., Skv, D] float32; mask True = masked out."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def random_tensor(shape, dtype, gen):
    return (torch.rand(shape, generator=gen) * 2 - 1).to(dtype)


class Case:
    def __init__(self, name, dtype, kv_lengths, batch=1, heads=32, kv_heads=32, dim=128, q_len=1,
                 block_size=0, causal=False):
        self.name, self.dtype, self.lengths = name, dtype, kv_lengths
        self.batch, self.heads, self.kv_heads, self.dim = batch, heads, kv_heads, dim
        self.q_len, self.block_size, self.causal = q_len, block_size, causal
        self.scale = 1.0 / math.sqrt(dim)
        elem = torch.tensor([], dtype=dtype).element_size()
        self.kv_bytes = sum(kv_lengths) * kv_heads * dim * 2 * elem
        pairs = sum(q_len * (l - q_len) + q_len * (q_len + 1) // 2 if causal else q_len * l
                    for l in kv_lengths)
        self.flops = 4 * dim * heads * pairs
        gen = torch.Generator().manual_seed(7)
        self.q = random_tensor((batch, heads, q_len, dim), dtype, gen)
        copies = 1 if q_len > 1 else min(MAX_COPIES, max(1, -(-COLD_BYTES // self.kv_bytes)))
        self.copies = [self._kv(gen, i) for i in range(copies)]
        if causal:
            self.mask = torch.ones(q_len, kv_lengths[0], dtype=torch.bool).triu(
                kv_lengths[0] - q_len + 1)

    def _kv(self, gen, seed):
        if not self.block_size:
            shape = (self.batch, self.kv_heads, max(self.lengths), self.dim)
            k, v = random_tensor(shape, self.dtype, gen), random_tensor(shape, self.dtype, gen)
            return k, v, None
        need = [-(-l // self.block_size) for l in self.lengths]
        ids = list(range(sum(need)))
        random.Random(100 + seed).shuffle(ids)
        tables, at = [], 0
        for n in need:
            tables.append(torch.tensor(ids[at:at + n], dtype=torch.long))
            at += n
        shape = (sum(need), self.kv_heads, self.block_size, self.dim)
        return random_tensor(shape, self.dtype, gen), random_tensor(shape, self.dtype, gen), tables

    def _gather(self, cache, table, length):
        """[blocks, KV_N, bs, D] -> [KV_N, length, D] in float32 for one sequence."""
        blocks = cache[table].float()
        return blocks.permute(1, 0, 2, 3).reshape(self.kv_heads, -1, self.dim)[:, :length]

    def _expand(self, x):
        group = self.heads // self.kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=-3)

    def to_f32(self):
        """The torch_f32 variant: the same caches, stored as float32."""
        self.copies = [(k.float(), v.float(), t) for k, v, t in self.copies]

    def call(self, i, sdpa=False):
        k, v, tables = self.copies[i % len(self.copies)]
        attn = (lambda q_, k_, v_, m=None: F.scaled_dot_product_attention(
            q_, k_, v_, attn_mask=None if m is None else ~m)) if sdpa else (
            lambda q_, k_, v_, m=None: attend(q_, k_, v_, self.scale, m))
        q = self.q.float()
        if tables is None:
            out = attn(q, self._expand(k.float()), self._expand(v.float()),
                       self.mask if self.causal else None)
            return out.to(self.dtype)
        outs = []
        for b, (table, length) in enumerate(zip(tables, self.lengths)):
            kb = self._expand(self._gather(k, table, length))
            vb = self._expand(self._gather(v, table, length))
            outs.append(attn(q[b], kb, vb))
        return torch.stack(outs).to(self.dtype)


def loaded_blas():
    """The BLAS library this process runs on (Debian picks it through alternatives)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.split()[-1]}
        return ", ".join(sorted(os.path.realpath(l) for l in libs)) or "none"
    except OSError:
        return "unknown"


def time_case(case, min_time, sdpa=False):
    case.call(0, sdpa)  # warm
    samples, i, start = [], 1, time.perf_counter()
    while len(samples) < 3 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter_ns()
        case.call(i, sdpa)
        samples.append(time.perf_counter_ns() - t0)
        i += 1
    return statistics.median(samples), len(samples)


def entry(name, ns, iterations, case):
    e = dict(name=name + "_median", run_name=name, run_type="aggregate", aggregate_name="median",
             iterations=iterations, real_time=ns, cpu_time=ns, time_unit="ns")
    seconds = ns / 1e9
    if case.q_len == 1:
        e["GBps"] = case.kv_bytes / seconds / 1e9
    else:
        e["GFLOPs"] = case.flops / seconds / 1e9
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON output path (default: print only)")
    ap.add_argument("--filter", default="", help="regex on case names")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds per case (>= 3 calls)")
    args = ap.parse_args()
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    has_sdpa = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0
    results = []
    for spec in CASES:
        if not re.search(args.filter, spec["name"]):
            continue
        case = Case(**spec)
        variants = [("torch", False), ("torch_f32", False)]
        variants += [("torch_sdpa", True)] if has_sdpa else []
        for label, sdpa in variants:
            if label == "torch_f32":
                case.to_f32()
            name = f"fia/{case.name}/{label}"
            ns, n = time_case(case, args.min_time, sdpa)
            results.append(entry(name, ns, n, case))
            rate = {k: round(v, 2) for k, v in results[-1].items() if k in ("GBps", "GFLOPs")}
            print(f"{name:40s} {ns / 1e6:10.3f} ms  {n:4d} calls  {rate}", flush=True)
        del case
    context = dict(executable="torch_peer.py", torch=torch.__version__, num_threads=threads,
                   blas=loaded_blas(),
                   openblas_threads=os.environ["OPENBLAS_NUM_THREADS"],
                   conversion="torch: fp16/bf16 -> float32 inside the timed call; "
                              "torch_f32: float32 cache, converted outside",
                   sdpa="yes" if has_sdpa else "not in this torch")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(dict(context=context, benchmarks=results), f, indent=1)


if __name__ == "__main__":
    main()
