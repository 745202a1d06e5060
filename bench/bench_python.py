"""Python-side host costs, medians of many repetitions:

  BM_Python_UpdateTriple        graph_task_update_begin + FIA .out + graph_task_update_end (1 group)
  BM_Python_GraphUpdate80       NPUGraph.update with 80 dicts (a decode step of 80 recorded FIA calls,
                                auto_dispatch_capture), one C++ batched update with the GIL released
  BM_Python_GraphUpdate80One    the same with one dict for all 80 calls
  BM_Python_ReplayBlocking      replay() of the 1-FIA seed graph (waits for it to run)
  BM_Python_ReplayAsync         replay(blocking=False)
  BM_Python_EagerFia            an eager FIA call of the seed's decode shape
  BM_Python_TorchOpEager        one small torch op (64 floats: y * a, then y.add_(1)), eager, per op
  BM_Python_TorchOpReplay       the same ops captured (Note [Torch ops in a capture]) and replayed
                                (blocking), per op: the host task, the GIL and the recorded call

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [--out results.json]

With --out, the results are also written in Google Benchmark's JSON format (median aggregates), so
tools/perf_table.py reads them like the C++ benchmarks'.
"""
import argparse
import json
import statistics
import time

import torch

import npugraph
from npugraph import npu

fia = npugraph.npu_fused_infer_attention_score
OPTS = dict(num_heads=32, input_layout="BNSD", scale=128.0, pre_tokens=65535, next_tokens=65535,
            softmax_lse_flag=False, actual_seq_lengths=[29])


def median_us(fn, reps=400, inner=10):
    for _ in range(inner * 10):  # warm up
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter_ns() - t0) / inner / 1000.0)
    return statistics.median(samples)


def seed_tensors():
    return [torch.randn(1, 32, 1, 128, dtype=torch.float16) for _ in range(3)]


def bench_update_triple():
    q, k, v = seed_tensors()
    g = npu.NPUGraph()
    with npu.graph(g):
        s = npu.current_stream()
        ws = npugraph._npu_fused_infer_attention_score_get_max_workspace(q, k, v, **OPTS)
        out = npugraph.empty(1, 32, 1, 128, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float16)
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **OPTS)
        handle = npu.graph_task_group_end(s)
    upd = npu.Stream()
    new = dict(OPTS, actual_seq_lengths=[100])

    def update():
        npu.graph_task_update_begin(upd, handle)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **new)
        npu.graph_task_update_end(upd)

    with npu.stream(upd):
        t = median_us(update)
    upd.synchronize()
    return g, t


def bench_graph_update(calls=80):
    # The seed's decode shape (KV of one token): the replays between updates stay small, so the
    # figure is the update's host path rather than the cache misses a long replay leaves behind.
    q, k, v = seed_tensors()
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        for _ in range(calls):
            fia(q, k, v, **OPTS)
    per_call = [{"actual_seq_lengths": [i % 128 + 1]} for i in range(calls)]
    one = [{"actual_seq_lengths": [64]}]

    def timed_update(inputs, reps=300):
        # Each update is followed by the replay it prepares (untimed): the replay consumes the
        # ExternalEvent signals the update records.
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            g.update(cpu_update_input=inputs)
            samples.append((time.perf_counter_ns() - t0) / 1000.0)
            g.replay()
        return statistics.median(samples)

    return timed_update(per_call), timed_update(one)


def bench_torch_ops(ops=64, size=64):
    """Per-op cost of torch ops eager and replayed from a capture: tiny tensors, so the figure is
    the host path, not the arithmetic."""
    x, a = torch.randn(size), torch.randn(size)

    def step():
        y = x
        for _ in range(ops // 2):
            y = y * a  # functional: replayed as aten.mul.out into its pool output
            y.add_(1.0)  # in place: replayed as called
        return y

    eager = median_us(step, reps=100, inner=5)
    g = npu.NPUGraph()
    with npu.graph(g):
        step()
    replay = median_us(lambda: g.replay(blocking=True), reps=100, inner=5)
    return eager / ops, replay / ops


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="write Google Benchmark JSON here")
    args = parser.parse_args()

    g, t_update = bench_update_triple()
    t_graph_update, t_graph_update_one = bench_graph_update()
    t_replay = median_us(lambda: g.replay())
    t_replay_async = median_us(lambda: g.replay(blocking=False))
    npu.synchronize()
    q, k, v = seed_tensors()
    t_eager = median_us(lambda: fia(q, k, v, **OPTS))
    t_op_eager, t_op_replay = bench_torch_ops()
    results = {
        "BM_Python_UpdateTriple": t_update,
        "BM_Python_GraphUpdate80": t_graph_update,
        "BM_Python_GraphUpdate80One": t_graph_update_one,
        "BM_Python_ReplayBlocking": t_replay,
        "BM_Python_ReplayAsync": t_replay_async,
        "BM_Python_EagerFia": t_eager,
        "BM_Python_TorchOpEager": t_op_eager,
        "BM_Python_TorchOpReplay": t_op_replay,
    }
    for name, us in results.items():
        print(f"{name:32s} {us:10.2f} us")
    if args.out:
        entries = [{"name": f"{name}_median", "run_name": name, "run_type": "aggregate",
                    "aggregate_name": "median", "real_time": us, "cpu_time": us, "time_unit": "us"}
                   for name, us in results.items()]
        with open(args.out, "w") as f:
            json.dump({"context": {"executable": "bench/bench_python.py"}, "benchmarks": entries}, f, indent=1)


if __name__ == "__main__":
    main()
