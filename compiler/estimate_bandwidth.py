"""Bandwidth-only cost of a chunk schedule on a topology.

Every transfer's bytes are routed over its switch path: split over the
schedule's routing witness (``Schedule.routes``, in proportion to the
weights) when it has one for the pair, else the fabric's default path
(``Router``).  The time is the largest link load divided by the link's
bandwidth.  algbw follows
nccl-tests: the collective size M (allgather: output, reducescatter: input,
allreduce: buffer) divided by that time.  With loads counted in units of M,
``algbw = 1 / max_link(load / bandwidth)`` GB/s.

Complexity: O(#transfers * path length).
"""

from __future__ import annotations

from fractions import Fraction

from colc.compiler.route_paths import Router
from colc.ir.chunks import Schedule
from colc.ir.topology import Topology


def link_loads(sched: Schedule, router: Router) -> dict[tuple[str, str], Fraction]:
    """Bytes (in units of the collective size M) crossing each link."""
    traffic: dict[tuple[int, int], int] = {}
    for op in sched.ops:
        if op.is_transfer:
            pair = (op.src.rank, op.dst.rank)
            traffic[pair] = traffic.get(pair, 0) + op.count
    witness = dict(sched.routes)
    loads: dict[tuple[str, str], Fraction] = {}
    for pair, chunks in traffic.items():
        paths = witness.get(pair) or ((router.switch_paths(pair[0])[pair[1]], 1),)
        total = sum(w for _, w in paths)
        for path, weight in paths:
            amount = Fraction(chunks * weight, sched.nchunks * total)
            for edge in zip(path, path[1:], strict=False):
                loads[edge] = loads.get(edge, Fraction(0)) + amount
    return loads


def schedule_algbw(sched: Schedule, topo: Topology, router: Router | None = None) -> Fraction:
    """algbw (GB/s) of ``sched`` under the bandwidth-only model.

    Examples
    --------
    A 2-rank allgather over one 10 GB/s duplex link moves half of M each way:
    algbw = 20 GB/s.
    """
    router = router or Router(topo)
    loads = link_loads(sched, router)
    if not loads:
        return Fraction(0)
    worst = max(load / router.cap[edge] for edge, load in loads.items())
    return 1 / worst


def schedule_steps(sched: Schedule) -> int:
    """Hop count: the most transfers on one dependency chain (latency in hops)."""
    depth = [0] * len(sched.ops)
    for op in sched.ops:
        base = max((depth[d] for d in op.deps), default=0)
        depth[op.op_id] = base + (1 if op.is_transfer else 0)
    return max(depth, default=0)
