"""svod.comm: collectives among the ranks of a job, on numpy arrays, DLPack tensors and svod.Buffers.

    import numpy as np, svod.comm
    c = svod.comm.world()            # under mpirun/srun: this process's rank; alone: one rank
    g = np.full(4, c.rank, np.float32)
    c.all_reduce(g)                  # in place: every rank now holds the sum, the same bits everywhere

    def rank(c):                     # or ranks as threads of this process
        return c.all_reduce(np.ones(2, np.float32)).copy()
    svod.comm.run_local(4, rank)     # [array([4., 4.]), ...], one result per rank

Reductions combine in rank order, so the result is the same bits on every rank, in every run and on every
transport. Plans whose ops include collectives take the communicator as
svod.load_plan(path, comm=c) and svod.load_package(package, comm=c).
"""

from ._svod import Communicator, _comm_run_local, _comm_world

REDUCE_OPS = ("sum", "prod", "min", "max")


def world(transport=None, *, backend=None):
    """This process's world communicator: "mpi" when started by a launcher (mpirun, srun; OpenMPI is loaded
    then, on first use) or when transport="mpi"; otherwise one rank ("local"). The same communicator every
    call. transport is "auto" (the default), "mpi" or "local"; backend= is its old name.
    With several mpi ranks, an exception that ends this process aborts the communicator (after Python prints
    it), so that the other ranks fail at once naming this one instead of waiting for it until they time out."""
    comm = _comm_world(transport, backend)
    if comm.transport == "mpi" and comm.world_size > 1:
        _abort_on_uncaught_exception(comm)
    return comm


def _abort_on_uncaught_exception(comm):
    import sys  # here, so that svod.comm has no module sys (svod/__init__.py says why)

    global _hooked
    if _hooked:
        return
    _hooked = True
    previous = sys.excepthook

    def hook(kind, value, traceback):
        previous(kind, value, traceback)
        comm.abort(f"{kind.__name__}: {value}")

    sys.excepthook = hook


_hooked = False


def run_local(ranks, fn):
    """Runs fn(comm) for each of `ranks` ranks of one local group, rank 0 on this thread and the others on
    threads of their own, and returns their results as a list (index = rank). A rank whose fn raises fails
    the others' collectives (naming it) and its exception is raised here."""
    return _comm_run_local(ranks, fn)


__all__ = ["Communicator", "REDUCE_OPS", "run_local", "world"]
