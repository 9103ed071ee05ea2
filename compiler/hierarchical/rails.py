"""Pass ``rails``: rail-aligned hierarchical schedules within a threadblock budget.

Boxes of ``G`` ranks behind a box switch (NVSwitch: every box peer one hop
away), joined by a network in which rank ``(b, g)`` (place ``g`` of box
``b``) reaches ``(b', g)`` of every other box: its *rail*.  Every byte
crosses the network once, on a rail, and every GPU keeps to a fixed, small
set of peers, so a file fits the threadblocks a training job can spare
(``--max-threadblocks``) from two boxes to 1024 GPUs.

Allgather, with box ``b``'s *block* the contiguous output chunks of its
ranks, cut into ``S`` *segments* (``S`` divides ``G``; a segment is ``G/S``
shards):

1. every rank sends its shard to its ``G-1`` box peers;
2. segment ``j`` of block ``b`` goes to box ``b'`` over one rail: its
   *carrier* place is ``((c-1) S + j) mod G`` for ``d = (b'-b) mod nb``
   and ``c = min(d, nb - d)``, so every place carries and receives the same
   number of segments, and exchanges them with the same rail peers both ways
   (``S = G``: the carrier is the shard's owner and the segment its own shard);
3. the receiving carrier forwards the segment to its ``G-1`` box peers.

Where the ``(nb-1) S`` segments of a box do not fall evenly on its ``G``
places (DGX A100 x12 and x16 at 4 segments), a few distances cross as one
shard per place, carried by its owner, and the others take the carriers in
turn among themselves (``RailPlan.spread``, when a rail peer more fits the
budget): every NIC then carries the same share.

Reduce-scatter runs it backwards: box peers send their inputs of a segment to
its carrier, which reduces them (in up to ``SUM_CHAINS`` short chains when a
threadblock is spare, ``_carrier_sum``) and sends the box's partial over the rail;
the owner reduces its input, its box peers' inputs and the partials that
crossed the network (through the receiving carrier when ``S < G``; in a
Simple file that carrier lands the partials of a chunk and sums them on a
local threadblock, ``_lands``, rather than reducing each as it arrives).
Allreduce is the reduce-scatter into the output, then the allgather, whose
phase 1 (every owner's reduced shard to its box peers) runs as the owners'
sums end (``_OwnSpreads``, from four boxes); a Simple allreduce's
reduce-scatter starts each shard and segment with pieces of one chunk
(``_lead_chunks``, ``_lead_plan``), and on eight boxes its allgather's
crossings start one after another (``_staggered``).

Transfers are cut into pieces (``piece`` chunks; with one segment per block
a Simple allgather halves each crossing's last piece, ``_tapered``, and a
Simple allreduce past ``PHASE_RANKS`` ranks takes pieces that fill a lane's
64 steps, ``PAIRED_LANE_TRANSFERS``; where an allreduce's crossings are one
piece each, its allgather takes finer ones, ``_gather_piece``) dealt
round robin to ``lanes`` channels per box peer (an allgather's last round of
relays off the first lane where own shards share it, ``_spare_first_lane``),
and the network pairs get their own
channels: on every rank the lowering pairs a lane's send to a peer with its
receive from the same peer, so a rank takes ``1 + lanes (G-1) + net_lanes
n_net`` threadblocks (``n_net``: its rail peers, about ``(nb-1) S / G``; one
more combines the carriers' split sums).
``plan_rails`` picks the most segments (fewest rail peers first is the
fallback) and lanes the budget allows: ``S = G`` at 2 to 8 DGX boxes, one
segment per block at 64 and 128 (16 rail peers each way at 128, where own
and relayed data share two lanes per box peer: 31 threadblocks; a
reduce-scatter or allreduce on 3 to 8 boxes with a segment per place
shares its lanes too, an allreduce's pieces planned for both phases,
``SHARED_PHASE_TRANSFERS``).  Lanes are
planned here, so the pipeline lowers without ``balance-lanes``.  Each
transfer has a round (``Schedule.rounds``, the lowering's order);
``separated_rounds`` gives every (pair, lane) at most one per round, the
ordering the pipeline lowers when the plain one hangs in a paired lowering.

Input invariant: a validated ``Topology`` of at least two boxes of equal size,
each box behind switches (every box peer reached without the network), every
rank reaching its rail peers through the network.
Output invariant: a ``Schedule`` (deps inferred) that ``check_schedule``
proves in-place and out-of-place; every op moves a contiguous range of at
most ``MAX_COUNT`` chunks between ranks joined through switches.

Complexity: O(N (G + nb S / G) cf / piece) ops.  Seeds: the hierarchical
(rail-aligned) schedules of 004 section 5.3 and the threadblock remarks of
004 section 4.5 (few trees, each with its own threadblocks).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.compiler.lowering.lower_to_program import MAX_STEPS
from colc.errors import InfeasibleError, UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.routing import Router
from colc.ir.topology import Topology, boxes

NAME = "rails"
IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH
#: Chunks one step may move (the runtime's ``cnt`` limit).
MAX_COUNT = 71
#: Transfers one lane carries per peer and direction: with the receives and
#: the nops of their dependencies a threadblock stays within 64 steps.
STEPS_PER_LANE = 24
#: Pieces the carriers' sums run ahead of the owners' sums in an unpaired
#: reduce-scatter (``_interleave``; DGX A100 x2, 1 GiB c16: lead 1 248.2
#: GB/s, 2 and 3 254.1).
LEAD = 2
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
#: Channel hint of the combining threadblock (a local threadblock per hint:
#: on channel 0's, behind the owner's sums that wait on the network, the
#: next loop iteration's combines stalled the NIC for 214 us each).
SUM_CHANNEL = 1
#: Distances ``c`` whose segments may be spread at most, one shard per place,
#: to even out the places' network loads (``_spread_choice``).
MAX_SPREAD = 3
#: Boxes up to which a Simple reduce-scatter lands the partials its receiving
#: carriers sum (``_lands``).  On 64 DGX boxes the landed Simple file gains
#: at 1 GiB (129.0 -> 140.2 GB/s) but LL128 stays ahead there (143.7), and
#: it loses at 128 MiB (111.0 -> 110.8) while the portfolio builds one
#: schedule more (319 -> 412 s).
LANDS_BOXES = 32
#: Pieces' worth of chunks at the start of a Simple allreduce's shards and
#: segments that its reduce-scatter moves one chunk a piece (``_lead_chunks``):
#: DGX A100 x4 at 1 GiB (16 chunks per shard, pieces of 2), with the own
#: shards spread early, 105.2 GB/s without, 105.9 with 1, 107.7 with 2 (3
#: and more: the combining threadblock keeps it at 2).
LEAD_PIECES = 2
#: Steps a paired lane keeps for the lowering's nops where lead pieces add
#: transfers (``rails_schedule`` drops them past ``MAX_STEPS - LEAD_NOPS``:
#: DGX A100 x4, 16 chunks per shard, 56 transfers lowered to 60 steps).
LEAD_NOPS = 8
#: Pieces of owners' sums between a piece's sums and its spread (``_OwnSpreads``).
SPREAD_LAG = 2
#: Boxes from which an allreduce spreads its own shards early (``_OwnSpreads``).
SPREAD_BOXES = 4
#: An allreduce's crossings a rank starts at once, and the pieces each later
#: one starts after the one before it (``_staggered``).
STAGGER_FREE = 3
STAGGER_PIECES = 1
#: Crossings a rank sends from which an allreduce staggers them.
STAGGER_CROSSINGS = 7


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


def _layout(topo: Topology, mesh: bool = False) -> list[list[int]]:
    """Boxes of equal size, every place with its rail; each box behind switches
    (or, with ``mesh``, boxes without a switch: ``box_trees`` checks their links)."""
    groups = boxes(topo)
    if len(groups) < 2:
        raise UnsupportedError("rails need at least two boxes; use trees or ring")
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise UnsupportedError("rails need boxes of equal size")
    router = Router(topo)
    switched = not (mesh and _meshed(topo, groups[0]))
    for members in groups:
        for a in members:
            paths = router.switch_paths(a)
            for b in members if switched else ():
                if a != b and (b not in paths or len(paths[b]) != 3):
                    raise UnsupportedError(
                        f"rails need every box peer one switch away; {topo.ranks[a]} does "
                        f"not reach {topo.ranks[b]} through one box switch")
            for other in groups:
                peer = other[members.index(a)]
                if peer != a and peer not in paths:
                    raise UnsupportedError(f"rank {topo.ranks[a]} does not reach its rail "
                                           f"peer {topo.ranks[peer]} through the network")
    return groups


def _meshed(topo: Topology, members: list[int]) -> bool:
    """Whether a box has no switch of its own (its ranks joined by their links)."""
    ids = {topo.ranks[r] for r in members}
    node = topo.node
    return not any(link.src in ids and not node[link.dst].is_compute
                   and not node[link.dst].is_network for link in topo.links)


def box_trees(topo: Topology, groups: list[list[int]]
              ) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Spanning trees of a box's links, one per place, for boxes without a switch
    (MI250: 16 GCDs on xGMI links of 50-200 GB/s, 3 or 4 neighbours each).

    Every box must be wired alike (place ``i`` of every box linked to the same
    places, at the same bandwidths).  Tree ``g`` grows from ``g`` (Prim's
    order) by the edge whose link would then carry the fewest trees per
    narrowest link's bandwidth (rounded up), then the fewest hops: the trees
    together load links in proportion to their bandwidth (MI250: at most 3
    trees per 50 GB/s, against 2.1 on average; breadth-first trees put 6 on
    one 50 GB/s link), 7 hops deep at most.  O(G^3 deg) for boxes of ``G``
    places.

    Returns
    -------
    tuple
        Per place, its tree's ``(parent, child)`` edges, top-down.

    Raises
    ------
    UnsupportedError
        Boxes wired differently, or a box its own links do not connect.

    Examples
    --------
    >>> from colc.frontends.families import mi250
    >>> t = mi250(2)
    >>> trees = box_trees(t, boxes(t))
    >>> len(trees), {len(e) for e in trees}, trees[0][:3]
    (16, {15}, ((0, 1), (0, 4), (0, 8)))
    """
    cap = topo.capacity()
    rank_of = topo.rank_of
    place = {r: (b, g) for b, members in enumerate(groups) for g, r in enumerate(members)}
    wiring: list[dict[tuple[int, int], object]] = [{} for _ in groups]
    for (u, v), c in cap.items():
        if u in rank_of and v in rank_of:
            (bu, gu), (bv, gv) = place[rank_of[u]], place[rank_of[v]]
            if bu == bv:
                wiring[bu][(gu, gv)] = c
    for b in range(1, len(groups)):
        if wiring[b] != wiring[0]:
            raise UnsupportedError(
                f"rails need boxes wired alike; the box of {topo.ranks[groups[b][0]]} "
                f"differs from the box of {topo.ranks[groups[0][0]]}")
    links = sorted(wiring[0])
    unit = min(wiring[0].values(), default=1)
    load: dict[tuple[int, int], int] = {}
    trees = []
    size = len(groups[0])
    for root in range(size):
        depth, edges = {root: 0}, []
        while len(depth) < size:
            reach = [(-(-(load.get((u, v), 0) + 1) * unit // wiring[0][(u, v)]), depth[u] + 1,
                      (load.get((u, v), 0) + 1) / wiring[0][(u, v)], u, v)
                     for u, v in links if u in depth and v not in depth]
            if not reach:
                raise UnsupportedError(
                    f"rails: the links of the box of {topo.ranks[groups[0][0]]} do not "
                    f"connect {topo.ranks[groups[0][root]]} to every box peer")
            _, d, _, u, v = min(reach)
            depth[v] = d
            edges.append((u, v))
            load[(u, v)] = load.get((u, v), 0) + 1
        trees.append(tuple(edges))
    return tuple(trees)


class _Builder:
    """Ops in program order, with per-pair lane counters and scratch offsets."""

    def __init__(self, plan: RailPlan, cf: int, n: int, separate: bool = False) -> None:
        self.plan = plan
        self.cf = cf
        self.n = n
        self.lead = 0  # a reduce-scatter's first chunks one a piece (``_lead_chunks``)
        self.gates: dict[int, int] = {}  # ``Schedule.gates``
        self.sums: dict[int, int] = {}  # rank -> split sums combined so far
        self.ops: list[Op] = []
        self.turn: dict[tuple[int, int], int] = {}
        self.scratch = [0] * n
        self.box_of = {r: b for b, g in enumerate(plan.groups) for r in g}
        self.place = {r: p for g in plan.groups for p, r in enumerate(g)}
        self.links = dict(plan.link_lanes)
        self.width = plan.width
        self.relay = 0  # lane class of the transfers being added (1: relayed data)
        # Receiving carriers land each crossing partial and sum them locally
        # (``_lands``: reduce-scatter's form for Simple files).
        self.land = False
        # Relays kept off the first shared lane (``_spare_first_lane``).
        self.spare = False
        self.round = 0  # ``Schedule.rounds`` of the transfers being added
        self.rounds: list[int] = []
        # Trees in a box put several transfers on one (pair, lane) in a round:
        # the next round starts at the second (``Schedule.rounds``' promise).
        # Elsewhere only on request (``separated_rounds``).
        self.last: dict[tuple[int, int, int], int] | None = \
            {} if plan.trees or separate else None

    def lane(self, src: int, dst: int) -> int:
        """Channel of the next transfer of ``src -> dst`` (round robin over the lanes
        of its class)."""
        own, relay = self.plan.lanes
        cls = self.relay if own else 1  # without own lanes, own data rides the relay lanes
        same_box = self.box_of[src] == self.box_of[dst]
        if same_box and self.spare and self.relay:  # off the first lane, a count of its own
            key = (src, dst, 2)
            k = self.turn.get(key, 0)
            self.turn[key] = k + 1
            return 1 + k % (relay - 1)
        key = (src, dst, cls)
        k = self.turn.get(key, 0)
        self.turn[key] = k + 1
        if same_box:
            if cls and self.links:
                relay = self.links[(self.place[src], self.place[dst])]
            return own + k % relay if cls else k % own
        if self.plan.split_net:  # a channel per sending box: sends never pair with receives
            return own + self.width + self.box_of[src]
        return own + self.width + k % self.plan.net_lanes

    def add(self, kind: OpKind, src: Slot, dst: Slot, count: int,
            operand: Slot | None = None, local: int = 0) -> None:
        ch = local if src.rank == dst.rank else self.lane(src.rank, dst.rank)
        if self.last is not None and src.rank != dst.rank:
            key = (src.rank, dst.rank, ch)
            if self.last.get(key) == self.round:
                self.round += 1
            self.last[key] = self.round
        self.ops.append(Op(len(self.ops), kind, src, dst, count, operand, (), ch))
        self.rounds.append(self.round)

    def alloc(self, rank: int, count: int) -> int:
        at = self.scratch[rank]
        self.scratch[rank] += count
        return at

    def pieces(self, start: int, length: int, taper: bool = False,
               lead: int = 0) -> list[tuple[int, int]]:
        """``(first chunk, count)`` of each piece of ``length`` chunks from
        ``start``; ``taper``: the last one cut in halves down to one chunk
        (``_tapered``); ``lead``: the first ``lead`` chunks one a piece
        (``_lead_chunks``)."""
        return _piece_list(start, length, self.plan.piece, taper, lead)


def _piece_list(start: int, length: int, step: int, taper: bool,
                lead: int = 0) -> list[tuple[int, int]]:
    lead = min(lead, length)
    out = [(c, 1) for c in range(start, start + lead)]
    out += [(c, min(step, start + length - c))
            for c in range(start + lead, start + length, step)]
    if taper and len(out) > 1:
        c, k = out.pop()
        while k > 1:
            out.append((c, k - k // 2))
            c, k = c + k - k // 2, k // 2
        out.append((c, k))
    return out


def simple_form(topo: Topology, collective: Collective, chunks: int | None,
                budget: int = 32) -> bool:
    """Whether ``rails_schedule``'s form for Simple files differs here from
    the others' (an allgather that tapers its last pieces, ``_tapered``; a
    reduce-scatter whose receiving carriers land the partials, ``_lands``;
    an allreduce whose finer pieces fill a lane, ``PAIRED_LANE_TRANSFERS``,
    whose reduce-scatter starts with pieces of one chunk, ``_lead_chunks``,
    or whose crossings start one after another, ``_staggered``):
    the pipeline builds a separate schedule for its Simple files only then.

    >>> from colc.frontends.families import dgx_a100
    >>> [simple_form(dgx_a100(n), Collective.ALLGATHER, c) for n, c in ((64, 1), (16, 4), (128, 1))]
    [True, False, False]
    >>> [simple_form(dgx_a100(n), Collective.REDUCESCATTER, 2) for n in (8, 16, 32)]
    [False, True, True]
    >>> [simple_form(dgx_a100(n), Collective.ALLREDUCE, 1) for n in (32, 64, 128)]
    [False, True, False]
    """
    cf = chunks or 8
    if collective is Collective.ALLGATHER:
        return _tapered(plan_rails(topo, cf, budget), cf)
    if collective is Collective.REDUCESCATTER:
        return _lands(plan_rails(topo, cf, budget, 1, True), cf)
    if collective is not Collective.ALLREDUCE:
        return False
    fine = plan_rails(topo, cf, budget, 2, True, fine=True)
    return (fine != plan_rails(topo, cf, budget, 2, True)
            or _lead_plan(fine, cf, collective, True, budget)[1] > 0
            or _staggers(fine))


def rails_schedule(topo: Topology, collective: Collective, chunks: int | None = None,
                   budget: int = 32, separate: bool = False, unpaired: bool = False,
                   simple: bool = True) -> Schedule:
    """Rail-aligned hierarchical schedule of ``collective`` (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
    chunks : int or None
        Chunks per shard (default 8).
    budget : int
        Threadblocks per rank the file may take.
    separate : bool
        Give a (pair, lane) at most one transfer per round (``separated_rounds``);
        boxes without a switch always do.
    unpaired : bool
        Plan for an unpaired lowering (``RailPlan.unpaired``); ``budget`` is
        then what the plan counts, about half what the lowering takes.
    simple : bool
        The form for Simple files (the pipeline asks it for those only): the
        allgather cuts each crossing's last piece in halves where that
        applies (``_tapered``), the reduce-scatter's receiving carriers land
        the partials they sum (``_lands``), an allreduce takes the pieces
        that fill a paired lane (``plan_rails``' ``fine``).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Not boxes behind switches joined by rails.
    InfeasibleError
        The budget is too small, or the chunking too fine for 64 steps.
    """
    cf = chunks or 8
    plan = plan_rails(topo, cf, budget, 2 if collective is Collective.ALLREDUCE else 1,
                      collective is not Collective.ALLGATHER, unpaired, simple)
    led, lead = _lead_plan(plan, cf, collective, simple, budget)
    out = _build(led, cf, topo.num_ranks, collective, separate, simple, lead)
    if lead and _paired_steps(out.ops) > MAX_STEPS - LEAD_NOPS:
        out = _build(plan, cf, topo.num_ranks, collective, separate, simple, 0)
    gates = tuple(out.gates.get(i, -1) for i in range(len(out.ops))) if out.gates else ()
    sched = Schedule(collective, out.n, out.n * cf, max(out.scratch), tuple(out.ops),
                     algorithm=NAME, rounds=tuple(out.rounds), gates=gates)
    return infer_dependencies(sched)


def _build(plan: RailPlan, cf: int, n: int, collective: Collective, separate: bool,
           simple: bool, lead: int) -> _Builder:
    """The ops of ``rails_schedule`` (see there) with a reduce-scatter whose
    shards and segments start with ``lead`` pieces of one chunk."""
    out = _Builder(plan, cf, n, separate)
    out.land = simple and collective is Collective.REDUCESCATTER
    out.lead = lead
    if collective is Collective.ALLGATHER:
        for r in range(n):
            for c, k in out.pieces(0, cf):
                out.add(OpKind.COPY, Slot(r, IN, c), Slot(r, OUT, r * cf + c), k)
    elif collective is Collective.ALLREDUCE:
        gather = dataclasses.replace(plan, piece=_gather_piece(plan, cf))
        early = len(plan.groups) >= SPREAD_BOXES
        _reduce_scatter(out, collective, _OwnSpreads(out, gather.piece) if early else None)
        out.plan = gather
        _allgather(out, OUT, False, spreads=not early,
                   stagger=simple and _staggers(plan))
    else:
        _reduce_scatter(out, collective)
    if collective is Collective.ALLGATHER:
        _allgather(out, IN, simple)
    return out


def _lead_chunks(plan: RailPlan, cf: int, collective: Collective, simple: bool) -> int:
    """Chunks at the start of each shard and segment that a Simple allreduce's
    reduce-scatter moves one a piece (``LEAD_PIECES`` pieces' worth), or 0.

    The network waits for the first piece to pass the carriers' sum chains
    over the box (a few box transfers, each at one threadblock's speed):
    finer first pieces reach it sooner.  DGX A100 x4 allreduce at 1 GiB (16
    chunks per shard, pieces of 2): the NIC started at 704 us, 357 with the
    first 4 chunks one a piece; 102.8 -> 105.0 GB/s (the own shards'
    spreads still after the reduce-scatter, ``_OwnSpreads``).  Only with a
    segment per place and shared lanes (3 to ``SHARED_BOXES`` boxes), where
    every phase has the same pieces per shard, and pieces of 2 chunks or
    more; fewer where the combining threadblock of the carriers' split sums
    would pass ``SUM_STEPS`` (x4: 6 chunks, 66 steps), and
    ``rails_schedule`` drops it where a paired lane would pass
    ``MAX_STEPS - LEAD_NOPS`` transfers.
    """
    if (collective is not Collective.ALLREDUCE or not simple or plan.trees or plan.unpaired
            or plan.segments < plan.size or plan.lanes[0] or plan.piece < 2):
        return 0
    carried = max(map(len, _carried(len(plan.groups), plan.size, plan.segments, plan.spread)))
    for lead in range(min(cf, LEAD_PIECES * plan.piece), 0, -plan.piece):
        sums = carried * len(_piece_list(0, cf, plan.piece, False, lead))
        if plan.sum_chains == 1 or plan.sum_chains * sums <= SUM_STEPS * plan.sum_tbs:
            return lead
    return 0


def _lead_plan(plan: RailPlan, cf: int, collective: Collective, simple: bool,
               budget: int) -> tuple[RailPlan, int]:
    """``plan`` and its lead chunks (``_lead_chunks``); where the combining
    threadblock leaves no room for them and the budget has a threadblock
    spare, the plan with a second combining threadblock, if that makes room.

    DGX A100 x8 (8 chunks per shard, pieces of 2, two chains of seven pieces
    a carrier's sums, 56 steps): no lead pieces fit one combining
    threadblock; with two (31 threadblocks) the first 4 chunks go one a
    piece: 1 GiB 90.6 -> 93.1 GB/s, 256 / 512 MiB 82.7 / 84.0 -> 86.0 /
    86.1, 128 MiB 82.0 -> 81.2 (three chains and two threadblocks, room for
    2 lead chunks: 92.3; four chains and no lead: 90.4)."""
    lead = _lead_chunks(plan, cf, collective, simple)
    if lead or plan.sum_chains == 1 or plan.threadblocks >= budget:
        return plan, lead
    wider = dataclasses.replace(plan, sum_tbs=plan.sum_tbs + 1,
                                threadblocks=plan.threadblocks + 1)
    lead = _lead_chunks(wider, cf, collective, simple)
    return (wider, lead) if lead else (plan, 0)


def _paired_steps(ops: list[Op]) -> int:
    """Most transfers on one pair of ranks and one channel (both directions: the
    steps of a threadblock the paired lowering gives that pair and channel)."""
    count = Counter((min(o.src.rank, o.dst.rank), max(o.src.rank, o.dst.rank), o.channel)
                    for o in ops if o.src.rank != o.dst.rank)
    return max(count.values(), default=0)


def separated_rounds(topo: Topology, collective: Collective, chunks: int | None = None,
                     budget: int = 32, simple: bool = True) -> tuple[int, ...]:
    """``Schedule.rounds`` of ``rails_schedule`` where a (pair, lane)'s second
    transfer in a round starts the next round; the ops are the same.

    A paired lane of an allreduce carries its own and relayed partial sums in
    one round, so both sides send twice in a row: with Simple's FIFO of 2
    calls the lowering that follows the plain rounds deadlocks (DGX A100 x16:
    a cycle through the box lanes), and unpaired it needs 59 threadblocks.
    Separated, the lowering alternates them (x16 allreduce, chunking 4: 52.8
    and 65.2 GB/s at 128 MiB and 1 GiB, simulated).  Not the default: where
    the plain rounds run, they run faster (LL128 allreduce on DGX A100 x32:
    50.8 GB/s against 42.6; Simple reduce-scatter on x16 at 1 GiB: 138.7
    against 130.7), so the pipeline tries this ordering only
    when the plain one hangs.

    Complexity: that of ``rails_schedule`` (it is built again).
    """
    return rails_schedule(topo, collective, chunks, budget, separate=True, simple=simple).rounds


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


class _OwnSpreads:
    """An allreduce's allgather phase 1 (every owner's reduced shard to its box
    peers, in the allgather's pieces), emitted as the owners' sums end.

    After the reduce-scatter, the spreads waited behind the last owners' sums,
    which wait for the network: the box links idled while the reduce-scatter's
    last partials crossed (DGX A100 x4 at 1 GiB, 16 chunks per shard: rank
    0's NVLink idle from 4.6 to 5.4 ms), and then carried the own shards and
    the relays together, ending 0.7 ms after the network.  A piece of the own
    shard now spreads right after the owners' sums of the reduce-scatter
    piece that completes it, in a round of its own: 102.8 -> 105.2 GB/s
    (x4, 29 threadblocks); x5 94.9 -> 96.2 (8), x6 83.6 -> 84.6 (4), x16
    69.0 -> 73.9 (4); LL128 at 16 MiB x4 55.3 -> 58.8 (8 chunks), LL 34.3
    -> 38.6.  From ``SPREAD_BOXES`` boxes: x3 lost (8 chunks, 1 GiB: 110.3
    -> 109.7), and so did the two boxes' portfolio where the 1 GiB file
    gained (123.6 -> 124.9): 1 MiB (LL) 15.7 -> 13.8, 128 MiB (Simple,
    unpaired) 115.1 -> 111.7.
    """

    def __init__(self, out: _Builder, piece: int) -> None:
        self.out = out
        self.pieces = _piece_list(0, out.cf, piece, False)  # offsets in a shard
        self.done = 0

    def upto(self, end: int) -> None:
        """Spread the pieces within the first ``end`` chunks of every shard not
        spread yet (the owners' sums have reached ``end``)."""
        out, plan, cf = self.out, self.out.plan, self.out.cf
        first = self.done
        while self.done < len(self.pieces):
            c, k = self.pieces[self.done]
            if c + k > end:
                break
            self.done += 1
        for c, k in self.pieces[first:self.done]:
            out.round += 1
            out.relay = 0
            _spread(out, [(members, plan.tree(g), Slot(r, OUT, r * cf + c), r * cf + c, k)
                          for members in plan.groups for g, r in enumerate(members)])


def _allgather(out: _Builder, first: Buffer, taper: bool = True,
               spreads: bool = True, stagger: bool = False) -> None:
    """Phases 1-3 of the allgather; shards start in ``first`` (IN: the input,
    OUT: the owner's reduced shard of an allreduce); ``spreads`` False: without
    phase 1 (an allreduce spreads the own shards as their sums end,
    ``_OwnSpreads``); ``stagger``: a rank's crossings start one after another
    (``_staggered``)."""
    plan, cf = out.plan, out.cf

    def own(r: int, c: int) -> Slot:
        return Slot(r, IN, c - r * cf) if first is IN else Slot(r, OUT, c)

    if plan.segments < plan.size:
        _contiguous(plan)
    # In rounds (``Schedule.rounds``): every (pair, lane) has at most one
    # transfer per round, and piece p of every phase comes before piece p + 1.
    shards = [(members, g, out.pieces(r * cf, cf))
              for members in plan.groups for g, r in enumerate(members)]
    taper = taper and _tapered(plan, cf)
    crossings = [(plan.groups[b][g], plan.groups[b2], g, out.pieces(start, width, taper))
                 for b, b2, _, _, g, start, width in _segments(plan, cf)]
    received = _by_receiver(crossings, lambda x: x[1][x[2]])
    most = max(len(x[3]) for x in crossings)  # spread crossings have fewer pieces
    # an allreduce's lanes carry its reduce-scatter too: no lane is spare
    spare = first is IN and _spare_first_lane(plan, len(shards[0][2]), crossings, most)
    # crossing i's piece q goes in round q + shift[i] (``_staggered``)
    shift, after = _staggered(crossings) if stagger else ([0] * len(crossings), {})
    index = {id(x): i for i, x in enumerate(crossings)}
    sent: dict[tuple[int, int], int] = {}  # (crossing, piece) -> op
    top = max(len(x[3]) + shift[i] for i, x in enumerate(crossings))
    for p in range(max(len(shards[0][2]), top)):
        out.relay = 0
        out.spare = spare and p == most - 1
        if spreads and p < len(shards[0][2]):  # 1: own shard to the box peers
            _spread(out, [(members, plan.tree(g), own(members[g], pieces[p][0]), *pieces[p])
                          for members, g, pieces in shards])
        if p >= top:
            out.round += 1
            continue
        for i, (src, members, g, pieces) in enumerate(crossings):  # 2: over the rails
            q = p - shift[i]
            if not 0 <= q < len(pieces):
                continue
            c, k = pieces[q]
            mine = c // cf == src == (c + k - 1) // cf  # within the carrier's own shard
            sent[(i, q)] = len(out.ops)
            if q == 0 and i in after:  # starts once the crossing before sent a piece
                out.gates[len(out.ops)] = sent[after[i]]
            out.add(OpKind.COPY, own(src, c) if mine else Slot(src, OUT, c),
                    Slot(members[g], OUT, c), k)
        out.relay = 1
        for batch in received:  # 3: to the receiving box, one segment per peer a round
            jobs = []
            for x in batch:
                _, members, g, pieces = x
                q = p - shift[index[id(x)]]
                if 0 <= q < len(pieces):
                    jobs.append((members, plan.tree(g), Slot(members[g], OUT, pieces[q][0]),
                                 *pieces[q]))
            _spread(out, jobs)
            out.round += 1
    out.spare = False


def _staggers(plan: RailPlan) -> bool:
    """Whether a Simple allreduce staggers its crossings (``_staggered``): from
    ``STAGGER_CROSSINGS`` crossings a rank, up to ``SHARED_BOXES`` boxes (DGX
    A100 x8; beyond, its Simple files are not the portfolio's at 1 GiB, and
    an extra Simple schedule would cost the builds of 1024 GPUs their time),
    in pieces of 2 chunks or more (x8 with 4 chunks per shard, pieces of
    one: 256 MiB / 512 MiB / 1 GiB 84.0 / 85.6 / 85.5 -> 82.7 / 84.0 /
    83.7 GB/s staggered)."""
    if len(plan.groups) > SHARED_BOXES or plan.piece < 2:
        return False
    sent = _carried(len(plan.groups), plan.size, plan.segments, plan.spread)
    return max(map(len, sent)) >= STAGGER_CROSSINGS


def _staggered(crossings: list) -> tuple[list[int], dict[int, tuple[int, int]]]:
    """Round shifts of an allreduce's rail crossings, and the gates that hold
    them: a rank's first ``STAGGER_FREE`` crossings start together, each
    later one ``STAGGER_PIECES`` pieces after the one before it, once that
    one has sent its piece ``STAGGER_PIECES - 1`` (``Schedule.gates``).

    A rank's crossings share its NIC, so started together they all end
    together, and every receiving carrier then relays the last piece of each
    to its box peers at once: on DGX A100 x8 (8 chunks per shard, 1 GiB)
    rank 0's NIC finished at 11.3 ms and the call at 12.3, the box links
    busy with that last round.  Staggered, the crossings end one after
    another from 9.6 ms, each last round relayed while the NIC still
    carries the others: 86.8 -> 90.6 GB/s (128 MiB 81.1 -> 82.0), 30
    threadblocks.  Simple files only: LL128 lost (x8, 16 chunks per shard,
    16 / 64 MiB: 51.2 / 73.2 -> 49.2 / 70.0).  Started two at a time
    (``STAGGER_FREE`` 2) x8 gave 91.3 at 1 GiB but 75.6 at 128 MiB, and x4
    (three crossings a rank) lost 107.7 -> 105.7.  Only from
    ``STAGGER_CROSSINGS`` crossings a rank (``_staggers``): with fewer the
    last relay round is smaller and the held crossings cost more than they
    save (x5, four crossings, 8 chunks: 96.2 -> 94.4 GB/s; x6,
    five, 4 chunks: 84.9 -> 81.6, 128 MiB 79.0 -> 73.8; any other start
    count or step lost there too).

    Returns
    -------
    shifts : list of int
        Per crossing, the rounds its pieces are moved by.
    after : dict
        Crossing -> ``(crossing, piece)`` whose op gates its first piece.
    """
    shifts, after, last = [0] * len(crossings), {}, {}
    count: dict[int, int] = {}
    for i, (src, *_rest) in enumerate(crossings):
        k = count[src] = count.get(src, -1) + 1
        if k >= STAGGER_FREE:
            prev = last[src]
            shifts[i] = shifts[prev] + STAGGER_PIECES
            after[i] = (prev, min(STAGGER_PIECES, len(crossings[prev][3])) - 1)
        last[src] = i
    return shifts, after


def _tapered(plan: RailPlan, cf: int) -> bool:
    """Whether the allgather cuts the last piece of each crossing in halves.

    The crossings of a round land together (a place's rail peers share its
    NIC), and the receiving carriers then forward them to every box peer: the
    last round's forwarding is the call's tail.  Cut finer, the last round
    is smaller (DGX A100 x64 at 1 GiB, pieces of 2 chunks, 8 rail peers:
    128.6 -> 135.5 GB/s, 30 threadblocks; its reduce-scatter loses 129.0 ->
    128.3, so only the allgather tapers).  Only with one segment per block
    (64 boxes and more): on 16 boxes, four segments, the LL128 file of 128
    MiB lost 132.2 -> 129.2 (4 chunks per shard); on 8 boxes rails gained
    (1 GiB, 8 chunks: 159.1 -> 168.5) but is not the file there.  Only
    behind box switches, where every relay lane stays within
    ``STEPS_PER_LANE`` transfers per peer.

    ``cf``: chunks per shard.  A rank relays the tapered pieces of every
    crossing it receives, and its own shard's pieces too when there is no
    own lane.
    """
    if plan.trees or plan.piece < 2 or plan.segments > 1:
        return False
    relayed: dict[int, int] = {}
    for _, b2, _, _, g, start, width in _segments(plan, cf):
        r = plan.groups[b2][g]
        relayed[r] = relayed.get(r, 0) + len(_piece_list(start, width, plan.piece, True))
    shared = len(_piece_list(0, cf, plan.piece, False)) if not plan.lanes[0] else 0
    return all(-(-(shared + n) // plan.lanes[1]) <= STEPS_PER_LANE for n in relayed.values())


def _lands(plan: RailPlan, cf: int) -> bool:
    """Whether some receiving carrier of the reduce-scatter sums several
    partials of one chunk (a segment it carries crosses to it from two
    boxes or more, for owners other than itself): the form for Simple files
    then lands each in scratch and sums them on a local threadblock.

    Reduced as they arrive, the partials form one chain across the rail
    threadblocks, and each of those sends its next piece only after its
    link of the chain: the last round's crossings waited for the chain
    while the NIC idled (DGX A100 x16 at 1 GiB, c2 Simple, 156.1 -> 162.0
    GB/s; x32 c1 141.9 -> 144.7).  Not at LL128 (x16 128 MiB 124.8 ->
    123.9), nor for an allreduce (x16 Simple 1 GiB 76.5 -> 74.4).  From 16
    DGX boxes (on fewer a carrier sums one partial per chunk) to
    ``LANDS_BOXES``.  The landings take scratch: x16 c2 82 -> 92 chunks per
    rank, x32 c1 44 -> 65 (against 256 input chunks).

    ``cf``: chunks per shard.
    """
    if plan.trees or len(plan.groups) > LANDS_BOXES:
        return False
    crossing = Counter(  # (receiving rank, first chunk) of every crossing not for it alone
        (u, start) for b, _, _, _, g, start, width in _segments(plan, cf)
        if not (u := plan.groups[b][g]) * cf <= start < start + width <= (u + 1) * cf)
    return any(n > 1 for n in crossing.values())


def _spare_first_lane(plan: RailPlan, own: int, crossings: list, most: int) -> bool:
    """Whether the allgather's last round of relays keeps off the first lane.

    Where own shards and relays share the lanes (``lanes[0] == 0``: DGX A100
    x96 and x128), the first lane carries a rank's own shard to each box peer
    before its relays, and every crossing waits for the box's shards.  A call
    larger than the protocol's buffer runs the program in loop iterations,
    and a threadblock starts the next one when it ends this one: the own
    shards of the next iteration then queued behind the last round of
    relays, the forwarding of what landed last, and the NIC idled meanwhile
    (DGX A100 x128 allgather at 1 GiB, LL128, two iterations: idle 1.4 ms
    of 10.9).  With that round on the other lanes the first lane is free
    once the earlier rounds are forwarded: 98.5 -> 115.2 GB/s, 31
    threadblocks.  Only where the other lanes stay within
    ``STEPS_PER_LANE`` transfers per peer, and with at least two rounds (one
    round would leave a single lane to forward everything).

    ``own``: pieces of a rank's own shard; ``crossings``: ``(src, members,
    place, pieces)`` of every rail crossing; ``most``: rounds of crossings.
    """
    relay = plan.lanes[1]
    if plan.lanes[0] or relay < 2 or most < 2 or plan.trees or plan.unpaired \
            or len(plan.groups) < 3:
        return False
    earlier: dict[int, int] = {}
    last: dict[int, int] = {}
    for _, members, g, pieces in crossings:
        r = members[g]
        earlier[r] = earlier.get(r, 0) + min(len(pieces), most - 1)
        last[r] = last.get(r, 0) + (len(pieces) == most)
    # Round robin from the first lane, the second takes the most of the others.
    return all(-(-(own + earlier[r] - 1) // relay) + -(-last.get(r, 0) // (relay - 1))
               <= STEPS_PER_LANE for r in earlier)


def _levels(edges) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Children and depth of every place of a tree given top-down."""
    children: dict[int, list[int]] = {}
    depth = {edges[0][0]: 0} if edges else {}
    for u, v in edges:
        children.setdefault(u, []).append(v)
        depth[v] = depth[u] + 1
    return children, depth


def _spread(out: _Builder, jobs: list) -> None:
    """For each ``(members, edges, first, c, k)``: chunks ``c .. c+k`` from
    ``first`` (on the tree's root) to every box peer along ``edges``, inner
    ranks forwarding what landed in their output.  All trees go level by
    level (every first hop, then every second), so on each pair of ranks
    both sides meet the transfers in the same order (no paired threadblock
    waits for a receive its peer has queued behind one of its own)."""
    levels = [_levels(job[1])[1] for job in jobs]
    for level in range(1, max((max(d.values(), default=0) for d in levels), default=0) + 1):
        for (members, edges, first, c, k), depth in zip(jobs, levels):
            for u, v in edges:
                if depth[v] == level:
                    src = first if members[u] == first.rank else Slot(members[u], OUT, c)
                    out.add(OpKind.COPY, src, Slot(members[v], OUT, c), k)


def _gather(out: _Builder, jobs: list) -> list[list[Slot]]:
    """For each ``(members, edges, c, k)``: the partial sums of input chunks
    ``c .. c+k`` of each subtree under the root (the tree run backwards):
    leaves give their input, inner ranks reduce their input and their
    children's partials in scratch.  Level by level from the deepest, all
    trees together (as ``_spread``); the root's own sums are the caller's."""
    shapes = [_levels(job[1]) for job in jobs]
    partial: list[dict[int, Slot]] = [{} for _ in jobs]
    top = max((max(d.values(), default=0) for _, d in shapes), default=0)
    for level in range(top - 1, 0, -1):
        for i, (members, edges, c, k) in enumerate(jobs):
            children, depth = shapes[i]
            for v in (v for _, v in edges if depth[v] == level and v in children):
                acc = Slot(members[v], SCR, out.alloc(members[v], k))
                prev = Slot(members[v], IN, c)
                for w in children[v]:
                    out.add(OpKind.REDUCE, partial[i].get(w, Slot(members[w], IN, c)), acc,
                            k, prev)
                    prev = acc
                partial[i][v] = acc
    return [[partial[i].get(w, Slot(members[w], IN, c))
             for w in shapes[i][0].get(edges[0][0], [])] if edges else []
            for i, (members, edges, c, k) in enumerate(jobs)]


def _carrier_sum(out: _Builder, sources: list[Slot], first: Slot, acc: Slot, k: int) -> Slot:
    """``acc = first (+) sources`` on ``first``'s rank in ``plan.sum_chains``
    chains of received reductions: the first from ``first`` into ``acc``, each
    other from a plain receive into scratch; then the others reduced into
    ``acc`` on the combining threadblock.  Returns the slot of the sum
    (``first`` itself when there is nothing to add)."""
    t, m = first.rank, out.plan.sum_chains
    width = -(-len(sources) // m) or 1
    chains = [sources[i:i + width] for i in range(0, len(sources), width)] or [[]]
    prev = first
    for src in chains[0]:
        out.add(OpKind.REDUCE, src, acc, k, prev)
        prev = acc
    others = []
    for chain in chains[1:]:
        other = Slot(t, SCR, out.alloc(t, k))
        out.add(OpKind.COPY, chain[0], other, k)
        for src in chain[1:]:
            out.add(OpKind.REDUCE, src, other, k, other)
        others.append(other)
    j = out.sums[t] = out.sums.get(t, -1) + 1
    for other in others:
        out.add(OpKind.REDUCE, other, acc, k, acc,
                local=SUM_CHANNEL + j % out.plan.sum_tbs)
    return prev


def _by_receiver(crossings: list, receiver) -> list[list]:
    """Crossings in batches: batch ``j`` holds each receiving rank's ``j``-th."""
    seen: dict[int, int] = {}
    batches: list[list] = []
    for x in crossings:
        j = seen.get(receiver(x), 0)
        seen[receiver(x)] = j + 1
        if j == len(batches):
            batches.append([])
        batches[j].append(x)
    return batches


def _reduce_scatter(out: _Builder, coll: Collective,
                    spreads: _OwnSpreads | None = None) -> None:
    """The allgather backwards; the owner's result lands in its output
    (``spreads``: an allreduce's own shards spread as their sums end)."""
    plan, cf = out.plan, out.cf
    if plan.segments < plan.size:
        _contiguous(plan)
    first = len(out.ops)
    ends = []  # where each piece round of the carriers' sums ends
    crossings = list(_segments(plan, cf))
    partial: dict[tuple[int, int], Slot] = {}  # (carrier rank, chunk) -> its box's partial
    # A crossing of the allgather carries block b from box b to box b2; here box
    # b2's partial of block b crosses back.
    out.relay = 1
    chains = []
    for _, b2, _, _, g, start, width in crossings:
        members, t = plan.groups[b2], plan.groups[b2][g]
        chains.append((members, t, start, out.alloc(t, width),
                       out.pieces(start, width, lead=out.lead), g))
    batches = _by_receiver(chains, lambda x: x[1])
    for p in range(max(len(x[4]) for x in chains)):  # 3': box inputs to the carrier
        for batch in batches:
            batch = [x for x in batch if p < len(x[4])]
            gathered = _gather(out, [(x[0], plan.tree(x[5]), *x[4][p]) for x in batch])
            for (members, t, start, at, pieces, g), sources in zip(batch, gathered):
                c, k = pieces[p]
                partial[(t, c)] = _carrier_sum(out, sources, Slot(t, IN, c),
                                               Slot(t, SCR, at + c - start), k)
            out.round += 1
        ends.append(len(out.ops))
    # (receiving rank, chunk) -> (length, the partials that cross to it)
    arrived: dict[tuple[int, int], tuple[int, list[Slot]]] = {}
    for b, b2, _, _, g, start, width in crossings:  # 2': over the rails
        t, u = plan.groups[b2][g], plan.groups[b][g]
        for c, k in out.pieces(start, width, lead=out.lead):
            arrived.setdefault((u, c), (k, []))[1].append(partial[(t, c)])
    starts = _owner_sums(out, coll, arrived, spreads)
    if plan.unpaired and starts and starts[0] == ends[-1]:  # nothing crossed apart
        _interleave(out, [first, *ends], [*starts, len(out.ops)])


def _owner_sums(out: _Builder, coll: Collective,
                arrived: dict[tuple[int, int], tuple[int, list[Slot]]],
                spreads: _OwnSpreads | None = None) -> list[int]:
    """1': every owner reduces its input, its box peers' inputs and the partials that
    crossed the rails (through the receiving carrier's sum when it is not the owner),
    each piece round followed by the ``spreads`` that its sums complete.
    Returns where each piece round of the owners' sums starts in ``out.ops``."""
    plan, cf = out.plan, out.cf
    # Two boxes' reduce-scatter chains the crossing partial into the owner's
    # sum (simulated DGX A100 x2 at 1 GiB: 222 GB/s, landed first 208); else
    # it lands in scratch first (x8: 167 against 158; allreduce: no hang).
    land = (coll is Collective.ALLREDUCE and not plan.unpaired) or len(plan.groups) > 2
    extra: dict[tuple[int, int], list[Slot]] = {}  # (owner, chunk) -> rail sources
    base, nth = out.round, {}  # a receiving rank's j-th arrival crosses in round base + j
    for (u, c), (k, parts) in sorted(arrived.items()):
        nth[u] = nth.get(u, -1) + 1
        out.round = base + nth[u]
        owners = range(c // cf, (c + k - 1) // cf + 1)
        if owners == range(u, u + 1) and not land:  # chained into the owner's sum
            extra.setdefault((u, c), []).extend(parts)
            continue
        if owners == range(u, u + 1):  # the owner receives them itself
            # into scratch, plainly: a receive chained to the owner's sum waits
            # for the box peers' inputs while the rank's network sends of later
            # rounds run ahead (allreduce: four sends in a depth-2 FIFO, a hang)
            for part in parts:
                landing = Slot(u, SCR, out.alloc(u, k))
                out.add(OpKind.COPY, part, landing, k)
                extra.setdefault((u, c), []).append(landing)
            continue
        acc = Slot(u, SCR, out.alloc(u, k))  # the receiving carrier sums them first
        out.add(OpKind.COPY, parts[0], acc, k)
        if out.land:  # each into scratch, then summed locally (``_lands``)
            landed = [Slot(u, SCR, out.alloc(u, k)) for _ in parts[1:]]
            for part, landing in zip(parts[1:], landed):
                out.add(OpKind.COPY, part, landing, k)
            for landing in landed:
                out.add(OpKind.REDUCE, landing, acc, k, acc)
        else:  # reduced as they arrive, one rail threadblock after the other
            for p in parts[1:]:
                out.add(OpKind.REDUCE, p, acc, k, acc)
        for o in owners:
            lo = max(c, o * cf)
            part = acc.shifted(lo - c)
            if plan.trees and o != u:  # no box switch: down u's tree towards o
                part = _toward(out, u, o, part, min(c + k, (o + 1) * cf) - lo)
            extra.setdefault((o, lo), []).append(part)
    out.round = base + max(nth.values(), default=0) + 1
    out.relay = 0
    owners = [(members, r, out.alloc(r, cf), out.pieces(r * cf, cf, lead=out.lead), g)
              for members in plan.groups for g, r in enumerate(members)]
    starts = []
    for p in range(len(owners[0][3])):  # in rounds, as the allgather
        out.round += 1
        starts.append(len(out.ops))
        gathered = _gather(out, [(x[0], plan.tree(x[4]), *x[3][p]) for x in owners])
        for (members, r, base, pieces, g), sources in zip(owners, gathered):
            c, k = pieces[p]
            final = (Slot(r, OUT, c - r * cf) if coll is Collective.REDUCESCATTER
                     else Slot(r, OUT, c))
            _chain(out, r, sources, extra.get((r, c), []), Slot(r, IN, c),
                   Slot(r, SCR, base + c - r * cf), final, k)
        if spreads is not None and p >= SPREAD_LAG:
            c, k = owners[0][3][p - SPREAD_LAG]
            spreads.upto(c + k - owners[0][1] * cf)
    if spreads is not None:
        spreads.upto(cf)
    out.round += 1  # the last piece's forwarded partials take the round after it
    return starts


def _interleave(out: _Builder, carriers: list[int], owners: list[int]) -> None:
    """Reorder ``out.ops`` so that the owners' sums of piece ``p`` follow the
    carriers' sums of piece ``p + LEAD`` (``carriers`` and ``owners``: where
    each piece round of the two starts, and where the last ends).

    Unpaired lanes carry both in program order.  Carriers' sums first, then
    owners' sums (as paired lanes do them side by side) end with the last
    piece's network crossing after the box links are done: on DGX A100 x2 the
    NIC is fed at the pace of the owners' sums and the call ends 340 us
    after the NVLinks idle (reduce-scatter, 1 GiB, c16 Simple: 246.0 GB/s).
    With the carriers ``LEAD`` pieces ahead the last crossing overlaps the
    last owners' sums: 254.1 GB/s.  Every op keeps its data dependencies
    (an owner's sum reads a carrier's partial of the same piece, ahead of it);
    rounds become the new groups, carriers' before owners'.
    """
    ops, pieces = out.ops, []
    groups = [list(range(a, b)) for a, b in zip(carriers, carriers[1:])]
    later = [list(range(a, b)) for a, b in zip(owners, owners[1:])]
    for i in range(max(len(groups), len(later) + LEAD)):
        if i < len(groups):
            pieces.append(groups[i])
        if 0 <= i - LEAD < len(later):
            pieces.append(later[i - LEAD])
    head = ops[:carriers[0]]
    new, rounds = list(head), list(out.rounds[:carriers[0]])
    base = max(rounds, default=-1) + 1
    for g, idx in enumerate(pieces):
        for j in idx:
            new.append(dataclasses.replace(ops[j], op_id=len(new)))
            rounds.append(base + g)
    out.ops, out.rounds = new, rounds


def _toward(out: _Builder, u: int, o: int, part: Slot, n: int) -> Slot:
    """Relay ``n`` chunks at ``part`` (on ``u``) down ``u``'s box tree to the
    rank above ``o`` (scratch copies on the ranks between); the slot there."""
    plan = out.plan
    members = plan.groups[out.box_of[u]]
    place = {r: g for g, r in enumerate(members)}
    parent = {b: a for a, b in plan.tree(place[u])}
    path = [place[o]]
    while path[-1] != place[u]:
        path.append(parent[path[-1]])
    for g in reversed(path[1:-1]):  # u's child on the way, ..., o's parent
        hop = Slot(members[g], SCR, out.alloc(members[g], n))
        out.add(OpKind.COPY, part, hop, n)
        part = hop
    return part


def _chain(out: _Builder, r: int, box: list[Slot], crossed: list[Slot], first: Slot,
           acc: Slot, final: Slot, k: int) -> None:
    """``final = first (+) box (+) crossed`` on rank ``r`` through the accumulator
    ``acc`` (``box``: the box peers' inputs or partials; ``crossed``: what
    crossed the rails for ``r``, forwarded by a receiving carrier or landed
    on ``r`` itself).

    Received sources reduce as they arrive (``rrc``), the box peers' first;
    the forwarded partials follow in the next round (``Schedule.rounds``), so
    that on a paired box threadblock a rank's forwarding of a partial, which
    waits for the rails, is listed after its part in the box peers' chains,
    which does not: else every owner's chain stalls behind the last
    crossing (DGX A100 x16 reduce-scatter at 1 GiB, Simple: 149.7 -> 156.1
    GB/s).  Sources already on ``r`` (landed in scratch) are summed into the
    first of them on a local threadblock as they land, and that sum is
    reduced into ``final`` last: one local reduce after the chain instead of
    one per landing (with the rounds: x16 allreduce 67.5 -> 76.5)."""
    sources = box + crossed
    remote = [x for x in sources if x.rank != r]
    local = [x for x in sources if x.rank == r]
    if not remote:  # a box of one rank: everything landed here
        out.add(OpKind.COPY, first, acc, k)
        for src in local:
            out.add(OpKind.REDUCE, src, acc, k, acc)
        out.add(OpKind.COPY, acc, final, k)
        return
    for src in local[1:]:
        out.add(OpKind.REDUCE, src, local[0], k, local[0])
    # With separated rounds (``out.last``) ``_Builder.add`` moves the rounds on
    # itself, and an offset taken back here would undo that.
    later = set(crossed) if out.last is None else set()
    here, prev = out.round, first
    for i, src in enumerate(remote):
        out.round = here + (src in later)
        dst = final if i == len(remote) - 1 else acc
        out.add(OpKind.REDUCE, src, dst, k, prev)
        prev = dst
    if later:
        out.round = here
    if local:
        out.add(OpKind.REDUCE, local[0], final, k, final)


__all__ = ["NAME", "RailPlan", "box_trees", "carrier_place", "fifo_problem", "plan_rails",
           "rail_peers", "rails_schedule", "separated_rounds"]
