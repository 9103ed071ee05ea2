"""``rings2d``'s allgathers (and an allreduce's second half).

``_allgather`` is the old two-level form (rails, then box rings);
``_allgather_crossing`` sends every shard to every other box at once and
hands the landed chunks round the box rings in landing order;
``_allgather_grid`` does the same in stages over a grid of boxes, its rings
ordered by ``grid.landing_times``; ``_allgather_two`` follows the two-box
crossing reduce-scatter on its threadblocks.  ``_gather_pass`` is one ring
pass handing one chunk of every place round a box.

Input invariant: boxes and ring orders from ``box_rings._layout``; for an
allreduce, the owners' results in their outputs.  Output invariant: ops
that leave every rank's output complete.  Complexity: O(B N cf) ops, the
landing estimate O(B cf sum(d_i - 1)).
"""

from __future__ import annotations

import math

from colc.compiler.rings.grid import landing_order, landing_times, shifted, stage_of, stage_sends
from colc.compiler.rings.rings2d.placement import (IN, OUT, RINGS, _channel, _gather_ring,
                                                   _grid_channel, _local_channel, _Ops,
                                                   _rail_channel, _ring_loads, _send_first,
                                                   _two_last)
from colc.ir.chunks import OpKind, Slot
from colc.ir.core import Collective

#: The staged allgather hands its landed chunks round in the order they
#: land on rings this many apart: on boxes of direct links the packed
#: cycles repeat on neighbouring rings (MI250: rings 0-2 are one cycle), and
#: chunks landing one after another on them share links (MI250 x16 at 1 GiB:
#: 141.2 GB/s, 137.6 with stride 11 and 134.0 with 1; x32 136.6 against
#: 129.9; x64 134.5 against 128.0); behind a box switch 1 and 7 give the same.
GRID_RING_STRIDE = 7


def _allgather_two(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                   cf: int) -> None:
    """An allreduce's second half after ``_reduce_scatter_crossing``, on its
    threadblocks: every owner sends its reduced chunk to its rail peer (the
    network channels), then each box ring hands round its own box's chunks
    and then the other box's, one chunk at a time (all of a chunk's steps
    before the next: two messages per ring step fill a FIFO of two calls, and
    a ring step that must send into a full FIFO before it frees its own
    waits for ever).  MI250 x2 at 1 GiB, 16 chunks per shard, 20
    threadblocks (simulated): 95.7 GB/s, against 78.9 for the old two-level
    rings with 24."""
    size, rings = len(groups[0]), len(orders[0])
    for q in range(cf):
        for b, members in enumerate(groups):
            for g in range(size):
                c = members[g] * cf + q
                out.add(OpKind.COPY, Slot(members[g], OUT, c), Slot(groups[1 - b][g], OUT, c),
                        _rail_channel(rings, 2, q, 1))
    for q in range(cf):
        for k in (0, 1):  # the own box's chunk, then the other box's
            _gather_pass(out, groups, orders, cf, k, q, q % rings)


def _gather_pass(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]], cf: int,
                 k: int, q: int, ring: int, from_input: bool = False,
                 sources: list[int] | None = None) -> None:
    """One ring pass that hands chunk ``q`` of the box ``k`` back (of box
    ``sources[b]`` in box ``b``) round every box on ring ``ring`` (from the
    output, or ``from_input``: the own box's chunks from the owners'
    inputs)."""
    size, nb = len(groups[0]), len(groups)
    for t in range(size - 1):
        for b, members in enumerate(groups):
            source = groups[(b - k) % nb if sources is None else sources[b]]
            order = orders[b][ring]
            for p in range(size):
                sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                c = source[order[(p - t) % size]] * cf + q
                src = (Slot(sender, IN, q) if from_input and t == 0
                       else Slot(sender, OUT, c))
                out.add(OpKind.COPY, src, Slot(receiver, OUT, c), ring)


def _allgather_crossing(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                        cf: int, reduced: bool = False) -> None:
    """Allgather in which every shard crosses the network once, at once
    (``reduced``: an allreduce's second half, from the owners' reduced
    chunks in their outputs, on the reduce-scatter's threadblocks).

    Every rank copies its shard to its output and sends it to its rail peer
    in every other box (``_rail_channel``; chunk by chunk, so chunk ``q``
    lands everywhere at about the same time).  The box rings hand round the
    own box's chunks first (chunk ``q`` on ring ``q``), then every landed
    chunk in the order the chunks land (by ``q``), chunk ``q`` of the box
    ``k`` back on ring ``(q + k R / B) mod R``: each ring takes one chunk of
    each box, and the chunks that land last (``q = cf - 1``) are handed
    round by different rings at once, so the call ends one ring pass after
    the network (MI250 x4, 16 chunks, 1 GiB: 171.6 GB/s with 23
    threadblocks; every box's chunk ``q`` on ring ``q``: 126.5; RCCL's
    rings as a file 146.6).
    """
    size, nb, rings = len(groups[0]), len(groups), len(orders[0])

    def shard(r: int, q: int) -> Slot:
        return Slot(r, OUT, r * cf + q) if reduced else Slot(r, IN, q)

    if not reduced:  # an allreduce's owners hold their results in the output already
        for r in (r for members in groups for r in members):
            for q in range(cf):
                out.add(OpKind.COPY, Slot(r, IN, q), Slot(r, OUT, r * cf + q),
                        _local_channel(rings, nb))
    for q in range(cf):
        for k in range(1, nb):
            for b in _send_first(nb, k):
                members, dest = groups[b], groups[(b + k) % nb]
                for g in range(size):
                    out.add(OpKind.COPY, shard(members[g], q),
                            Slot(dest[g], OUT, members[g] * cf + q),
                            _rail_channel(rings, nb, q, k))
    order_of_passes = ([(0, q) for q in range(cf)]
                       + [(k, q) for q in range(cf) for k in range(1, nb)])
    for k, q in order_of_passes:
        _gather_pass(out, groups, orders, cf, k, q, _gather_ring(q, k, cf, rings, nb),
                     from_input=k == 0 and not reduced)


def _allgather_grid(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                    cf: int, dims: tuple[int, ...], reduced: bool = False,
                    second: bool = True) -> None:
    """The crossing allgather in stages over a grid of boxes (``grid``;
    ``reduced``: an allreduce's second half, from the owners' results in
    their outputs).

    Every rank copies its shard to its output; in stage ``i`` it sends to
    its rail peer in each box along dimension ``i`` its own shard and those
    landed in the earlier stages (``stage_sends``; chunk by chunk, on a
    channel per stage and distance after the rings); the box rings hand
    round the own box's chunks, then the landed ones in the order they
    land (``grid.landing_times``, ties in ``landing_order``), the ``i``-th
    on ring ``i * GRID_RING_STRIDE mod R``: chunks that land together, one
    per distance, go round on different rings, and the rings take as many
    passes, within one.  Network sends and receives are lowered on
    threadblocks of their own: ``R + 2 sum(d_i - 1) + 1`` per rank, one
    more with ``_two_last``.

    DGX A100 at 1 GiB, 29-31 threadblocks (simulated): x16 (4 x 4, 8
    chunks per shard) 173.5 GB/s, against 132.3 for the crossing form with
    15 paired network threadblocks and 162.3 for rails.  Handing the
    chunks round stage by stage, chunk ``q`` of the ``x``-th source on
    ring ``(q + x) mod R``, put chunks that land together on one ring (x32,
    2 x 4 x 4: those of the boxes 8 and 24 back; x64, 2 x 2 x 2 x 2 x 4:
    those of all three distances), and the rings ended one after another
    after the network's last byte: x32 156.7 -> 166.1, x64 (2 chunks)
    146.1 -> 163.4, MI250 x64 (1 chunk) 103.3 -> 134.5; an allreduce's
    halves of 2 x 4 x 4 (x64) 71.8 -> 75.7.  On a grid of 2s
    (``_two_last``: x128, 2^7) the last stage's chunks alternate between
    its connection and a second one on the first stage's channel (32
    threadblocks): one NET connection fills 56% of a NIC, and the NIC was
    70-88% busy in the call's second half (1 GiB 151.6 -> 162.4 GB/s, 128
    MiB 68.3 -> 101.3; the landing estimate takes the two connections, and
    without that the rings' order no longer matched the landings: 147.2).

    Complexity: ``O(B^2 cf S^2)`` ops for boxes of ``S`` ranks; the
    landing estimate ``O(B cf sum(d_i - 1))`` and its sort ``O(B cf log(B cf))``.
    """
    size, rings = len(groups[0]), len(orders[0])
    local = rings + sum(d - 1 for d in dims)
    for r in (r for members in groups for r in members if not reduced):
        for q in range(cf):
            out.add(OpKind.COPY, Slot(r, IN, q), Slot(r, OUT, r * cf + q), local)
    sends = list(stage_sends(dims, _send_first))
    two = second and not reduced and _two_last(dims)
    for q in range(cf):
        for send in sends:
            members, dest = groups[send.sender], groups[send.dest]
            channels = [_grid_channel(rings, dims, send.stage, send.distance)]
            if two and send.stage == len(dims):  # odd places on the second connection
                channels.append(_grid_channel(rings, dims, 1, 1))
            for i, j in enumerate(send.sources, q * len(send.sources)):
                channel = channels[i % len(channels)]
                for g in range(size):
                    c = groups[j][g] * cf + q
                    src = (Slot(members[g], IN, q) if j == send.sender and not reduced
                           else Slot(members[g], OUT, c))
                    out.add(OpKind.COPY, src, Slot(dest[g], OUT, c), channel)
    offsets = landing_order(dims)
    passes = [(0, q) for q in range(cf)]
    for stage in range(1, len(dims) + 1):
        xs = [x for x, off in enumerate(offsets) if stage_of(off) == stage]
        passes += [(x, q) for q in range(cf) for x in xs]
    sources = [[shifted(b, tuple(-o for o in off), dims) for b in range(len(groups))]
               for off in offsets]
    # an allreduce's ring steps were fitted with ``_gather_ring``'s loads
    # beside the reduce-scatter's: keep its rings where the turns' loads differ
    turns = not reduced or len(set(_ring_loads(len(groups), cf, rings, _gather_ring))) == 1
    if turns:
        times = landing_times(dims, cf, two)
        passes.sort(key=lambda xq: times[offsets[xq[0]], xq[1]])
    stride = GRID_RING_STRIDE if math.gcd(GRID_RING_STRIDE, rings) == 1 else 1
    for i, (x, q) in enumerate(passes):
        ring = i * stride % rings if turns else _gather_ring(q, x, cf, rings, len(groups))
        _gather_pass(out, groups, orders, cf, 0, q, ring,
                     from_input=x == 0 and not reduced, sources=sources[x])


def _allgather(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
               cf: int, coll: Collective) -> None:
    """Rail rings (from the owner's input, or its reduced output), then box rings."""
    size, nb = len(groups[0]), len(groups)
    first = IN if coll is Collective.ALLGATHER else OUT
    if coll is Collective.ALLGATHER:
        for r in range(sum(len(g) for g in groups)):
            for q in range(cf):
                out.add(OpKind.COPY, Slot(r, IN, q), Slot(r, OUT, r * cf + q), q % RINGS)
    for t in range(nb - 1):
        for g in range(size):
            rail = [members[g] for members in groups]
            for q in range(cf):
                for p in range(nb):
                    owner = rail[(p - t) % nb]
                    c = owner * cf + q
                    src_buf, idx = (first, q) if t == 0 and first is IN else (OUT, c)
                    out.add(OpKind.COPY, Slot(rail[p], src_buf, idx),
                            Slot(rail[(p + 1) % nb], OUT, c), q % RINGS)
    for t in range(size - 1):
        for b, members in enumerate(groups):
            for q in range(cf):
                order = orders[b][q % len(orders[b])]
                for p in range(size):
                    owner = order[(p - t) % size]
                    sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                    for b2, box in enumerate(groups):
                        c = box[owner] * cf + q
                        src = (Slot(sender, IN, q) if first is IN and t == 0
                               and box[owner] == sender else Slot(sender, OUT, c))
                        out.add(OpKind.COPY, src, Slot(receiver, OUT, c),
                                _channel(q, b2, len(orders[b])))
