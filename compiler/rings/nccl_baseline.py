"""NCCL's (and RCCL's) ring algorithm written as a runtime program.

Used to calibrate the cost model against published NCCL/RCCL measurements
(``bench/calibrate.py``, ``docs/cost-model.md``), as the baseline in
``bench/``, and as the candidate ``--algorithm nccl-rings`` (so what colc
picks is never slower than the vendor's ring under the simulator).

What NCCL builds on multi-box machines, and what this module reproduces:

* ``channels`` rings (NCCL uses 16 on a DGX A100 pair), every ring visits the
  ranks box by box;
* rings are *NIC-aligned*: ring ``c`` enters every box at local GPU
  ``c mod G`` and leaves it from a GPU on the same network rail, so over all
  channels every GPU's NIC carries the same number of ring hops each way;
* inside a box the ring follows the box fabric (any order behind an
  NVSwitch; a Hamiltonian path over direct links on xGMI machines).

Each ring owns ``1/channels`` of every shard (``build_ring_schedule``); the
lowering turns each ring into one threadblock per rank and channel (``s``,
``rcs``/``rrs`` ..., ``r``), as NCCL runs one block per channel.

Complexity: O(channels * N^2) for the schedule, plus the Hamiltonian path
search per box (small boxes).
"""

from __future__ import annotations

import dataclasses

from colc.compiler.lowering.lower_to_program import (
    MAX_CHANNELS,
    MAX_STEPS,
    MAX_THREADBLOCKS,
    LoweringOptions,
    lower_to_program,
)
from colc.compiler.rings.ring import Ring, build_ring_schedule
from colc.errors import InfeasibleError, UnsupportedError
from colc.ir.core import Collective, Protocol
from colc.ir.chunks import Schedule
from colc.ir.program import Program
from colc.ir.routing import Router
from colc.ir.topology import Topology, boxes


#: Hamiltonian paths examined per box entry (the least loaded one is used).
PATHS_TRIED = 400
#: Rings (channels) NCCL uses on a DGX A100 pair, and RCCL on MI250 boxes.
RINGS = 16


def _paths(start: int, end: int, members: list[int], reach: set[tuple[int, int]]):
    """Hamiltonian paths ``start .. end`` over ``members`` (DFS, small boxes)."""
    if start == end:
        if len(members) == 1:
            yield [start]
        return
    todo = set(members) - {start}
    path = [start]
    ordered = sorted(members)
    nbrs = {u: [v for v in ordered if (u, v) in reach] for u in ordered}

    def extend():
        if not todo:
            if path[-1] == end:
                yield list(path)
            return
        for nxt in nbrs[path[-1]]:
            if nxt not in todo or (nxt == end and len(todo) > 1):
                continue
            path.append(nxt)
            todo.discard(nxt)
            yield from extend()
            todo.add(path.pop())

    yield from extend()


def nccl_rings(topo: Topology, channels: int) -> tuple[Ring, ...]:
    """NIC-aligned rings, one per channel (see module docstring).

    Raises
    ------
    UnsupportedError
        Boxes of different sizes, or no ring through the box fabric.
    """
    groups = boxes(topo)
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise UnsupportedError("NCCL rings need boxes of equal size")
    router = Router(topo)
    reach = {(a, b) for a in range(topo.num_ranks) for b in router.switch_paths(a) if a != b}
    local = {(a, b) for a, b in reach if _same_box(groups, a, b) and not _via_net(topo, router, a, b)}
    load = _Load(router)
    rings = []
    for c in range(channels):
        order: list[int] = []
        entry = c % size
        for i, box in enumerate(groups):
            nxt = groups[(i + 1) % len(groups)]
            path = _box_path(box, entry, nxt[entry] if len(groups) > 1 else None, reach, local,
                             load)
            if path is None:
                raise UnsupportedError(f"no NIC-aligned ring enters box {i} at GPU {entry}")
            order += path
        if len(groups) == 1:
            k = order.index(groups[0][entry])
            order = order[k:] + order[:k]
        n = len(order)
        rings.append(Ring(tuple(order), tuple((order[p], order[(p + 1) % n]) for p in range(n))))
    return tuple(rings)


def _same_box(groups: list[list[int]], a: int, b: int) -> bool:
    return any(a in g and b in g for g in groups)


def _via_net(topo: Topology, router: Router, a: int, b: int) -> bool:
    return any(topo.node[v].is_network for v in router.switch_paths(a)[b])


class _Load:
    """Ring hops per link so far, to spread rings over the box fabric (as NCCL does)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.hops: dict[tuple[str, str], int] = {}
        # (a, b) -> the links of the hop with their capacities: ``cost`` is
        # asked of every path tried (DGX A100 x8, 32 rings: 256,000 paths)
        self._hop: dict[tuple[int, int], tuple[tuple[tuple[str, str], float], ...]] = {}

    def _links(self, a: int, b: int) -> tuple[tuple[tuple[str, str], float], ...]:
        if (a, b) not in self._hop:
            nodes = self.router.switch_paths(a)[b]
            self._hop[a, b] = tuple((e, float(self.router.cap[e]))
                                    for e in zip(nodes, nodes[1:], strict=False))
        return self._hop[a, b]

    def _edges(self, path: list[int]):
        for a, b in zip(path, path[1:], strict=False):
            for e, _ in self._links(a, b):
                yield e

    def cost(self, path: list[int]) -> tuple[float, float]:
        worst, total, hops = 0.0, 0.0, self.hops
        for a, b in zip(path, path[1:], strict=False):
            for e, cap in self._links(a, b):
                x = (hops.get(e, 0) + 1) / cap
                worst, total = max(worst, x), total + x
        return worst, total

    def add(self, path: list[int]) -> None:
        for e in self._edges(path):
            self.hops[e] = self.hops.get(e, 0) + 1


def _best_path(start: int, end: int, box: list[int], local: set, load: _Load) -> list[int] | None:
    best = None
    for k, path in enumerate(_paths(start, end, box, local)):
        cand = (load.cost(path), path)
        if best is None or cand < best:
            best = cand
        if k + 1 >= PATHS_TRIED:
            break
    return None if best is None else best[1]


def _box_path(box: list[int], entry: int, next_entry: int | None, reach: set, local: set,
              load: _Load) -> list[int] | None:
    """Path through one box from local GPU ``entry`` to an exit that reaches the next box."""
    start = box[entry]
    if next_entry is None:  # one box: a Hamiltonian cycle
        for end in box:
            if end != start and (end, start) in local:
                path = _best_path(start, end, box, local, load)
                if path is not None:
                    load.add([*path, start])
                    return path
        return None
    size = len(box)
    for step in range(1, size + 1):
        end = box[(entry + step) % size]
        if (end, next_entry) not in reach or (size > 1 and end == start):
            continue
        path = _best_path(start, end, box, local, load)
        if path is not None:
            load.add(path)
            return path
    return None


def nccl_rings_schedule(topo: Topology, collective: Collective, chunks: int | None = None,
                        budget: int = 32) -> Schedule:
    """NCCL's NIC-aligned rings as one of colc's schedules (``--algorithm nccl-rings``).

    What the vendor library runs, as a candidate beside colc's own: a
    portfolio is then never slower than the ring at any size (under the
    simulator).  ``RINGS`` rings by default, fewer when the threadblock
    budget is small (``ring_threadblocks``: DGX A100 x16 at 32
    threadblocks, 4 rings for allgather and for allreduce), a power of two
    (``_power_of_two_floor``).  ``chunks``
    rings when given (ring ``j`` owns chunk ``j`` of every shard), as
    NCCL runs with ``NCCL_MIN_NCHANNELS``: a reduce-scatter ring of up to
    65 ranks takes one threadblock, so 32 fit the default budget (DGX A100
    x8 at 128 MiB, LL128: 157.1 GB/s against 142.7 with 16, simulated).

    Parameters
    ----------
    topo : Topology
    collective : Collective
    chunks : int or None
        Rings, 1..32 (None: ``RINGS``, or the most the budget holds, a power of two).
    budget : int
        Threadblocks per rank.

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Not boxes of several GPUs joined by a network, or ``chunks`` outside
        1..32.
    InfeasibleError
        ``chunks`` rings take more threadblocks than ``budget``.
    """
    groups = boxes(topo)
    if len(groups) < 2 or len(groups[0]) < 2:
        raise UnsupportedError("nccl-rings needs boxes of several GPUs joined by a network "
                               "(what NCCL's rings are built for); use ring")
    per_ring = ring_threadblocks(topo.num_ranks, collective)
    if chunks is None:
        rings = _power_of_two_floor(min(RINGS, max(1, budget // per_ring)))
    elif not 1 <= chunks <= MAX_CHANNELS:
        raise UnsupportedError(f"nccl-rings: {chunks} rings; NCCL runs 1 to {MAX_CHANNELS} "
                               "channels")
    elif chunks * per_ring > budget:
        raise InfeasibleError(
            f"nccl-rings: {chunks} rings take about {chunks * per_ring} threadblocks per "
            f"GPU here ({per_ring} per ring), more than the budget of {budget}")
    else:
        rings = chunks
    sched = build_ring_schedule(topo.num_ranks, nccl_rings(topo, rings), collective)
    return dataclasses.replace(sched, algorithm="nccl-rings")


def _power_of_two_floor(n: int) -> int:
    """The largest power of two not above ``n`` (>= 1).  Rings by the power
    of two: a file of ``rings * ranks`` chunks per loop is selected where
    nccl-tests' element count is a multiple of it, which an odd factor of
    the ring count rules out at every power-of-two size (DGX A100 x2
    reduce-scatter within 12: 12 rings, 192 chunks, selected nowhere and
    their bound 141.9 GB/s on 8 NICs; 8 rings, 128 chunks, 189.2).

    >>> [_power_of_two_floor(n) for n in (1, 3, 6, 12, 16)]
    [1, 2, 4, 8, 16]
    """
    return 1 << (max(1, n).bit_length() - 1)


def ring_threadblocks(n: int, collective: Collective) -> int:
    """Threadblocks a ring of ``n`` ranks takes per rank, as lowered.

    A threadblock holds 64 steps.  A reduce-scatter ring puts ``n - 1``
    steps on a rank and an allreduce ring ``2 (n - 1)``: one threadblock up
    to 65 and 33 ranks (DGX A100 x8 reduce-scatter, 32 rings: 32).  An
    allgather ring's copy of the own shard takes a threadblock of its own,
    so two up to 64 ranks, as an allreduce ring past 33.  Past 64 ranks
    nops and copies add more (DGX A100 x16 at 32 threadblocks: 5 per ring
    for allgather, 8 for allreduce, measured), estimated as
    ``2 + ceil(5 steps / 256)``.

    >>> [ring_threadblocks(64, Collective(c)) for c in ("allgather", "reducescatter", "allreduce")]
    [2, 1, 2]
    >>> [ring_threadblocks(32, Collective(c)) for c in ("allgather", "reducescatter", "allreduce")]
    [2, 1, 1]
    >>> ring_threadblocks(128, Collective.REDUCESCATTER), ring_threadblocks(128, Collective.ALLREDUCE)
    (5, 7)
    """
    ring_steps = {Collective.REDUCESCATTER: n - 1, Collective.ALLREDUCE: 2 * (n - 1)}
    if ring_steps.get(collective, MAX_STEPS + 1) <= MAX_STEPS:
        return 1
    if n <= 64:
        return 2
    steps = n * (2 if collective is Collective.ALLREDUCE else 1)
    return 2 + -(-5 * steps // 256)


def nccl_ring_program(topo: Topology, collective: Collective, *, channels: int,
                      protocol: Protocol = Protocol.SIMPLE) -> Program:
    """NCCL's ring for ``collective`` as a runtime program (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
    channels : int
        Rings (NCCL channels), 1..32.
    protocol : Protocol

    Returns
    -------
    Program

    Raises
    ------
    InfeasibleError
        The rings need more threadblocks than a GPU has: each ring puts at
        least ``N - 1`` steps (``2 (N - 1)`` for an allreduce) on every rank,
        64 per threadblock.  Checked before the ``channels * N^2`` ops are
        built (MI250 x32, 512 ranks: the lowering took 20 minutes and 16 GB
        to find out).
    """
    if not 1 <= channels <= MAX_CHANNELS:
        raise UnsupportedError(f"channels must be in 1..{MAX_CHANNELS}")
    n = topo.num_ranks
    steps = (n - 1) * (2 if collective is Collective.ALLREDUCE else 1)
    need = channels * -(-steps // MAX_STEPS)
    if need > MAX_THREADBLOCKS:
        raise InfeasibleError(
            f"NCCL's ring as a file on {n} ranks: {channels} rings of at least {steps} steps "
            f"per rank take at least {need} threadblocks per GPU ({MAX_STEPS} steps each), "
            f"more than {MAX_THREADBLOCKS}")
    sched = build_ring_schedule(topo.num_ranks, nccl_rings(topo, channels), collective)
    return lower_to_program(sched, LoweringOptions(
        protocol=protocol, name=f"nccl-ring-{topo.name}-{collective.value}"))


__all__ = ["RINGS", "boxes", "nccl_ring_program", "nccl_rings", "nccl_rings_schedule",
           "ring_threadblocks"]
