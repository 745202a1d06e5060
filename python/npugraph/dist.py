"""npugraph.dist: collectives on MPI inside npugraph streams and graphs (docs/dist.md), with
torch.distributed's names. Run under mpirun; MPI is initialized by mpi4py (Debian's
python3-mpi4py), whose default thread level, MPI_THREAD_MULTIPLE, is what npugraph needs.

    import npugraph.dist as dist
    dist.init_process_group(backend="mpi")
    dist.all_reduce(x)                      # x = sum over the ranks, in place (numpy or torch)
    dist.all_gather_into_tensor(out, x)     # out [size*m, ...]
    dist.reduce_scatter_tensor(out, x)      # out [m, ...]

Like every npugraph op they are captured inside ``with npugraph.npu.graph(g):`` and replay in
stream order; every rank must issue the collectives of one group in the same order.
"""
from . import _C

__all__ = ["ReduceOp", "all_gather_into_tensor", "all_reduce", "destroy_process_group",
           "get_rank", "get_world_size", "init_process_group", "is_available", "is_initialized",
           "new_group", "reduce_scatter_tensor"]

_default = None


class ReduceOp:
    """The reductions npugraph.dist has: SUM only."""
    SUM = "sum"


def is_available():
    """Whether this build of npugraph has npugraph::dist (CMake found MPI)."""
    return _C.dist.is_available()


def _check_available():
    if not is_available():
        raise _C.UnsupportedError("npugraph.dist: this npugraph was built without MPI (configure with "
                                  "Open MPI installed, NPUGRAPH_MPI=AUTO or ON; make setup installs it)")


def new_group(comm=None, timeout=None):
    """A communicator over the mpi4py communicator `comm` (default COMM_WORLD), duplicated;
    `timeout` in seconds (default NPUGRAPH_DIST_TIMEOUT_S, else 60)."""
    _check_available()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD if comm is None else comm
    group = _C.dist.Communicator(MPI._handleof(comm))
    if timeout is not None:
        group.timeout = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
    return group


def init_process_group(backend="mpi", comm=None, timeout=None):
    """The default group, over `comm` (an mpi4py communicator, default COMM_WORLD). backend must
    be "mpi"."""
    global _default
    if backend != "mpi":
        raise _C.ArgumentError(f"init_process_group: backend = {backend!r}: must be 'mpi' "
                               "(npugraph.dist runs on Open MPI)")
    if _default is not None:
        raise _C.StateError("init_process_group: the default group is already initialized "
                            "(destroy_process_group() first)")
    _default = new_group(comm, timeout)
    return _default


def is_initialized():
    return _default is not None


def destroy_process_group():
    global _default
    _default = None


def _group(group):
    if group is not None:
        return group
    if _default is None:
        raise _C.StateError("npugraph.dist: no default group: call init_process_group(backend='mpi') "
                            "or pass group=")
    return _default


def get_rank(group=None):
    return _group(group).rank


def get_world_size(group=None):
    return _group(group).size


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """tensor = the sum over the ranks of tensor, in place (float32, float16, bfloat16)."""
    if op not in (ReduceOp.SUM, "sum") and getattr(op, "name", None) != "SUM":
        raise _C.ArgumentError(f"all_reduce: op = {op!r}: only ReduceOp.SUM is supported")
    _C.dist.all_reduce(_group(group), tensor)


def all_gather_into_tensor(output_tensor, input_tensor, group=None):
    """output [size*m, ...] = every rank's input [m, ...], in rank order along dim 0."""
    _C.dist.all_gather(_group(group), output_tensor, input_tensor)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None):
    """output [m, ...] = this rank's rows of the sum over the ranks of input [size*m, ...]."""
    if op not in (ReduceOp.SUM, "sum") and getattr(op, "name", None) != "SUM":
        raise _C.ArgumentError(f"reduce_scatter_tensor: op = {op!r}: only ReduceOp.SUM is supported")
    _C.dist.reduce_scatter(_group(group), output, input)
