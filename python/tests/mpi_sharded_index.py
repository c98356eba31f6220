"""kvsketch.mpi under mpirun (-np 2 and -np 4 from CTest): the sharded index answers exactly what one
IvfIndex over the same vectors answers (ids and score bits), for several factories, uneven shards
(rank 1 of 4 holds nothing), removals and later adds; a refusal on one rank is raised on every rank
and changes nothing. Every rank builds the single index itself for the comparison. Exits non-zero
on any failure, on every rank."""
from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

import kvsketch
from kvsketch.mpi import ShardedIvfIndex

DIM, ROWS, QUERIES = 24, 3000, 30
comm = MPI.COMM_WORLD
rank, ranks = comm.Get_rank(), comm.Get_size()
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)
        print(f"rank {rank}: FAILED: {what}", file=sys.stderr, flush=True)


def clustered(n: int, seed: int) -> np.ndarray:
    """Rows around 30 centres, the same on every rank."""
    random = np.random.default_rng(seed)
    centres = 3.0 * random.standard_normal((30, DIM))
    rows = centres[(np.arange(n) * 7919) % 30] + random.standard_normal((n, DIM))
    return np.ascontiguousarray(rows, dtype=np.float32)


def share(n: int) -> slice:
    """This rank's rows: uneven shares, and none for rank 1 of 4."""
    weight = [0 if (ranks == 4 and r == 1) else r + 1 for r in range(ranks)]
    total, before = sum(weight), sum(weight[:rank])
    return slice(n * before // total, n * (before + weight[rank]) // total)


def same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[1], b[1]) and a[0].tobytes() == b[0].tobytes()


def refused_everywhere(call, needle: str) -> bool:
    try:
        call()
    except kvsketch.Error as error:
        return needle in str(error)
    return False


x, later, queries = clustered(ROWS, 1), clustered(400, 2), clustered(QUERIES, 3)
mine, mine_later = share(ROWS), share(400)
for factory in ["ivf:nlist=30,nprobe=6|tq_mse:b=4,rescale=1", "ivf:nlist=30,nprobe=6,metric=l2,norm=log8|tq_mse:b=2",
                "ivf:nlist=20,nprobe=5,metric=cosine,refine=int8,k_factor=4|tq_mse:b=1",
                "ivf:nlist=25,nprobe=8,fast_scan=0|int8"]:
    sharded = ShardedIvfIndex(comm, DIM, factory)
    sharded.train(x if rank == 0 else None)
    sharded.add(x[mine])
    single = kvsketch.IvfIndex(DIM, factory)
    single.train(x)
    single.add(x)
    check(sharded.ntotal == ROWS, f"{factory}: {sharded.ntotal} vectors")
    check(same(sharded.search(queries if rank == 0 else None, 10), single.search(queries, 10)), f"{factory}: search")
    check(same(sharded.search(queries if rank == 0 else None, 7, nprobe=2), single.search(queries, 7, nprobe=2)),
          f"{factory}: search with nprobe 2")
    # Removals wherever the ids lie (each rank names some), then later adds numbered on from there.
    doomed = np.arange(rank, ROWS, 97, dtype=np.int64)
    everyone = np.unique(np.concatenate(comm.allgather(doomed)))
    check(sharded.remove_ids(doomed) == everyone.size, f"{factory}: removed count")
    single.remove_ids(everyone)
    sharded.add(later[mine_later])
    single.add(later)
    check(sharded.ntotal == single.ntotal, f"{factory}: {sharded.ntotal} against {single.ntotal} after changes")
    check(same(sharded.search(queries if rank == 0 else None, 10), single.search(queries, 10)),
          f"{factory}: search after removals and adds")
    check(sharded.bytes() >= single.bytes(), f"{factory}: bytes {sharded.bytes()} below one index's {single.bytes()}")

# Refusals: raised on every rank, naming the rank, and nothing changes.
factory = "ivf:nlist=10,nprobe=10|tq_mse:b=4"
sharded = ShardedIvfIndex(comm, DIM, factory)
check(refused_everywhere(lambda: sharded.search(queries if rank == 0 else None, 1), "empty"), "search of an empty index")
sharded.train(x if rank == 0 else None)
sharded.add(x[:100] if rank == 0 else np.zeros((0, DIM), np.float32))
bad = x[mine].copy()
if rank == ranks - 1:
    bad[len(bad) // 2, 3] = np.nan
check(refused_everywhere(lambda: sharded.add(bad), f"rank {ranks - 1}"), "a NaN row on the last rank")
check(sharded.ntotal == 100, f"{sharded.ntotal} vectors after a refused add")
taken = np.array([5 if rank == ranks - 1 else 10_000 + rank], dtype=np.int64)
check(refused_everywhere(lambda: sharded.add(x[:1], taken), "already taken"), "a taken id")
if ranks > 1:
    check(refused_everywhere(lambda: sharded.add(x[:1], np.array([30_000], np.int64) if rank == 0 else None),
                             "on every rank or on none"), "ids on one rank only")
repeated = np.array([20_000], dtype=np.int64)
check(refused_everywhere(lambda: sharded.add(x[:1], repeated), "repeat"), "an id given on two ranks")
check(sharded.ntotal == 100, f"{sharded.ntotal} vectors after refused ids")
check(refused_everywhere(lambda: sharded.search(queries if rank == 0 else None, 101), "k must be"), "k beyond the size")
check(refused_everywhere(lambda: sharded.train(x if rank == 0 else None), "rank 0"), "a second training")
check(refused_everywhere(lambda: ShardedIvfIndex(comm, DIM + rank, factory), "every rank"), "dims that differ")
check(refused_everywhere(lambda: ShardedIvfIndex(comm, DIM, "ivf:nlist=0|tq_mse:b=4"), "nlist"), "a bad factory")

all_failures = comm.allgather(len(failures))
if rank == 0:
    print(f"kvsketch.mpi on {ranks} ranks: {sum(all_failures)} failures", flush=True)
sys.exit(1 if sum(all_failures) else 0)
