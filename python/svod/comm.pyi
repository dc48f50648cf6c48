# Type stubs of svod.comm (the compiled part is svod._svod).
from typing import Any, Callable, Literal

from . import BufferLike

ReduceOp = Literal["sum", "prod", "min", "max"]
REDUCE_OPS: tuple[str, ...]

class Communicator:
    """The ranks of a job and the collectives among them."""
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def local_rank(self) -> int:
        """This rank's index among the ranks on its own machine, 0 .. local_size-1: with "mpi", the
        ranks sharing this machine, found by MPI at start whatever the launcher; with "local", rank.
        A plan loaded with comm=this communicator whose device is "CUDA:local" or "CL:local" runs on
        device local_rank % (the number of such devices), one GPU per rank from one plan file."""
    @property
    def local_size(self) -> int:
        """The number of ranks on this rank's machine ("local": world_size)."""
    @property
    def transport(self) -> str: ...
    @property
    def backend(self) -> str:
        """The old name of transport."""
    def barrier(self) -> None: ...
    def all_reduce(self, x: BufferLike, op: ReduceOp = "sum") -> BufferLike: ...
    def all_gather(self, x: BufferLike, out: BufferLike | None = None) -> BufferLike: ...
    def reduce_scatter(self, x: BufferLike, out: BufferLike | None = None, op: ReduceOp = "sum") -> BufferLike: ...
    def broadcast(self, x: BufferLike, root: int = 0) -> BufferLike: ...
    def send(self, x: BufferLike, dest: int, tag: int = 0) -> None: ...
    def recv(self, x: BufferLike, source: int, tag: int = 0) -> BufferLike: ...
    def abort(self, reason: str) -> None: ...

def world(transport: Literal["auto", "mpi", "local"] | None = None, *,
          backend: Literal["auto", "mpi", "local"] | None = None) -> Communicator:
    """transport defaults to "auto"; backend= is its old name."""
def run_local(ranks: int, fn: Callable[[Communicator], Any]) -> list[Any]: ...
