"""An IvfIndex sharded over the ranks of an mpi4py communicator.

The Python counterpart of ``kvsketch::MpiIvfIndex`` (``include/kvsketch/mpi/ivf_index.hpp``), built
on IvfIndex's bytes form and its mergeable search parts. One rank trains, and the trained, empty
index goes to every rank; each rank adds its own vectors to its shard; a search sends the root's
queries to every rank, each scans its shard, and the root merges the shards' candidates. That gives
exactly what one IvfIndex over all the vectors answers: the same ids and the same score bits.

    from mpi4py import MPI
    import kvsketch.mpi

    index = kvsketch.mpi.ShardedIvfIndex(MPI.COMM_WORLD, 768, "ivf:nlist=4096,nprobe=32|tq_mse:b=4,rescale=1")
    index.train(sample if rank == 0 else None)
    index.add(my_rows)                                  # ids: global row numbers in rank order
    D, I = index.search(queries if rank == 0 else None, 10)

Every method that changes or searches the index is collective: all ranks call it, in the same
order. An error on any rank is raised on every rank as ``kvsketch.Error``, naming the rank, and
leaves every shard as it was. Needs mpi4py (``scripts/setup_python.sh`` pins it).
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import numpy as np
from mpi4py import MPI

from . import Error, IvfIndex

T = TypeVar("T")
_INT64_MAX = np.iinfo(np.int64).max


def _message(error: Exception) -> str:
    return str(error) if isinstance(error, Error) else f"{type(error).__name__}: {error}"


def _raise_first(messages: list[str | None]) -> None:
    for rank, message in enumerate(messages):
        if message is not None:
            raise Error(f"rank {rank}: {message}")


def _agreed(comm: MPI.Comm, call: Callable[[], T]) -> T:
    """Runs call on every rank; a failure on any rank is raised on all of them."""
    result: Any = None
    message = None
    try:
        result = call()
    except Exception as error:  # noqa: BLE001 -- every failure must reach the other ranks
        message = _message(error)
    _raise_first(comm.allgather(message))
    return result


def _from_root(comm: MPI.Comm, root: int, call: Callable[[], T]) -> T:
    """Runs call on the root and sends its result (or its failure) to every rank."""
    result: Any = None
    message = None
    if comm.Get_rank() == root:
        try:
            result = call()
        except Exception as error:  # noqa: BLE001
            message = _message(error)
    result, message = comm.bcast((result, message), root=root)
    if message is not None:
        raise Error(f"rank {root}: {message}")
    return result


class ShardedIvfIndex:
    """An IvfIndex per rank, searched as one.

    ShardedIvfIndex(comm, dim, factory, threads=0): every rank gives the same dim and factory.
    """

    def __init__(self, comm: MPI.Comm, dim: int, factory: str, threads: int = 0) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.ranks = comm.Get_size()
        given = comm.allgather((dim, factory))
        for rank, (other_dim, other_factory) in enumerate(given):
            if (other_dim, other_factory) != (dim, factory):
                raise Error(f"ShardedIvfIndex: rank {rank} gives dim {other_dim} and factory {other_factory!r}, "
                            f"rank {self.rank} dim {dim} and {factory!r}; every rank must give the same")
        self.shard: IvfIndex = _agreed(comm, lambda: IvfIndex(dim, factory, threads))
        self._next_id = 0  # one past the largest id added on any rank
        self._size = 0
        self._bytes = 0
        self._count()

    @property
    def ntotal(self) -> int:
        """Vectors on all ranks together."""
        return self._size

    @property
    def d(self) -> int:
        return self.shard.d

    @property
    def is_trained(self) -> bool:
        return self.shard.is_trained

    def bytes(self) -> int:
        """Bytes held on all ranks together (centroids on every rank), as of the last collective call."""
        return self._bytes

    def _count(self) -> None:
        self._size = self.comm.allreduce(self.shard.ntotal, op=MPI.SUM)
        self._bytes = self.comm.allreduce(self.shard.bytes(), op=MPI.SUM)

    def train(self, x: np.ndarray | None = None, root: int = 0) -> None:
        """The root trains on its rows (the others' x is ignored); every rank then holds a copy of
        the trained, empty index."""

        def trained_image() -> bytes:
            self.shard.train(x)
            return self.shard.to_bytes()

        image = _from_root(self.comm, root, trained_image)
        if self.rank != root:
            self.shard = IvfIndex.from_bytes(image)
        self._count()

    def add(self, x: np.ndarray, ids: np.ndarray | None = None) -> None:
        """Each rank adds its own rows (their number may differ, and be 0). Without ids, rows are
        numbered on from the largest id added, rank 0's rows first: what one index given the ranks'
        rows in order would number them. Given ids must be distinct across all ranks and new."""
        comm = self.comm
        n = _agreed(comm, lambda: self._rows_of(x))
        counts, given = zip(*comm.allgather((n, ids is not None)))
        if any(given) and not all(given):
            # The two kinds of add gather different things: one rank cannot give ids without the others.
            raise Error(f"ShardedIvfIndex: add: ranks {[r for r, g in enumerate(given) if g]} give ids and the others "
                        "do not; give ids on every rank or on none")
        if ids is None:
            total = sum(counts)
            if self._next_id > _INT64_MAX - total:
                raise Error(f"ShardedIvfIndex: add: default ids would pass 2^63 - 1 (the largest id added is "
                            f"{self._next_id - 1}); give ids")
            first = self._next_id + sum(counts[: self.rank])
            mine = np.arange(first, first + n, dtype=np.int64)
        else:
            mine = _agreed(comm, lambda: self._ids_of(ids, n))
            everyone = np.concatenate(comm.allgather(mine))
            if np.unique(everyone).size != everyone.size:
                raise Error("ShardedIvfIndex: add: the given ids repeat an id across the ranks")

            def none_taken() -> None:
                taken = self.shard.first_present(everyone)
                if taken >= 0:
                    raise Error(f"ShardedIvfIndex: add: id {taken} is already taken")

            _agreed(comm, none_taken)
        # Each shard adds; where any rank refuses, the ranks that added take their rows out again.
        message = None
        if n > 0:
            try:
                self.shard.add_with_ids(x, mine)
            except Exception as error:  # noqa: BLE001
                message = _message(error)
        messages = comm.allgather(message)
        if any(m is not None for m in messages):
            if message is None and n > 0:
                self.shard.remove_ids(mine)
            _raise_first(messages)
        largest = int(mine.max()) if n > 0 else -1
        largest = comm.allreduce(largest, op=MPI.MAX)
        if largest >= 0:
            self._next_id = max(self._next_id, largest if largest == _INT64_MAX else largest + 1)
        self._count()

    def search(self, queries: np.ndarray | None, k: int, nprobe: int = 0,
               root: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(D, I) for the root's queries (the others' are ignored), on every rank."""
        comm = self.comm

        def checked_queries() -> np.ndarray:
            if self._size == 0:
                raise Error("ShardedIvfIndex: search: the index is empty")
            if k < 1 or k > self._size:
                raise Error(f"ShardedIvfIndex: search: k must be in 1..{self._size} (the vectors held), got {k}")
            return queries  # type: ignore[return-value]

        q = _from_root(comm, root, checked_queries)
        part = _agreed(comm, lambda: self.shard.candidates(q, k, nprobe))
        parts = comm.gather(part, root=root)
        return _from_root(comm, root, lambda: self.shard.merge(parts))

    def remove_ids(self, ids: np.ndarray) -> int:
        """Each rank's ids (which may differ) are removed wherever they lie; returns how many, in all."""
        mine = _agreed(self.comm, lambda: self._ids_of(ids, None))
        everyone = np.unique(np.concatenate(self.comm.allgather(mine)))
        removed = self.comm.allreduce(self.shard.remove_ids(everyone), op=MPI.SUM)
        self._count()
        return int(removed)

    def save_shards(self, path_prefix: str) -> None:
        """Each rank writes its shard to path_prefix + ".rank" + rank (an IvfIndex file)."""
        _agreed(self.comm, lambda: self.shard.save(f"{path_prefix}.rank{self.rank}"))

    def _rows_of(self, x: Any) -> int:
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != self.shard.d:
            shape = getattr(x, "shape", type(x).__name__)
            raise Error(f"ShardedIvfIndex: add: x must be an (n, {self.shard.d}) array, got {shape}")
        return int(x.shape[0])

    @staticmethod
    def _ids_of(ids: Any, n: int | None) -> np.ndarray:
        if not isinstance(ids, np.ndarray) or ids.dtype != np.int64 or ids.ndim != 1:
            raise Error("ShardedIvfIndex: ids must be a one-dimensional int64 array")
        if n is not None and ids.shape[0] != n:
            raise Error(f"ShardedIvfIndex: add: {ids.shape[0]} ids for {n} rows")
        return ids
