"""Pass ``direct``: all-to-all with every block sent straight to its rank.

Rank ``r`` sends block ``t`` of its input (chunks ``t cf .. t cf + cf - 1``)
to rank ``t``'s output block ``r``, through the switches; its own block is a
local copy.  Where ``r`` does not reach ``t`` through switches alone (a DGX
GPU and a GPU of another box on the other rail), the block goes through one
relay: a rank of ``r``'s box (else any rank) that reaches ``t``, the one at
``t``'s place when there is one (what NCCL's PXN does: the NVLink peer on
the destination's rail forwards it).  Transfers go out in shifted order
(every rank to ``r + 1`` first, then ``r + 2``, ...), so no rank receives
from everyone at once.  This is what NCCL does for an all-to-all
(point-to-point sends over its channels), written as a file: the baseline
the other all-to-all schedules are judged against.

Input invariant: a validated ``Topology`` in which every rank reaches every
other through switches, directly or through one relay rank (boxes behind
switches, switched clusters); direct-connect fabrics need ``mcf``.
Output invariant: a ``Schedule`` of ``Collective.ALLTOALL`` (deps inferred)
proved out of place by ``check_schedule``.

Complexity: O(N^2 (cf / piece + N)) (the relay search is O(N) per pair).
Seed: none (the vendor's algorithm).
"""

from __future__ import annotations

from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology, boxes, rank_reach

NAME = "direct"
#: Chunks one step may move (the runtime's ``cnt`` limit).
MAX_COUNT = 71


def direct_schedule(topo: Topology, collective: Collective, chunks: int | None = None) -> Schedule:
    """Direct all-to-all (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
        Must be ``ALLTOALL``.
    chunks : int or None
        Chunks per block (default 1).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Another collective, or a pair of ranks not joined through switches.
    """
    require_alltoall(collective, NAME)
    n, cf = topo.num_ranks, chunks or 1
    relay = relays(topo)
    ops: list[Op] = []
    scratch = [0] * n

    def add(src: Slot, dst: Slot, k: int) -> None:
        ops.append(Op(len(ops), OpKind.COPY, src, dst, k))

    for r in range(n):
        for c, k in pieces(0, cf):
            add(Slot(r, Buffer.INPUT, r * cf + c), Slot(r, Buffer.OUTPUT, r * cf + c), k)
    for d in range(1, n):
        for r in range(n):
            t = (r + d) % n
            v = relay.get((r, t))
            at = scratch[v] if v is not None else 0
            if v is not None:
                scratch[v] += cf
            for c, k in pieces(0, cf):
                src = Slot(r, Buffer.INPUT, t * cf + c)
                if v is not None:
                    add(src, Slot(v, Buffer.SCRATCH, at + c), k)
                    src = Slot(v, Buffer.SCRATCH, at + c)
                add(src, Slot(t, Buffer.OUTPUT, r * cf + c), k)
    sched = Schedule(Collective.ALLTOALL, n, n * cf, max(scratch), tuple(ops), algorithm=NAME,
                     inplace=False)
    return infer_dependencies(sched)


def relays(topo: Topology) -> dict[tuple[int, int], int]:
    """The relay of every pair that is not joined through switches alone
    (see module docstring).

    Raises
    ------
    UnsupportedError
        A pair that no single relay joins.
    """
    n = topo.num_ranks
    reach = rank_reach(topo)
    box = {r: i for i, members in enumerate(boxes(topo)) for r in members}
    place = {r: members.index(r) for members in boxes(topo) for r in members}
    out: dict[tuple[int, int], int] = {}
    for a in range(n):
        for b in range(n):
            if a == b or (a, b) in reach:
                continue
            options = [v for v in range(n) if v not in (a, b)
                       and (a, v) in reach and (v, b) in reach]
            if not options:
                hint = ("use --algorithm mcf or --algorithm hop-relay" if not topo.switches else
                        "mcf and hop-relay route only over links between ranks, and this "
                        "fabric has switches too, so no colc all-to-all serves it")
                raise UnsupportedError(
                    f"direct all-to-all needs every pair joined through switches or one "
                    f"relay; {topo.ranks[a]} reaches {topo.ranks[b]} through neither: {hint}")
            out[(a, b)] = min(options, key=lambda v: (box[v] != box[a],
                                                      place[v] != place[b], v))
    return out


def pieces(start: int, length: int, step: int = MAX_COUNT) -> list[tuple[int, int]]:
    """``(first chunk, count)`` of ``length`` chunks from ``start`` in steps of at most ``step``.

    >>> pieces(0, 150)
    [(0, 71), (71, 71), (142, 8)]
    """
    return [(c, min(step, start + length - c)) for c in range(start, start + length, step)]


def require_alltoall(collective: Collective, name: str) -> None:
    """Refuse a collective other than all-to-all for the generator ``name``."""
    if collective is not Collective.ALLTOALL:
        raise UnsupportedError(f"{name} builds all-to-all only, not {collective.value}")


__all__ = ["NAME", "direct_schedule", "pieces", "relays", "require_alltoall"]
