"""Python-side host costs: one update triple (graph_task_update_begin / FIA .out / update_end), one
replay, one eager FIA call. Medians of many repetitions, in microseconds.

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py
"""
import statistics
import time

import torch

import npugraph
from npugraph import npu

fia = npugraph.npu_fused_infer_attention_score


def median_us(fn, reps=2000, inner=10):
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter_ns() - t0) / inner / 1000.0)
    return statistics.median(samples)


def main():
    q = torch.randn(1, 32, 1, 128, dtype=torch.float16)
    k = torch.randn(1, 32, 1, 128, dtype=torch.float16)
    v = torch.randn(1, 32, 1, 128, dtype=torch.float16)
    opts = dict(num_heads=32, input_layout="BNSD", scale=128.0, pre_tokens=65535, next_tokens=65535,
                softmax_lse_flag=False, actual_seq_lengths=[29])
    g = npu.NPUGraph()
    with npu.graph(g):
        s = npu.current_stream()
        ws = npugraph._npu_fused_infer_attention_score_get_max_workspace(q, k, v, **opts)
        out = npugraph.empty(1, 32, 1, 128, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float16)
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **opts)
        handle = npu.graph_task_group_end(s)
    upd = npu.Stream()
    new = dict(opts, actual_seq_lengths=[100])

    def update():
        npu.graph_task_update_begin(upd, handle)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **new)
        npu.graph_task_update_end(upd)

    with npu.stream(upd):
        t_update = median_us(update)
    upd.synchronize()
    t_replay = median_us(lambda: g.replay())
    t_replay_async = median_us(lambda: g.replay(blocking=False))
    npu.synchronize()
    t_eager = median_us(lambda: fia(q, k, v, **opts))
    print(f"update triple (begin + FIA .out + end): {t_update:8.2f} us")
    print(f"replay() (blocking, 1-task graph):      {t_replay:8.2f} us")
    print(f"replay(blocking=False):                 {t_replay_async:8.2f} us")
    print(f"eager FIA (seed decode shape):          {t_eager:8.2f} us")


if __name__ == "__main__":
    main()
