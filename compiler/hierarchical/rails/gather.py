"""rails' allgather, and an allreduce's second half.

Input: a ``_Builder`` on a ``RailPlan``.  Output: its ops: own shards to the
box peers, each segment across its rail to every other box, the landed
segments on to the box peers (``_allgather``); an allreduce's owners'
reduced shards spread as their sums end (``_OwnSpreads``); on eight boxes
the crossings started one after another (``_staggered``); a Simple file's
crossings with halved last pieces (``_tapered``) and its last relays off
the own shards' lane (``_spare_first_lane``).  O(N (G + nb S / G) cf /
piece) ops.  Seed 004 section 5.3.
"""

from __future__ import annotations

from colc.compiler.hierarchical.rails.builder import _Builder, _by_receiver, _piece_list, _spread
from colc.compiler.hierarchical.rails.plan import (
    IN,
    OUT,
    STEPS_PER_LANE,
    RailPlan,
    _contiguous,
    _segments,
)
from colc.ir.chunks import OpKind, Slot
from colc.ir.core import Buffer

#: An allreduce's crossings a rank starts at once, and the pieces each later
#: one starts after the one before it (``_staggered``).
STAGGER_FREE = 3
STAGGER_PIECES = 1


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
