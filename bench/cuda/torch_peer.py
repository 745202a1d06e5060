#!/usr/bin/env python3
"""PyTorch's side of bench_cuda (tools/gpu_check.sh runs both on the same GPU): the same four
measurements with torch.cuda, as JSON in Google Benchmark's shape (perf_table.py reads it).
    python3 bench/cuda/torch_peer.py --out torch_cuda.json
  Replay:  torch.cuda.CUDAGraph of a chain of n tiny kernels (x.add_(0) on a 1-element tensor), one
           replay + synchronize
  Eager:   the same n kernels issued one by one + synchronize
  Recapture: re-capturing a one-kernel graph (what an update saves: compare with BM_Cuda_Update)
  CopyD2D: a device-to-device copy of 256 MiB + synchronize
  SdpaDecode/B/S: a CUDAGraph of one torch.nn.functional.scaled_dot_product_attention decode
           (float16, 32 heads, D 128, KV length S), replay + synchronize; bytes/s = the key,
           value and query bytes read (compare with bench_cuda's BM_Cuda_FiaDecode)
Without torch or a CUDA device it writes an empty result and says why (exit 0): not measured.
NOT YET RUN ON A GPU."""
import argparse
import json
import sys
import time


def timed(fn, sync, reps):
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("-n", type=int, default=1000)
    args = ap.parse_args()
    result = {"context": {"peer": "torch"}, "benchmarks": []}
    try:
        import torch
        ok = torch.cuda.is_available()
        why = "torch.cuda.is_available() is False"
    except ImportError as e:
        ok, why = False, f"no torch: {e}"
    if not ok:
        print(f"torch_peer: not measured: {why}")
        with open(args.out, "w") as f:
            json.dump(result, f)
        return 0
    dev = torch.device("cuda:0")
    sync = torch.cuda.synchronize
    x = torch.zeros(1, device=dev)
    s = torch.cuda.Stream()

    def chain():
        for _ in range(args.n):
            x.add_(0)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        chain()  # warm-up on the side stream, as torch.cuda.graph recommends
    sync()
    with torch.cuda.graph(g):
        chain()
    big_a = torch.zeros(128 << 20, dtype=torch.float16, device=dev)
    big_b = torch.empty_like(big_a)

    def recapture():
        h = torch.cuda.CUDAGraph()
        with torch.cuda.graph(h):
            x.mul_(1.5)

    rows = [
        ("BM_Torch_Replay/1000", timed(g.replay, sync, args.reps), {}),
        ("BM_Torch_Eager/1000", timed(chain, sync, args.reps), {}),
        ("BM_Torch_Recapture", timed(recapture, sync, args.reps), {}),
        ("BM_Torch_CopyD2D", timed(lambda: big_b.copy_(big_a), sync, args.reps),
         {"bytes_per_second": None}),
    ]
    for B, S in ((1, 4096), (1, 32768), (16, 4096), (16, 32768)):
        q = torch.zeros(B, 32, 1, 128, dtype=torch.float16, device=dev)
        k = torch.zeros(B, 32, S, 128, dtype=torch.float16, device=dev)
        v = torch.zeros_like(k)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        with torch.cuda.stream(s):
            sdpa(q, k, v)  # warm-up on the side stream
        sync()
        h = torch.cuda.CUDAGraph()
        with torch.cuda.graph(h):
            sdpa(q, k, v)
        nbytes = (k.numel() + v.numel() + q.numel()) * 2
        rows.append((f"BM_Torch_SdpaDecode/{B}/{S}", timed(h.replay, sync, args.reps),
                     {"bytes_per_second": nbytes}))
        del q, k, v, h
    for name, secs, extra in rows:
        b = {"name": name, "run_name": name, "run_type": "iteration", "iterations": args.reps,
             "real_time": secs * 1e9, "cpu_time": secs * 1e9, "time_unit": "ns"}
        if "bytes_per_second" in extra:
            moved = extra["bytes_per_second"] or 2 * big_a.numel() * big_a.element_size()
            b["bytes_per_second"] = moved / secs
        result["benchmarks"].append(b)
        print(f"{name}: {secs * 1e6:.1f} us")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
