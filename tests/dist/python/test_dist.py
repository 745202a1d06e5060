"""npugraph.dist under mpirun (ctest dist_python_np2): the collectives on numpy arrays and torch
tensors against the sum of every rank's input computed here (multiples of 1/8: exact in every
dtype, so bitwise), captured in a graph and replayed, and a missing rank's timeout. Every rank
runs every test; MPI comes from mpi4py."""
import time

import numpy as np
import pytest

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402

import npugraph  # noqa: E402
import npugraph.dist as dist  # noqa: E402
from npugraph import npu  # noqa: E402

if not dist.is_available():
    pytest.skip("npugraph built without MPI", allow_module_level=True)

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()


def values(rank, n, salt):
    i = np.arange(n, dtype=np.int64)
    return (((rank + 1) * 7919 + i * 104729 + salt * 31) % 61 - 30) / 8.0


def summed(n, salt):
    return sum(values(r, n, salt) for r in range(SIZE))


@pytest.fixture(scope="module", autouse=True)
def group():
    g = dist.init_process_group(backend="mpi")
    yield g
    dist.destroy_process_group()


def test_rank_and_size_are_mpis():
    assert (dist.get_rank(), dist.get_world_size()) == (RANK, SIZE)
    assert repr(dist._group(None)) == f"communicator (rank {RANK} of {SIZE})"


def test_all_reduce_numpy_float32_in_place():
    x = values(RANK, 1000, 1).astype(np.float32)
    dist.all_reduce(x)
    np.testing.assert_array_equal(x, summed(1000, 1).astype(np.float32))


def test_all_gather_and_reduce_scatter_numpy():
    x = values(RANK, 12, 2).astype(np.float32).reshape(3, 4)
    out = np.zeros((3 * SIZE, 4), np.float32)
    dist.all_gather_into_tensor(out, x)
    want = np.concatenate([values(r, 12, 2).reshape(3, 4) for r in range(SIZE)]).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    y = values(RANK, 2 * SIZE * 5, 3).astype(np.float32).reshape(2 * SIZE, 5)
    part = np.zeros((2, 5), np.float32)
    dist.reduce_scatter_tensor(part, y)
    np.testing.assert_array_equal(part, summed(2 * SIZE * 5, 3).reshape(2 * SIZE, 5)[2 * RANK:2 * RANK + 2])


def test_all_reduce_torch_bfloat16():
    torch = pytest.importorskip("torch")
    x = torch.tensor(values(RANK, 257, 4), dtype=torch.bfloat16)
    dist.all_reduce(x)
    assert torch.equal(x, torch.tensor(summed(257, 4), dtype=torch.bfloat16))


def test_captured_all_reduce_replays_with_new_inputs():
    x = values(RANK, 64, 0).astype(np.float32)
    g = npu.NPUGraph()
    with npu.graph(g):
        dist.all_reduce(x)
    for step in range(1, 4):
        x[:] = values(RANK, 64, step)
        g.replay()
        npu.synchronize()
        np.testing.assert_array_equal(x, summed(64, step).astype(np.float32))


def test_errors_name_the_argument():
    with pytest.raises(npugraph.ArgumentError, match="backend = 'nccl': must be 'mpi'"):
        dist.init_process_group(backend="nccl")
    with pytest.raises(npugraph.StateError, match="already initialized"):
        dist.init_process_group(backend="mpi")
    with pytest.raises(npugraph.ArgumentError, match="in dtype = int32"):
        dist.all_reduce(np.zeros(4, np.int32))
    with pytest.raises(npugraph.ArgumentError, match="only ReduceOp.SUM"):
        dist.all_reduce(np.zeros(4, np.float32), op="max")


def test_missing_rank_times_out_with_a_clear_error():
    g = dist.new_group(timeout=0.5)  # collective: every rank makes it
    assert g.timeout == 0.5
    x = np.ones(16, np.float32)
    if RANK == 0:
        t0 = time.monotonic()
        with pytest.raises(npugraph.TaskError, match=r"all_reduce of 16 float32 elements timed out "
                           rf"after 500 ms on communicator \(rank 0 of {SIZE}\)"):
            dist.all_reduce(x, group=g)
        assert 0.5 <= time.monotonic() - t0 < 3.0
        assert g.broken
    WORLD.Barrier()
    if RANK != 0:
        dist.all_reduce(x, group=g)  # late: completes rank 0's abandoned collective
    WORLD.Barrier()
