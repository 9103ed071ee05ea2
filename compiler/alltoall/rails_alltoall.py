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
   pipeline: large sizes; its own block first, then places ``g - 1, g - 2,
   ...``, while each place gathers for the places above it in turn, so the
   ``k``-th block on every rail is the ``k``-th each place gathered); they
   are the blocks of ranks ``b G .. b G + G - 1``, so they land in one
   contiguous range of the receiver's output;
4. meanwhile sends each box peer ``(b, h)`` its own block (after the
   aggregation, which the network waits for, in program order).

The network carries ``(nb - 1)`` messages per rank instead of ``N - G``,
each ``G`` times larger (fewer per-message latencies, no cross-rail traffic);
the box switch carries the extra hop.  Threadblocks per rank: one for local
copies, ``lanes`` per box peer, ``net_lanes`` per rail peer
(``plan_rails_alltoall`` fits them to the budget).

*Carriers*, when ``nb - 1`` rail peers do not fit the budget (past 25 DGX
boxes at 32 threadblocks): the traffic between boxes ``b`` and ``b'`` crosses
on one rail, that of place ``c = carrier_place(nb, G, 1, d, 0)`` (``d`` the
boxes' distance; both directions share it, so a place sends to the rail
peers it receives from, at most ``rail_peers(nb, G, 1)`` of them: 4 at 32
boxes, 16 at 128).  Rank ``(b, g)`` sends carrier ``(b, c)`` its ``G``
blocks for box ``b'`` in one range (they are contiguous in its input);
the carrier sends each place's range over the rail as it lands (one
dependency per transfer: no waits on several threadblocks); the receiving
carrier ``(b', c)`` hands each block to its rank.  A place carries
``ceil((nb - 1) / G)`` box pairs of ``G^2`` blocks each way, about what the
direct exchange puts on every NIC (``(nb - 1) G`` blocks), and the box switch
carries two extra hops.

Input invariant: a validated ``Topology`` of at least two equal boxes behind
switches, every rank reaching its rail peers (``rails._layout``), ranks of a
box numbered contiguously.
Output invariant: a ``Schedule`` of ``Collective.ALLTOALL`` (deps inferred)
proved out of place; every transfer between ranks joined through switches.

Complexity: O(N (G + nb) cf / piece) ops; with carriers O(N nb G cf / piece).
Seed: the hierarchical schedules of 004 section 5.3, here for all-to-all
(issue 19).
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.compiler.alltoall.direct import MAX_COUNT, pieces, require_alltoall
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import ColcError, InfeasibleError, UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

NAME = "rails"
IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH
#: Lanes (channels) per box peer at most.
MAX_LANES = 4
#: Lanes per box peer at most when blocks cross in pieces of 2 chunks or more:
#: the portfolio then ranks two lane shapes, chunking 1 with as many box lanes
#: as fit (DGX A100 x4, 3; best at 128 MiB) and chunking 2 with 2 (best at 16
#: MiB and 1 GiB: 25.77 and 29.35 GB/s against 25.65 and 29.06 with 3).
#: More lanes per rail peer lost once each aggregator sends its own block
#: first (x4 at 16 MiB, chunking 1: 4 lanes 24.62, 2 lanes 25.65).
HALF_BLOCK_LANES = 2
#: Transfers a carrier plan may put on one threadblock (each direction's
#: sends and receives together, paired): the runtime's 64 steps (each
#: transfer waits on one threadblock at most, so no nops are added).
CARRIER_STEPS = 64
#: Chunks per box transfer through carriers: a paired threadblock sends to a
#: box peer and receives from it in turn, so each transfer fits the smallest
#: FIFO (Simple's 2 calls, one chunk per call in the verifier's case).
FIFO_CHUNKS = 2


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
    carriers : bool
        Box pairs cross on one carrier's rail (see module docstring), else
        every place exchanges with its rail peer in every box.
    """

    groups: tuple[tuple[int, ...], ...]
    lanes: int
    net_lanes: int
    threadblocks: int
    carriers: bool = False


def plan_rails_alltoall(topo: Topology, budget: int, chunks: int = 1,
                        whole: bool = False) -> AlltoallPlan:
    """Lanes per box peer and per rail peer within ``budget`` threadblocks.

    One threadblock serves one send peer and one receive peer: a rank takes
    one for its local copies, one per lane and box peer, one per lane and
    rail peer.  A rail peer gets two lanes while there is one (one network
    connection does not fill a NIC); box peers take what is left, up to
    ``MAX_LANES``.  Through carriers (``chunks`` per block), every lane also
    keeps within a threadblock's 64 steps (``_carrier_transfers``).

    ``whole``: the blocks for a rail peer cross in one message (``chunks``
    None of ``rails_alltoall_schedule``); else with ``chunks`` of 2 or more a
    box peer takes at most ``HALF_BLOCK_LANES``.

    Raises
    ------
    UnsupportedError
        Not boxes behind switches joined by rails.
    InfeasibleError
        Not one lane per peer fits ``budget``; the message names the budget
        that does.  Through carriers, the lanes the steps need do not fit:
        the message names the budget that gives them room (checked from the
        arithmetic, before any op is built: DGX A100 x64's lowering took
        longer than 15 minutes to find out).
    """
    from colc.compiler.hierarchical.rails import RailPlan, _contiguous, _layout, rail_peers

    groups = tuple(map(tuple, _layout(topo)))
    _contiguous(RailPlan(groups, 1, (1, 1), 1, 1, 1))
    nb, size = len(groups), len(groups[0])
    carriers = _through_carriers(nb, size, budget)
    peers = rail_peers(nb, size, 1) if carriers else nb - 1
    need = 1 + (size - 1) + peers
    if need > budget:
        raise InfeasibleError(
            f"rails all-to-all needs at least {need} threadblocks per GPU here ({size - 1} "
            f"box peers and {peers} rail peers{' through carriers' if carriers else ''}), "
            f"more than the budget of {budget}; use --max-threadblocks {need} or more")
    least, net_least = 1, 1
    if carriers:
        box, rail = _carrier_transfers(groups, chunks)
        least, net_least = -(-box // CARRIER_STEPS), -(-rail // CARRIER_STEPS)
        room = 1 + least * (size - 1) + net_least * peers
        if least > MAX_LANES or room > budget:
            hint = (f"a budget of {room} gives its lanes room (--max-threadblocks {room})"
                    if least <= MAX_LANES else "fewer boxes are needed")
            raise InfeasibleError(
                f"rails all-to-all through carriers on {nb} boxes: a box peer's transfers "
                f"({box}) and a rail peer's ({rail}) take {least} and {net_least} "
                f"threadblocks of {CARRIER_STEPS} steps, more than the budget of {budget} "
                f"allows; {hint}")
    # two lanes per rail peer where two per box peer fit beside them: more
    # network transfers in flight hide the network hop's latency and one
    # connection does not fill a NIC
    net_lanes = max(net_least, 2 if 1 + 2 * peers + max(2, least) * (size - 1) <= budget
                    else 1)
    lanes = 1
    if size > 1:
        room = (budget - 1 - peers * net_lanes) // (size - 1)
        lanes = max(least, min(MAX_LANES if whole or chunks < 2 else HALF_BLOCK_LANES, room))
    return AlltoallPlan(groups, lanes, net_lanes,
                        1 + lanes * (size - 1) + net_lanes * peers, carriers)


def uses_carriers(topo: Topology, budget: int) -> bool:
    """Whether the rails all-to-all of ``topo`` within ``budget`` goes through
    carriers, fitting or not (then ``chunks`` None and 1 build the same
    schedule, or are refused alike)."""
    from colc.compiler.hierarchical.rails import _layout

    try:
        groups = _layout(topo)
    except ColcError:
        return False
    return _through_carriers(len(groups), len(groups[0]), budget)


def _through_carriers(nb: int, size: int, budget: int) -> bool:
    """Whether one threadblock per box peer and per rail peer (and one for
    local copies) is more than ``budget``."""
    return 1 + (size - 1) + (nb - 1) > budget


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
    plan = plan_rails_alltoall(topo, budget, chunks or 1, whole=chunks is None)
    groups, cf, whole = plan.groups, chunks or 1, chunks is None
    nb, size = len(groups), len(groups[0])
    if nb < 2:
        raise UnsupportedError("rails need at least two boxes; use --algorithm direct")
    n = topo.num_ranks
    out = _Ops(plan, cf)
    if plan.carriers:
        return _carried(plan, out, n, cf)

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
                # its own first, then the next places up: aggregator h sends
                # place h - k's block k-th (below), which place h - k gathers k-th
                for turn in range(size):
                    h = (g + turn) % size
                    t = members[h]
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
                if whole:
                    ranges = list(pieces(0, size * cf, min(step, MAX_COUNT)))
                else:  # its own block first, then the places below
                    ranges = [(((h - turn) % size) * cf + c, m) for turn in range(size)
                              for c, m in pieces(0, cf)]
                for j, (c, k) in enumerate(ranges):
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


def _carried(plan: AlltoallPlan, out: "_Ops", n: int, cf: int) -> Schedule:
    """The all-to-all through carriers (module docstring): gather at the
    sending carrier, one range per sending place over the rail, hand-off
    block by block at the receiving carrier.  Scratch of a carrier, per box
    it carries: the outgoing then the incoming blocks, both by (sending
    place, destination place).  Every transfer fits ``FIFO_CHUNKS``: paired
    threadblocks exchange in turn (``chunks`` None is one chunk per block)."""
    from colc.compiler.hierarchical.rails import carrier_place

    groups = plan.groups
    nb, size = len(groups), len(groups[0])
    span = size * size * cf  # one box pair's blocks, either way

    def carrier(b: int, b2: int) -> int:
        return carrier_place(nb, size, 1, (b2 - b) % nb, 0)

    def near(b: int, b2: int) -> int:  # the pair's distance, alike from both ends
        d = (b2 - b) % nb
        return min(d, nb - d)

    def ahead(b: int) -> list[int]:  # the other boxes, nearest first going up
        return [(b + d) % nb for d in range(1, nb)]

    # scratch of place c in each box: for each box it carries (in order of
    # distance), the outgoing blocks then the incoming ones, both by (g, h):
    # sending place g's range for the box is contiguous
    carried = [sorted((b2 for b2 in range(nb) if b2 != b and carrier(b, b2) == c),
                      key=lambda b2, b=b: ((b2 - b) % nb, b2))
               for b in range(nb) for c in range(size)]
    slot = {}
    for b in range(nb):
        for c in range(size):
            for k, b2 in enumerate(carried[b * size + c]):
                slot[(b, b2)] = 2 * k * span
    for r in range(n):  # own block
        for c, k in pieces(0, cf):
            out.add(Slot(r, IN, r * cf + c), Slot(r, OUT, r * cf + c), k, 0)
    for b, members in enumerate(groups):  # 1: blocks for other boxes to their carrier
        for b2 in ahead(b):
            t = members[carrier(b, b2)]
            for g, r in enumerate(members):
                out.round = near(b, b2)
                at = slot[(b, b2)] + g * size * cf
                for o, k in pieces(0, size * cf, FIFO_CHUNKS):
                    out.add(Slot(r, IN, groups[b2][0] * cf + o), Slot(t, SCR, at + o), k,
                            0 if t == r else 1)
    for b, members in enumerate(groups):  # 2: over the rail, a range per sending place
        for b2 in ahead(b):
            c = carrier(b, b2)
            src, dst = members[c], groups[b2][c]
            for g in range(size):
                first = g * size * cf
                for j, (o, k) in enumerate(pieces(0, size * cf, FIFO_CHUNKS)):
                    out.round = nb + near(b, b2) * size * size * cf + first + j
                    out.add(Slot(src, SCR, slot[(b, b2)] + first + o),
                            Slot(dst, SCR, slot[(b2, b)] + span + first + o), k, 2)
    base = nb + nb * size * size * cf
    for b2, members in enumerate(groups):  # 3: the receiving carrier hands each block on
        for b in [(b2 - d) % nb for d in range(1, nb)]:
            held = members[carrier(b2, b)]
            for g, source in enumerate(groups[b]):
                for h, t in enumerate(members):
                    at = slot[(b2, b)] + span + (g * size + h) * cf
                    for o, k in pieces(0, cf, FIFO_CHUNKS):
                        out.round = base + near(b, b2)
                        out.add(Slot(held, SCR, at + o), Slot(t, OUT, source * cf + o), k,
                                0 if t == held else 1)
    for members in groups:  # box peers' own blocks, beside the network
        for g, r in enumerate(members):
            for t in members:
                if t != r:
                    for c, k in pieces(0, cf):
                        out.round = base + nb
                        out.add(Slot(r, IN, t * cf + c), Slot(t, OUT, r * cf + c), k, 1)
    scratch = 2 * span * max(len(x) for x in carried)
    sched = Schedule(Collective.ALLTOALL, n, n * cf, scratch, tuple(out.ops),
                     algorithm=NAME, inplace=False, rounds=tuple(out.rounds))
    return infer_dependencies(sched)


def _carrier_transfers(groups: tuple[tuple[int, ...], ...], cf: int) -> tuple[int, int]:
    """Most transfers (sends and receives) between a place and one box peer,
    and between a place and one rail peer, over all their lanes, through
    carriers with ``cf`` chunks per block.  A place carrying ``k`` box pairs
    sends a box peer that carries ``k'`` its ranges for them (``k' ceil(G cf
    / 2)`` transfers) and hands it ``k G ceil(cf / 2)`` blocks, and receives
    as many the other way; a rail peer exchanges ``G^2 cf / 2`` each way
    (DGX A100 x64: 194 with a box peer, 64 with a rail peer)."""
    from colc.compiler.hierarchical.rails import carrier_place

    nb, size = len(groups), len(groups[0])
    pairs = [0] * size
    for d in range(1, nb):
        pairs[carrier_place(nb, size, 1, d, 0)] += 1
    ranges, blocks = -(-size * cf // FIFO_CHUNKS), size * -(-cf // FIFO_CHUNKS)
    box = max((2 * (pairs[x] * ranges + pairs[g] * blocks + 1)
               for g in range(size) for x in range(size) if x != g), default=0)
    return box, 2 * size * ranges


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


__all__ = ["AlltoallPlan", "CARRIER_STEPS", "NAME", "plan_rails_alltoall",
           "rails_alltoall_schedule", "uses_carriers"]
