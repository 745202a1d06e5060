"""
collectives on MPI (npugraph::dist, docs/dist.md)
"""
from __future__ import annotations
import typing
__all__: list[str] = ['Communicator', 'all_gather', 'all_reduce', 'is_available', 'reduce_scatter']
class Communicator:
    def __init__(self, handle: typing.Any) -> None:
        """
        A duplicate of the MPI communicator whose handle is given (collective over it).
        """
    def __repr__(self) -> str:
        ...
    @property
    def broken(self) -> bool:
        """
        Whether a collective on it timed out (later ones fail at once).
        """
    @property
    def rank(self) -> int:
        ...
    @property
    def size(self) -> int:
        ...
    @property
    def timeout(self) -> float:
        """
        Seconds a collective may wait for the other ranks before its task fails.
        """
    @timeout.setter
    def timeout(self, arg1: typing.Any) -> None:
        ...
def all_gather(comm: Communicator, output: typing.Any, input: typing.Any) -> None:
    """
    output [size*m, ...] = every rank's input [m, ...] in rank order.
    """
def all_reduce(comm: Communicator, tensor: typing.Any) -> None:
    """
    tensor = the sum over the ranks of tensor, in place.
    """
def is_available() -> bool:
    """
    Whether this build has npugraph::dist (MPI).
    """
def reduce_scatter(comm: Communicator, output: typing.Any, input: typing.Any) -> None:
    """
    output [m, ...] = this rank's rows of the sum over the ranks of input [size*m, ...].
    """
