"""rails' plan: segments, carriers, lanes and pieces within the threadblock budget.

Input: a topology of equal boxes (``layout._layout``), chunks per shard,
the budget and the phases (an allreduce plans for both).  Output: a
``RailPlan`` (frozen): segments per block ``S``, the carrier of each
segment and distance (``carrier_place``, every NIC the same share, a few
distances spread one shard per place, ``RailPlan.spread``), lanes per box
peer, network lanes, the piece size that keeps every lane within 64 steps
and the programs within the runtime's FIFO (``fifo_problem``).  Searches
O(segment choices x lane choices) plans of O(nb S) carriers each.  Seed 004
sections 5.3 and 4.5.
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.compiler.hierarchical.rails.layout import _layout, _meshed, box_trees
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

from colc.errors import InfeasibleError, UnsupportedError

IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH
#: Chunks one step may move (the runtime's ``cnt`` limit).
MAX_COUNT = 71
#: Transfers one lane carries per peer and direction: with the receives and
#: the nops of their dependencies a threadblock stays within 64 steps.
STEPS_PER_LANE = 24
#: Ranks above which an allreduce plans its pieces for both phases (DGX A100
#: x128: planned as one phase, the lowering split its threadblocks, 55 per
#: GPU; below, the phases fit as planned and larger pieces would cost the
#: Simple files their FIFO room).
PHASE_RANKS = 256
#: Transfers a paired lane takes per peer and direction when a send and its
#: receive are its only steps (64 steps, no nops).  Past ``PHASE_RANKS``, a
#: Simple allreduce plans each phase for half of this rather than of
#: ``STEPS_PER_LANE`` (``plan_rails``' ``fine``): the finest pieces whose steps
#: still fit (DGX A100 x64, one chunk per shard: pieces of 2 chunks, 64 steps
#: on a relay lane, 1 GiB 55.4 -> 66.5 GB/s; with 4 chunks Simple's FIFO of
#: 2 calls refused the file; at x128 the cap leaves pieces of 8).  LL and
#: LL128 keep the coarser pieces, which lead at small sizes (x64: 7.5 against
#: 5.6 GB/s at 1 MiB, LL; 33.6 against 27.5 at 16 MiB, LL128).
PAIRED_LANE_TRANSFERS = 32
#: Transfers per lane, peer, direction and phase of an allreduce on three
#: boxes or more up to ``PHASE_RANKS`` ranks with a segment per place, whose
#: own shards and relays share every lane (so does a reduce-scatter's there,
#: within ``STEPS_PER_LANE``): both phases of a paired lane within 64 steps.
#: Split (1 own lane and 2 relay lanes per box peer) the relay lanes carried
#: ``nb - 1`` times the own one's data with twice its lanes: on DGX A100 x8
#: (1 GiB, 8 chunks per shard) they were busy 8.5 of 12.8 ms and the own
#: lanes 2.8; shared, every lane 7.2-7.8 of 12.4.  With
#: the pieces planned for both phases, 16 chunks per shard on x4 (one loop
#: iteration at 1 GiB) fit the budget, where they took 49 threadblocks.
#: Simulated at 128 MiB / 1 GiB: x4 88.9 / 99.3 -> 94.9 / 102.8 GB/s (29
#: threadblocks), x8 76.1 / 83.8 -> 80.4 / 86.9 (30); LL and LL128 gain
#: too (x8 at 16 MiB, 4 chunks: LL 27.6 -> 33.3, LL128 43.7 -> 51.0), and
#: so does the reduce-scatter (x4 portfolio at 1M / 16M / 128M: 18.3 / 86.3
#: / 166.4 -> 19.2 / 89.6 / 171.8; x8 16.5 / 80.0 -> 16.7 / 84.9 at 1M /
#: 16M).  Not the allgather, whose own shards would go first on every lane
#: (x4 at 128 MiB, 4 chunks, Simple: 149.8 -> 141.5).  Only with a segment
#: per place: on x16 (4 segments, carriers in turn) shared lanes lost (2
#: chunks per shard, 1 GiB: allreduce 76.5 -> 64.7, reduce-scatter 162.0 ->
#: 146.9).
SHARED_PHASE_TRANSFERS = 16
#: Boxes up to which shared lanes are planned (measured on 3 to 8; more
#: boxes take a segment per place only above the default budget).
SHARED_BOXES = 8
#: The same from this many ranks on boxes without a switch, where relays along
#: the box's trees put more steps on a lane (MI250 x16, 256 ranks, planned as
#: one phase: relay lanes of about 70 steps, split by the lowering, 60
#: threadblocks per GPU against 31 planned; x8 fits as planned).
MESH_PHASE_RANKS = 256
#: Channels the runtime has.
MAX_CHANNELS = 32
#: Lanes per box peer at most: beyond that the box link, not the
#: threadblocks, bounds a lane (A100: 2 lanes already carry 40 GB/s per peer).
MAX_LANES = 4
#: Chains a carrier's sum of its box's inputs is split into at most (their
#: results combined on a threadblock of their own, ``SUM_CHANNEL``): one
#: chain of ``G - 1`` received reductions keeps the NIC idle until the first
#: piece has passed every box peer (DGX A100 x4 reduce-scatter at 1 GiB: the
#: NIC started after 422 us of a 5.6 ms call; simulated 192.2 GB/s with one
#: chain, 198.6 with two, 199.6 with three, 201.9 with four of two inputs;
#: seven plain receives, all reduced on the combining threadblock: 109.5).
SUM_CHAINS = 4
#: Steps the combining threadblock may take (a combine waits on two chains:
#: a nop and a reduce; each further one, a reduce).
SUM_STEPS = 60
#: Distances ``c`` whose segments may be spread at most, one shard per place,
#: to even out the places' network loads (``_spread_choice``).
MAX_SPREAD = 3


@dataclass(frozen=True, slots=True)
class RailPlan:
    """How one rails schedule is laid out.

    Attributes
    ----------
    groups : tuple of tuple of int
        Ranks of each box, by place.
    segments : int
        ``S``: segments per block (a divisor of the box size).
    lanes : tuple of int
        Channels per box peer for a rank's own shard (or its inputs) and for
        the data it relays for its rail: separate lanes, so a send of own data
        never waits behind a relay that waits for the network; ``(0, n)``
        where both share every lane (``_split_lanes``).
    net_lanes : int
        Channels per rail pair (2 when a rank has one rail peer: one network
        connection does not fill a NIC).
    piece : int
        Chunks per transfer (at most ``MAX_COUNT``).
    threadblocks : int
        Threadblocks per rank the lowering will take (the most of any rank).
    split_net : bool
        Network sends and receives on separate threadblocks (a channel per
        sending box), else paired.
    trees : tuple of tuple of (int, int)
        Per place ``g``, the edges ``(parent, child)`` (places, top-down) of
        the tree that spreads what ``g`` holds over its box: a star behind a
        box switch, a spanning tree of the box's links otherwise (``box_trees``).
        Empty: stars.
    link_lanes : tuple of ((int, int), int)
        Relay lanes of each box link ``(place, place)`` when the box has no
        switch: in proportion to the trees on the link (``_link_lanes``);
        empty: ``lanes[1]`` for every box peer.
    sum_chains : int
        Reduce-scatter and allreduce: chains a carrier's sum of its box's
        inputs is split into (``_carrier_sum``); above 1 they are combined on
        one more threadblock, counted in ``threadblocks``.
    spread : tuple of int
        Distances ``c = min(d, nb - d)`` whose blocks cross as one shard per
        place (carried by the shard's owner) instead of in ``segments``
        segments, so that every place's NIC carries the same share
        (``_spread_choice``); the other distances take the carriers in turn.
    sum_tbs : int
        Combining threadblocks of the split sums (local channel hints from
        ``SUM_CHANNEL``, a carrier's sums dealt round robin), counted in
        ``threadblocks`` (``_lead_plan``: 2 where that makes room for lead
        pieces).
    unpaired : bool
        Planned for an unpaired lowering (a send and a receive threadblock
        per lane, within about twice the planned threadblocks): on two boxes
        own and relayed data share the lanes (``_split_lanes``), and a
        reduce-scatter's owner sums follow the carriers' sums ``LEAD`` pieces
        behind (``_interleave``).
    """

    groups: tuple[tuple[int, ...], ...]
    segments: int
    lanes: tuple[int, int]
    net_lanes: int
    piece: int
    threadblocks: int
    split_net: bool = False
    trees: tuple[tuple[tuple[int, int], ...], ...] = ()
    link_lanes: tuple[tuple[tuple[int, int], int], ...] = ()
    sum_chains: int = 1
    spread: tuple[int, ...] = ()
    unpaired: bool = False
    sum_tbs: int = 1

    @property
    def width(self) -> int:
        """Relay channels: ``lanes[1]``, or the most any box link takes."""
        return max((n for _, n in self.link_lanes), default=self.lanes[1])

    def tree(self, g: int) -> tuple[tuple[int, int], ...]:
        """Edges (places, top-down) of the tree from place ``g`` over its box."""
        if self.trees:
            return self.trees[g]
        return tuple((g, h) for h in range(self.size) if h != g)

    @property
    def size(self) -> int:
        """``G``: ranks per box."""
        return len(self.groups[0])

    def carrier(self, d: int, j: int) -> int:
        """Place carrying segment ``j`` of a block to the box ``d`` boxes further."""
        return _carrier(len(self.groups), self.size, self.segments, self.spread, d, j)

    def segments_at(self, d: int) -> int:
        """Segments of a block crossing ``d`` boxes (``size`` where spread)."""
        return _segments_at(len(self.groups), self.size, self.segments, self.spread, d)


def carrier_place(nb: int, size: int, segments: int, d: int, j: int) -> int:
    """Place carrying segment ``j`` of a block ``d`` boxes further: distances
    ``d`` and ``nb - d`` share their carriers, so a place sends to the rail
    peers it receives from, and the lowering pairs each send with the receive
    from the same peer (two sides exchanging, never a cycle of boxes waiting
    on each other: DGX A100 x128 deadlocked with ``(d - 1) S + j``).

    >>> [carrier_place(128, 8, 1, d, 0) for d in (1, 127, 2, 126, 9, 64)]
    [0, 0, 1, 1, 0, 7]
    >>> {carrier_place(2, 8, 8, 1, j) for j in range(8)} == set(range(8))
    True
    """
    return ((min(d, nb - d) - 1) * segments + j) % size


def _segments_at(nb: int, size: int, segments: int, spread: tuple[int, ...], d: int) -> int:
    return size if min(d, nb - d) in spread else segments


def _carrier(nb: int, size: int, segments: int, spread: tuple[int, ...], d: int,
             j: int) -> int:
    """``carrier_place`` with the distances in ``spread`` carried by the
    shard's owner and the others taking the carriers in turn among themselves
    (``d`` and ``nb - d`` still share theirs)."""
    if not spread:
        return carrier_place(nb, size, segments, d, j)
    c = min(d, nb - d)
    if c in spread:
        return j
    turn = c - 1 - sum(1 for x in spread if x < c)
    return (turn * segments + j) % size


def _carried(nb: int, size: int, segments: int,
             spread: tuple[int, ...]) -> list[list[tuple[int, int]]]:
    """Per place, ``(d, shards)`` of every segment it carries to one side."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(size)]
    for d in range(1, nb):
        s = _segments_at(nb, size, segments, spread, d)
        for j in range(s):
            out[_carrier(nb, size, segments, spread, d, j)].append((d, size // s))
    return out


def _carrier_load(nb: int, size: int, segments: int,
                  spread: tuple[int, ...]) -> tuple[int, int]:
    """Most shards one place carries across the network (each way), and most
    rail peers of one place."""
    carried = _carried(nb, size, segments, spread)
    return (max(sum(w for _, w in x) for x in carried),
            max(len({d for d, _ in x}) for x in carried))


def _spread_choice(nb: int, size: int, segments: int, extra_peers: int) -> tuple[int, ...]:
    """Distances to spread (``RailPlan.spread``): the fewest shards on the
    busiest place's NIC, then the fewest rail peers, within ``extra_peers``
    more than without; up to ``MAX_SPREAD`` of the farthest distances, and
    ``nb / 2`` (one crossing, not two).  Carried in turn, ``(nb-1) S``
    segments do not always fall evenly on ``G`` places: DGX A100 x16 at 4
    segments put 8 on places 0-3 and 7 on places 4-7 (16 shards against an
    even 15; spreading 7 and 8 gives every place 15).

    >>> _spread_choice(16, 8, 4, 1), _spread_choice(16, 8, 4, 0), _spread_choice(4, 8, 8, 9)
    ((7, 8), (), ())
    """
    if segments >= size or nb < 3:
        return ()
    half = nb // 2
    load, peers = _carrier_load(nb, size, segments, ())
    best = (load, peers, ())
    twos = [c for c in range(half, 0, -1) if 2 * c != nb]
    for middle in ((False, True) if nb % 2 == 0 else (False,)):
        for k in range(min(MAX_SPREAD, len(twos)) + 1):
            spread = tuple(sorted(twos[:k] + ([half] if middle else [])))
            if not spread:
                continue
            got = _carrier_load(nb, size, segments, spread)
            if got[1] <= peers + extra_peers and got < best[:2]:
                best = (*got, spread)
    return best[2]


def rail_peers(nb: int, size: int, segments: int) -> int:
    """Most rail peers (each way) of one place: boxes whose segments it carries.

    Examples
    --------
    >>> rail_peers(2, 8, 8), rail_peers(128, 8, 1), rail_peers(16, 8, 8)
    (1, 16, 15)
    """
    return _carrier_load(nb, size, segments, ())[1]


def plan_rails(topo: Topology, cf: int, budget: int, phases: int = 1,
               reduces: bool = False, unpaired: bool = False, fine: bool = False) -> RailPlan:
    """Segments, lanes and piece size of a rails schedule (see module docstring).

    Parameters
    ----------
    topo : Topology
    cf : int
        Chunks per shard.
    budget : int
        Threadblocks per rank.
    phases : int
        2 for an allreduce (reduce-scatter and allgather on the same lanes):
        past ``PHASE_RANKS`` ranks, or with shared lanes, its pieces keep
        both phases within a threadblock's 64 steps.
    reduces : bool
        Reduce-scatter or allreduce: behind a box switch, a threadblock is
        kept for the carriers' split sums (``RailPlan.sum_chains``), and on
        3 to ``SHARED_BOXES`` boxes up to ``PHASE_RANKS`` ranks with a
        segment per place own shards and relays share every lane.
    unpaired : bool
        For an unpaired lowering (``RailPlan.unpaired``).
    fine : bool
        Past ``PHASE_RANKS`` ranks behind box switches, plan both phases for
        ``PAIRED_LANE_TRANSFERS`` rather than ``STEPS_PER_LANE`` (Simple
        allreduce files: finer pieces, no room for nops).

    Returns
    -------
    RailPlan

    Raises
    ------
    UnsupportedError
        The topology is not boxes behind switches joined by rails.
    InfeasibleError
        Not even one lane per box peer fits ``budget`` (the message names the
        smallest budget that works), or no piece size keeps a threadblock
        within 64 steps.
    """
    groups = _layout(topo, mesh=True)
    nb, size = len(groups), len(groups[0])
    trees = box_trees(topo, groups) if size > 1 and _meshed(topo, groups[0]) else ()
    peers = _box_peers(trees, size)
    # Boxes without a switch are lowered decoupled (a send and a receive
    # threadblock per lane: relays along trees wait less; MI250 x8 allgather
    # at 1 GiB 74.8 GB/s with 29 threadblocks against 53.6 paired with 31).
    cost = 2 if trees else 1
    best = None
    options = []
    for s in sorted((s for s in range(1, size + 1) if size % s == 0), reverse=True):
        n_net = rail_peers(nb, size, s)
        net_lanes = 2 if n_net == 1 else 1
        # A rank's network sends and receives go on separate threadblocks where
        # the channels allow (a channel per sending box): paired with different
        # peers they stop and wait (DGX A100 x4 allgather: NICs 80% busy).
        for split in ((2, 1) if n_net > 1 and nb + 2 * MAX_LANES <= MAX_CHANNELS else (1,)):
            fixed = 1 + max(split, cost) * net_lanes * n_net
            total = min(2 * MAX_LANES, (budget - fixed) // max(1, cost * peers))
            need = fixed + 2 * cost * peers
            if best is None or need < best[0]:
                best = (need, s)
            if total >= 2:
                options.append((s, split, net_lanes, fixed, total))
    # Beyond two boxes the relays want two lanes per peer besides the own one.
    want = 2 if nb == 2 else 3
    # Most segments first (fewer make the carriers wait for their box: DGX A100
    # x8 allgather at 1 GiB, S=4 unpaired 147.6 GB/s, S=8 paired 168.6).
    # Where a lane would take too many steps (trees in a box put several on one
    # link: MI250 x16 at 16 segments), fewer segments make longer pieces.
    ordered = [o for o in options if o[4] >= want] + [o for o in options if o[4] < want]
    # Decoupled (boxes without a switch), a threadblock sends or receives: the
    # steps of both directions are its own.
    both = nb * size > PHASE_RANKS or (trees and nb * size >= MESH_PHASE_RANKS)
    full = fine and phases > 1 and both and not trees
    steps = (PAIRED_LANE_TRANSFERS if full else STEPS_PER_LANE) * cost // (
        phases if both else 1)
    # a reduce-scatter or allreduce with a segment per place shares its lanes
    mixed = reduces and not both and not trees and 2 < nb <= SHARED_BOXES
    too_long = None
    for s, split, net_lanes, fixed, total in ordered:
        shared = mixed and s == size
        lanes = _split_lanes(total, nb, unpaired or shared or (
            nb == 2 and total % 2 == 1 and not (reduces and phases == 1)))
        # two boxes split an odd total evenly (reduce-scatter: the odd lane unused) or share it
        weighted, per_lane, used = (), (1, 1), fixed + cost * sum(lanes) * peers
        if trees:  # relay lanes where the trees are
            spare = budget - fixed - cost * lanes[0] * peers
            weighted, per_lane, used = _link_lanes(trees, spare // cost, lanes[0])
            used = fixed + cost * used
            if used > budget:  # not even a lane per link's trees fits
                continue
        # Spare threadblocks first even out the NICs (a rail peer more costs a
        # network lane), then combine the carriers' split sums.
        spread = () if trees else _spread_choice(nb, size, s, (budget - used) // (
            split * net_lanes))
        if spread:
            used += (_carrier_load(nb, size, s, spread)[1] - rail_peers(nb, size, s)) * (
                split * net_lanes)
        try:
            piece = _piece(cf, size, nb, s, (lanes[0], 1) if weighted else lanes,
                           SHARED_PHASE_TRANSFERS if shared and phases > 1 else steps,
                           per_lane, spread)
        except InfeasibleError as err:
            too_long = too_long or err
            continue
        sums = (_fitting_chains(size, nb, s, cf, piece, spread)
                if reduces and not trees and used < budget else 1)
        return RailPlan(tuple(map(tuple, groups)), s, lanes, net_lanes, piece,
                        used + (sums > 1), split == 2, trees, weighted, sums, spread,
                        unpaired)
    if too_long is not None:
        raise too_long
    raise InfeasibleError(
        f"rails needs at least {best[0]} threadblocks per GPU here ({peers} box peers "
        f"and the rail peers of {best[1]} segment(s) per box), more than the budget of "
        f"{budget}; use --max-threadblocks {best[0]} or more")


def fifo_problem(topo: Topology, collective: Collective, chunks: int | None, budget: int,
                 depth: int, simple: bool = False) -> str | None:
    """Why a rails file for a FIFO of ``depth`` calls would hang, or None.

    Paired threadblocks alternate a send to a peer with the receive from it;
    in the verifier's case (one call per chunk) a piece longer than the FIFO
    blocks both sides, and the unpaired lowering takes up to twice the
    planned threadblocks: when that is over the budget, no lowering is left.
    ``simple``: for the form of Simple files (``rails_schedule``).  Checked
    before lowering (DGX A100 x128: a Simple lowering, its hang check and
    the unpaired attempt cost over a minute to learn this).

    >>> from colc.frontends.families import dgx_a100
    >>> fifo_problem(dgx_a100(2), Collective.ALLGATHER, 8, 32, 2) is None
    True
    >>> fifo_problem(dgx_a100(128), Collective.ALLGATHER, 1, 32, 2)[:40]
    'rails: pieces of 4 chunks (one call each'
    """
    plan = plan_rails(topo, chunks or 8, budget, 2 if collective is Collective.ALLREDUCE else 1,
                      collective is not Collective.ALLGATHER, fine=simple)
    if plan.piece <= depth or 2 * plan.threadblocks <= budget or plan.trees:  # trees: decoupled
        return None
    return (f"rails: pieces of {plan.piece} chunks (one call each in the verifier's case) "
            f"exceed the protocol's FIFO of {depth} calls; paired exchanges would hang")


def _split_lanes(total: int, nb: int, shared: bool = False) -> tuple[int, int]:
    """Lanes per box peer for own data and for relayed data: a rank relays
    ``nb - 1`` times what it sends of its own, so the relay lanes get that
    share; two boxes split evenly (an odd split, simulated, is slower than
    the even one below it: DGX A100 x2 allgather at 1 GiB, (1, 2) lanes
    211 GB/s, (1, 1) 224), or, ``shared``, put both on every lane (the
    program order then says which goes first).  ``plan_rails`` shares them
    when unpaired (``_interleave``) and, on two boxes, an odd total but for
    reduce-scatter: DGX A100 x2 at budget 25, three lanes shared against
    (1, 1) with the odd lane unused, allgather 201.5 / 252.3 GB/s at 128M /
    1G against 176.7 / 223.6, allreduce 104.2 / 121.5 against 94.4 / 108.5;
    reduce-scatter 154.9 / 217.5 against 167.9 / 213.5; and a
    reduce-scatter's or allreduce's from three boxes with a segment per
    place (``SHARED_PHASE_TRANSFERS``).

    >>> _split_lanes(4, 2), _split_lanes(3, 2), _split_lanes(4, 4), _split_lanes(3, 8)
    ((2, 2), (1, 1), (1, 3), (1, 2))
    >>> _split_lanes(2, 128), _split_lanes(2, 2, shared=True), _split_lanes(3, 2, shared=True)
    ((0, 2), (0, 2), (0, 3))
    >>> _split_lanes(3, 8, shared=True)  # DGX x8 reduce-scatter or allreduce
    (0, 3)
    """
    if shared:
        return (0, total)
    if nb == 2:
        return (total // 2, total // 2)
    if total < 3:  # one class: the own shard is a small share here
        return (0, total)
    own = max(1, round(total / nb))
    return (own, total - own)


def _box_peers(trees: tuple, size: int) -> int:
    """Box peers a place exchanges with at most: ``G - 1`` for stars.

    >>> _box_peers((((0, 1), (1, 2)), ((1, 0), (1, 2)), ((2, 1), (1, 0))), 3)
    2
    """
    near: dict[int, set[int]] = {}
    for edges in trees:
        for u, v in edges:
            near.setdefault(u, set()).add(v)
            near.setdefault(v, set()).add(u)
    return max(map(len, near.values())) if near else size - 1


def _link_lanes(trees: tuple, spare: int, own: int) -> tuple[tuple, tuple[int, int], int]:
    """Relay lanes per box link in proportion to its trees: the fewest trees per
    lane ``t`` for which no place's links take more than ``spare`` relay lanes
    (``ceil(trees / t)`` each, both directions alike, at most
    ``2 * MAX_LANES - own``); the last ``t`` tried when none fits.

    Returns
    -------
    tuple
        ``(((u, v), lanes), ...)``; ``(trees per own lane, trees per relay
        lane)`` at most; the own and relay lanes a place takes at most.

    >>> _link_lanes((((0, 1), (1, 2)), ((1, 0), (1, 2)), ((2, 1), (1, 0))), 4, 1)[1:]
    ((2, 1), 6)
    """
    count: dict[tuple[int, int], int] = {}
    for edges in trees:
        for u, v in edges:
            count[(u, v)] = count.get((u, v), 0) + 1
    load = {(u, v): max(n, count.get((v, u), 0)) for (u, v), n in count.items()}
    load.update({(v, u): n for (u, v), n in load.items()})
    cap = max(1, 2 * MAX_LANES - own)
    top = max(load.values())
    for t in range(1, top + 1):
        lanes = {e: min(cap, -(-n // t)) for e, n in load.items()}
        relay: dict[int, int] = {}
        for (u, _), n in lanes.items():
            relay[u] = relay.get(u, 0) + n
        if max(relay.values()) <= spare or t == top:
            _fill(lanes, load, relay, spare, cap)
            taken = {u: n + own * sum(1 for (a, _) in lanes if a == u) for u, n in relay.items()}
            per_lane = max(-(-n // lanes[e]) for e, n in load.items())
            return tuple(sorted(lanes.items())), (top, per_lane), max(taken.values())
    raise AssertionError("unreachable: t == top returns")


def _fill(lanes: dict, load: dict, relay: dict, spare: int, cap: int) -> None:
    """Give the links with the most trees per lane one more lane (both
    directions) while both ends stay within ``spare`` relay lanes."""
    while True:
        fits = [(-load[(u, v)] / lanes[(u, v)], u, v) for (u, v) in lanes
                if u < v and lanes[(u, v)] < cap
                and relay[u] < spare and relay[v] < spare]
        if not fits:
            return
        _, u, v = min(fits)
        for a, b in ((u, v), (v, u)):
            lanes[(a, b)] += 1
            relay[a] += 1


def _piece(cf: int, size: int, nb: int, segments: int, lanes: tuple[int, int],
           steps: int = STEPS_PER_LANE, uses: tuple[int, int] = (1, 1),
           spread: tuple[int, ...] = ()) -> int:
    """Piece size: a divisor of ``cf`` or a multiple of it (so pieces of a
    segment and of a shard line up), the smallest that keeps every lane within
    ``STEPS_PER_LANE`` transfers per peer and direction (``uses``: the trees
    one own lane and one relay lane serve at most)."""
    per_lane = 0
    for piece in (p for p in _piece_options(cf, size, segments) if p <= MAX_COUNT):
        per_lane = _lane_transfers(cf, size, nb, segments, lanes, piece, uses, spread)
        if per_lane <= steps:
            return piece
    raise InfeasibleError(
        f"rails: {cf} chunks per shard need more than 64 steps per threadblock "
        f"({per_lane} transfers per lane); use fewer chunks per shard")


def _piece_options(cf: int, size: int, segments: int) -> list[int]:
    """Piece sizes that line up with the pieces of a segment and of a shard."""
    return sorted({d for d in range(1, cf + 1) if cf % d == 0}
                  | {cf * m for m in range(1, size // segments + 1)
                     if (size // segments) % m == 0})


def _lane_transfers(cf: int, size: int, nb: int, segments: int, lanes: tuple[int, int],
                    piece: int, uses: tuple[int, int] = (1, 1),
                    spread: tuple[int, ...] = ()) -> int:
    """Transfers of one phase on a lane per peer and direction at most, in
    pieces of ``piece`` chunks (see ``_piece``)."""
    seg_len = size // segments * cf
    carried = -(-(nb - 1) * segments // size)  # segments a place receives at most
    own = uses[0] * -(-cf // piece)
    relayed = uses[1] * (_relayed_pieces(nb, size, segments, spread, cf, piece) if spread
                         else carried * -(-seg_len // piece))
    return (max(-(-own // lanes[0]), -(-relayed // lanes[1])) if lanes[0]
            else -(-(own + relayed) // lanes[1]))


def _gather_piece(plan: RailPlan, cf: int) -> int:
    """Piece of an allreduce's allgather: finer than ``plan.piece`` where the
    plan, counting both phases (past ``PHASE_RANKS`` ranks), leaves each
    crossing one piece, so nothing of it pipelines; the finest whose
    transfers, with the reduce-scatter's, stay within
    ``PAIRED_LANE_TRANSFERS`` per lane (DGX A100 x128: pieces of 4 chunks
    after the reduce-scatter's 8, 26 transfers per lane; LL128 at 128 MiB
    43.2 -> 52.6 GB/s, 32 threadblocks).  Behind box switches only.
    """
    nb, size, s = len(plan.groups), plan.size, plan.segments
    if (nb * size <= PHASE_RANKS or plan.trees or plan.spread or plan.unpaired
            or plan.piece < size // s * cf):
        return plan.piece
    first = _lane_transfers(cf, size, nb, s, plan.lanes, plan.piece)
    for piece in _piece_options(cf, size, s):
        if piece < plan.piece and first + _lane_transfers(
                cf, size, nb, s, plan.lanes, piece) <= PAIRED_LANE_TRANSFERS:
            return piece
    return plan.piece


def _relayed_pieces(nb: int, size: int, segments: int, spread: tuple[int, ...], cf: int,
                    piece: int) -> int:
    """Most pieces of ``piece`` chunks one place carries across (each way)."""
    return max(sum(-(-w * cf // piece) for _, w in x)
               for x in _carried(nb, size, segments, spread))


def _fitting_chains(size: int, nb: int, segments: int, cf: int, piece: int,
                    spread: tuple[int, ...] = ()) -> int:
    """Chains for a carrier's sum of ``size - 1`` box inputs: up to
    ``SUM_CHAINS`` of two inputs each (the last may have one), as many as keep
    the combining threadblock within ``SUM_STEPS`` (``chains`` steps per piece
    a carrier sums)."""
    sums = (_relayed_pieces(nb, size, segments, spread, cf, piece) if spread
            else -(-(nb - 1) * segments // size) * -(-(size // segments * cf) // piece))
    chains = max(1, min(SUM_CHAINS, size // 2))
    while chains > 1 and chains * sums > SUM_STEPS:
        chains -= 1
    return chains


def _segments(plan: RailPlan, cf: int):
    """``(b, b2, d, j, carrier place, first chunk, length)`` of every rail crossing."""
    nb, size = len(plan.groups), plan.size
    for d in range(1, nb):
        s = plan.segments_at(d)
        width = size // s * cf
        for b in range(nb):
            b2 = (b + d) % nb
            for j in range(s):
                first = plan.groups[b][j * size // s] * cf
                yield b, b2, d, j, plan.carrier(d, j), first, width


def _contiguous(plan: RailPlan) -> None:
    for members in plan.groups:
        if list(members) != list(range(members[0], members[0] + len(members))):
            raise UnsupportedError("rails need each box's ranks numbered contiguously")
