"""What one op costs on the npu device (docs/torch_npu.md, "A real `npu` device"): a 64-float add,
timed 7 x 2000 times, the median of the 7 means, in three fresh interpreters: no shim, the shim
(npugraph.compat.install()) on CPU tensors, and the shim's npu device on npu tensors.

    PYTHONPATH=build/python <venv>/bin/python tools/time_npu_add.py
"""
import os
import statistics
import subprocess
import sys
import timeit

MODES = ("cpu, no shim", "cpu, shim", "npu, shim npu_device=True")


def measure(mode):
    import torch

    device = "cpu"
    if mode != MODES[0]:
        import npugraph.compat as compat

        compat.install(npu_device=mode == MODES[2])
        device = "npu" if mode == MODES[2] else "cpu"
    x = torch.ones(64, device=device)
    assert x.device.type == device
    x + x  # first call: lazy set-up
    means = [t / 2000 for t in timeit.repeat(lambda: x + x, number=2000, repeat=7)]
    return statistics.median(means) * 1e6


def main():
    if len(sys.argv) > 1:
        print(f"{measure(sys.argv[1]):.1f}")
        return
    import torch

    print(f"torch {torch.__version__}, 64-float add, median of 7 x 2000 (us per op)")
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, mode], capture_output=True, text=True,
                             env=os.environ, check=True)
        print(f"  {mode:28s} {out.stdout.strip()}")


if __name__ == "__main__":
    main()
