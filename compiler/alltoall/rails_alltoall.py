"""Pass ``rails`` for all-to-all: aggregate inside the box, one message per box on the rail.

Boxes of ``G`` ranks behind a box switch joined by rails (rank ``(b, g)``
reaches ``(b', g)`` of every box; see ``colc.compiler.hierarchical.rails``).  Rank
``(b, g)``:

1. copies its own block and sends each box peer ``(b, h)`` its block;
2. sends box peer ``(b, h)`` the blocks it has for ``(b', h)`` in every other
   box ``b'``, into ``(b, h)``'s scratch, grouped by destination box and
   ordered by sending place (and copies its own blocks for ``(b', g)`` there);
3. sends, for every other box ``b'``, the ``G`` blocks of box ``b`` gathered
   for ``(b', g)`` over its rail, in one message (the fewest network
   messages: small sizes) or block by block as they are gathered (they
   pipeline: large sizes); they are the blocks of ranks ``b G .. b G + G -
   1``, so they land in one contiguous range of the receiver's output;
4. meanwhile sends each box peer ``(b, h)`` its own block (after the
   aggregation, which the network waits for, in program order).

The network carries ``(nb - 1)`` messages per rank instead of ``N - G``,
each ``G`` times larger (fewer per-message latencies, no cross-rail traffic);
the box switch carries the extra hop.  Threadblocks per rank: one for local
copies, ``lanes`` per box peer, ``net_lanes`` per rail peer
(``plan_rails_alltoall`` fits them to the budget).

Input invariant: a validated ``Topology`` of at least two equal boxes behind
switches, every rank reaching its rail peers (``rails._layout``), ranks of a
box numbered contiguously.
Output invariant: a ``Schedule`` of ``Collective.ALLTOALL`` (deps inferred)
proved out of place; every transfer between ranks joined through switches.

Complexity: O(N (G + nb) cf / piece) ops.  Seed: the hierarchical
schedules of 004 section 5.3, here for all-to-all (issue 19).
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.compiler.alltoall.direct import MAX_COUNT, pieces, require_alltoall
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import InfeasibleError, UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

NAME = "rails"
IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH
#: Lanes (channels) per box peer at most.
MAX_LANES = 4


@dataclass(frozen=True, slots=True)
class AlltoallPlan:
    """Layout of one rails all-to-all.

    Attributes
    ----------
    groups : tuple of tuple of int
        Ranks of each box, by place.
    lanes : int
        Channels per box peer.
    net_lanes : int
        Channels per rail peer.
    threadblocks : int
        Threadblocks per rank the lowering takes.
    """

    groups: tuple[tuple[int, ...], ...]
    lanes: int
    net_lanes: int
    threadblocks: int


def plan_rails_alltoall(topo: Topology, budget: int) -> AlltoallPlan:
    """Lanes per box peer and per rail peer within ``budget`` threadblocks.

    One threadblock serves one send peer and one receive peer: a rank takes
    one for its local copies, one per lane and box peer, one per lane and
    rail peer.  A rail peer gets two lanes while there is one (one network
    connection does not fill a NIC); box peers take what is left, up to
    ``MAX_LANES``.

    Raises
    ------
    UnsupportedError
        Not boxes behind switches joined by rails.
    InfeasibleError
        Not one lane per peer fits ``budget``; the message names the budget
        that does.
    """
    from colc.compiler.hierarchical.rails import _contiguous, _layout, RailPlan

    groups = tuple(map(tuple, _layout(topo)))
    _contiguous(RailPlan(groups, 1, (1, 1), 1, 1, 1))
    nb, size = len(groups), len(groups[0])
    need = 1 + (size - 1) + (nb - 1)
    if need > budget:
        raise InfeasibleError(
            f"rails all-to-all needs at least {need} threadblocks per GPU here ({size - 1} "
            f"box peers and {nb - 1} rail peers), more than the budget of {budget}; use "
            f"--max-threadblocks {need} or more")
    # two lanes per rail peer where two per box peer fit beside them: more
    # network transfers in flight hide the network hop's latency (DGX A100 x4
    # at 16 MiB) and one connection does not fill a NIC
    net_lanes = 2 if 1 + 2 * (nb - 1) + 2 * (size - 1) <= budget else 1
    lanes = 1
    if size > 1:
        room = (budget - 1 - (nb - 1) * net_lanes) // (size - 1)
        lanes = max(1, min(MAX_LANES, room))
    return AlltoallPlan(groups, lanes, net_lanes,
                        1 + lanes * (size - 1) + net_lanes * (nb - 1))


def rails_alltoall_schedule(topo: Topology, collective: Collective, chunks: int | None = None,
                            budget: int = 32) -> Schedule:
    """Rail-aligned hierarchical all-to-all (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
        Must be ``ALLTOALL``.
    chunks : int or None
        None: one chunk per block and one network message per (rail peer,
        box), the fewest messages (small sizes); a number: that many chunks
        per block and one network message per block, sent as soon as it is
        gathered (the pieces pipeline: large sizes).
    budget : int
        Threadblocks per rank.

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError, InfeasibleError
        As ``plan_rails_alltoall``.
    """
    require_alltoall(collective, "rails all-to-all")
    plan = plan_rails_alltoall(topo, budget)
    groups, cf, whole = plan.groups, chunks or 1, chunks is None
    nb, size = len(groups), len(groups[0])
    if nb < 2:
        raise UnsupportedError("rails need at least two boxes; use --algorithm direct")
    n = topo.num_ranks
    out = _Ops(plan, cf)

    def agg(b_here: int, b_remote: int, place: int) -> int:
        """Scratch chunk, on an aggregating rank of box ``b_here``, of the block for
        box ``b_remote`` sent by ``place``: other boxes in order, places within."""
        slot = b_remote if b_remote < b_here else b_remote - 1
        return (slot * size + place) * cf

    for r in range(n):  # own block
        for c, k in pieces(0, cf):
            out.add(Slot(r, IN, r * cf + c), Slot(r, OUT, r * cf + c), k, 0)
    for b_here, members in enumerate(groups):  # 2: blocks for other boxes, by rail
        for g, r in enumerate(members):
            for b2 in sorted(range(nb), key=lambda x: (x - b_here) % nb)[1:]:
                for h, t in enumerate(members):
                    dest = groups[b2][h]
                    for c, k in pieces(0, cf):
                        out.round = (b2 - b_here) % nb
                        out.add(Slot(r, IN, dest * cf + c), Slot(t, SCR, agg(b_here, b2, g) + c),
                                k, 0 if t == r else 1)
    # 3: over the rails, the whole gathered range at once, or place by place
    # (each block as soon as it is gathered: the pieces pipeline)
    step = size * cf if whole else cf
    for b_here, members in enumerate(groups):
        for h, t in enumerate(members):
            for d in range(1, nb):
                b2 = (b_here + d) % nb
                dest = groups[b2][h]
                first = members[0] * cf
                for j, (c, k) in enumerate(pieces(0, size * cf, min(step, MAX_COUNT))):
                    out.round = nb + j  # the two directions of a rail alternate
                    out.add(Slot(t, SCR, agg(b_here, b2, 0) + c), Slot(dest, OUT, first + c), k,
                            2)
    for b_here, members in enumerate(groups):  # 1: box peers' own blocks, beside the network
        for g, r in enumerate(members):
            for h, t in enumerate(members):
                if t != r:
                    for c, k in pieces(0, cf):
                        out.round = nb + size * cf
                        out.add(Slot(r, IN, t * cf + c), Slot(t, OUT, r * cf + c), k, 1)
    sched = Schedule(Collective.ALLTOALL, n, n * cf, (nb - 1) * size * cf, tuple(out.ops),
                     algorithm=NAME, inplace=False, rounds=tuple(out.rounds))
    return infer_dependencies(sched)


class _Ops:
    """Ops in program order with lanes dealt round robin per (pair, class)."""

    def __init__(self, plan: AlltoallPlan, cf: int) -> None:
        self.plan = plan
        self.ops: list[Op] = []
        self.rounds: list[int] = []
        self.round = 0  # ``Schedule.rounds`` of the ops being added
        self.turn: dict[tuple[int, int], int] = {}

    def add(self, src: Slot, dst: Slot, count: int, cls: int) -> None:
        """``cls``: 0 local, 1 box peer, 2 rail peer."""
        ch = 0
        if cls:
            key = (src.rank, dst.rank)
            k = self.turn.get(key, 0)
            self.turn[key] = k + 1
            ch = k % self.plan.lanes if cls == 1 else self.plan.lanes + k % self.plan.net_lanes
        self.ops.append(Op(len(self.ops), OpKind.COPY, src, dst, count, None, (), ch))
        self.rounds.append(self.round)


__all__ = ["AlltoallPlan", "NAME", "plan_rails_alltoall", "rails_alltoall_schedule"]
