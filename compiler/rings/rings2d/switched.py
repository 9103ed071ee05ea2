"""``rings2d``'s reduce-scatter behind box switches from three boxes: the
switched form.

Where the boxes outpace their NICs, the network must start early and end
in the owners' outputs: part of the first pass's rings go first and the rest
wait (``FIRST_PART``, ``Schedule.gates``), with two groups a pass the first
chunks' chains split (``split``), every distance may cross on two channels,
and the last distances' chains end at the owner's place and land at the
owner (``TWO_TO_OWNER``), the last one's crossings held until most of the
distance before's have left (``LAST_HELD``).

Input invariant: as ``scatter``, with ``forms.switched_form`` true.
Output invariant: as ``scatter``.  Complexity: O(B N cf) ops.
"""

from __future__ import annotations

from colc.compiler.rings.rings2d.placement import (MAX_CHANNELS, SCR, _Ops, _ring_groups,
                                                   _split_channel)
from colc.compiler.rings.rings2d.scatter import _box_pass, _cross
from colc.compiler.rings.rings2d.split import SPLIT_FREE_PART, _split_pass
from colc.ir.chunks import Slot

#: Share of the first pass's chunks whose rings go first in the switched
#: reduce-scatter (``_reduce_scatter_switched``), the others starting when
#: these are one step from their ends: DGX A100 x8 at 1 GiB 183.1 GB/s with
#: 11/16 or 3/4, 182.8 with 5/8, 181.5 with 13/16, 179.3 with 3/8.
FIRST_PART = (11, 16)
#: Boxes from which the switched reduce-scatter sends its last two
#: crossings, not one, from the owner's place to the owner, after its own
#: box's pass (DGX A100 at 1 GiB: x8 182.0 -> 183.1 GB/s; x4 190.7 -> 162.4,
#: the own box's pass is not done when the first of them lands; x6 184.2 ->
#: 183.8).
TWO_TO_OWNER = 8
#: In the switched reduce-scatter with two groups a pass
#: (``_reduce_scatter_switched``), a rank's first crossings of the last
#: distance start once it has sent this part of the distance before's: the
#: owner adds a last-distance landing onto its own box's sum, which waits for
#: the landings of the distance before, so a last-distance partial sent early
#: holds its connection (the receiver takes no credit) while that distance's
#: partials still cross.  DGX A100 x4, 32 chunks per shard (simulated):
#: 768 MiB 202.7 -> 206.5 GB/s, 1 GiB 209.2 -> 211.2, 2 GiB 213.8 -> 214.9;
#: 11/16 gave 209.8 at 1 GiB, 13/16 208.9; 512 MiB loses (196.9 -> 193.0), a
#: size rails serves.
LAST_HELD = (3, 4)


def _reduce_scatter_switched(out: _Ops, groups: list[list[int]],
                             orders: list[list[list[int]]], cf: int, n: int,
                             split: int = 0) -> None:
    """The crossing reduce-scatter where the boxes are faster than their
    NICs (behind a box switch): the network's start and end are what is
    left to gain.

    * The first pass's rings go in two parts: ``FIRST_PART`` of its chunks,
      then the rest, whose chains start on each rank once the first part's
      last ring is one step from its end there (``Schedule.gates``).  A
      part of the rings alone ends its pass sooner (the threadblocks' pace
      bounds it, not the box's links), so the network starts sooner, and the
      rest is ready before the network has carried the first part.  The
      first pass crosses on two channels (one connection does not fill a
      NIC).
    * With more chunks than rings (DGX A100 x4 with 32 chunks per shard
      fills its rings' 64 steps) each pass goes in groups of one chunk per
      ring, the first part from the first group: a chain's step moves
      half as much, so the network starts after half the time (0.40 ms
      of a 5.1 ms call instead of 0.75 of 5.6), and every distance
      crosses on two channels (``two``; 28 threadblocks).
    * The chains of the last distance (the last two from ``TWO_TO_OWNER``
      boxes) end at the owner's place, whose rail peer is the owner.  The
      own box's pass runs before those crossings and leaves its sum (with
      the partials landed so far) in the owner's scratch; their landings add
      to it, the last into the output.  After the network's last byte only
      that receive is left, not two ring steps, and with two such distances
      the own box's sum no longer waits for a landing that arrives with the
      last crossings.
    * With two groups a pass, a rank's first crossings of the last distance
      wait until it has sent ``LAST_HELD`` of the distance before's
      (``Schedule.gates``): their landings add onto the own box's sums,
      which wait for that distance's landings, and a partial sent too early
      holds its connection while the distance before still crosses.
    * With ``split`` (``split_chunks``), the first pass starts with that
      many chunks whose chains run in two halves (``_split_pass``) and
      a quarter of the group whole (``SPLIT_FREE_PART``); the rest of the
      first group waits until the halves have taken ``SPLIT_HELD`` steps
      on the rank.  A ring
      threadblock moves one chunk a step, so a chain's length, not the
      box's links, is what the network waits for at the start (DGX A100
      x4 at 1 GiB: the NIC's first byte at 396 us, 211.2 GB/s; with 4 split
      chunks, 32 threadblocks, 217.1).

    DGX A100 x8 at 1 GiB, 16 chunks per shard, 32 threadblocks (simulated):
    183.1 GB/s (80% of the cut bound is 182.9), against 174.8 for the
    crossing form, 177.0 for NCCL's rings as a file; by step: the last
    crossing into the output 176.8, the two parts 179.8, two channels
    181.7, the last two distances to the owner 182.6, the held-back chains
    starting a step sooner 183.1.  DGX A100 x4: 190.7 against 180.4 with
    16 chunks per shard; with 32, 211.2 against rails' 201.7 (209.2 before
    ``LAST_HELD``, 200.7 with one channel for the distances after the
    first; a single group, 16 chunks, on two channels each: 196.2).  On
    MI250 boxes, where the rings bound the box, it loses (x4 at 1 GiB:
    162.9 -> 160.6), and an allreduce's crossing allgather from the
    landings hangs, so neither takes it.
    """
    nb = len(groups)
    # the last distances, whose chains end at the owner's place
    owned = min(2 if nb >= TWO_TO_OWNER else 1, nb - 2)
    ahead = nb - 1 - owned  # the last distance whose landing the own box's pass joins

    def landed(rank: int, c: int, k: int) -> Slot:
        return Slot(rank, SCR, k * n * cf + c)

    rings = len(orders[0])
    lots = _ring_groups(cf, rings)
    # with two groups a pass, every distance crosses on two connections
    two = nb - 1 if len(lots) > 1 and rings + 2 * (nb - 1) <= MAX_CHANNELS else 1
    first = max(1, len(lots[0]) * FIRST_PART[0] // FIRST_PART[1])
    parts = (range(first), lots[0][first:]) if first < len(lots[0]) else (lots[0],)
    gate: dict[int, int] = {}
    if split:
        gate = _split_pass(out, groups, orders[0], range(split), cf, landed,
                           _split_channel(rings, nb, two))
        _cross(out, groups, orders[0], range(split), cf, 1, landed, two=two)
        free = split + len(lots[0]) // SPLIT_FREE_PART
        parts = (lots[0][split:free], lots[0][free:])
    for qs in (*parts, *lots[1:]):
        start = len(out.ops)
        if split and qs is parts[0]:  # the whole chunks beside the split ones
            _box_pass(out, groups, orders, qs, cf, 1, landed)
            _cross(out, groups, orders[0], qs, cf, 1, landed, two=two)
            continue
        _box_pass(out, groups, orders, qs, cf, 1, landed, gate=gate)
        # the held-back chains start on a rank once the last ring of this
        # part is one step from its end there (its ops go step by step, so
        # the part's other rings are about as far)
        steps = (len(out.ops) - start) // (len(groups[0]) - 1)
        gate = ({op.dst.rank: op.op_id for op in out.ops[start:len(out.ops) - steps]}
                if qs is parts[0] and len(parts) > 1 else {})
        _cross(out, groups, orders[0], qs, cf, 1, landed, two=two)
    sent: dict[int, list[int]] = {}  # sender -> its crossings of distance ``ahead``
    for k in range(2, ahead + 1):
        for qs in lots:
            _box_pass(out, groups, orders, qs, cf, k, landed)
            start = len(out.ops)
            _cross(out, groups, orders[0], qs, cf, k, landed, two=two)
            if k == ahead:
                for op in out.ops[start:]:
                    sent.setdefault(op.src.rank, []).append(op.op_id)
    # with two groups a pass, the last distance's crossings wait for most of
    # the distance before's (their landings add onto sums that wait for it)
    held = ({r: ids[len(ids) * LAST_HELD[0] // LAST_HELD[1]] for r, ids in sent.items()}
            if len(lots) > 1 else None)
    for k in range(ahead + 1, nb):
        for qs in lots:
            _box_pass(out, groups, orders, qs, cf, k, landed, to_place=True)
    for qs in lots:
        _box_pass(out, groups, orders, qs, cf, 0, landed, to_place=True, joins=ahead)
    for k in range(ahead + 1, nb):
        def onto(rank: int, c: int, k: int = k) -> Slot:
            return Slot(rank, SCR, c) if k == ahead + 1 else landed(rank, c, k - 1)
        for qs in lots:
            _cross(out, groups, orders[0], qs, cf, k, landed, onto=onto,
                   two=two, held=held if k == ahead + 1 else None)
