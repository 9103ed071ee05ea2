"""``rings2d``'s reduce-scatter over boxes of direct links and on two boxes:
the old two-level form and the crossing form.

The old form (``_reduce_scatter``) runs a ring reduce-scatter inside every
box, then one along every rail.  The crossing form
(``_reduce_scatter_crossing``) runs one box pass per destination box, other
boxes first, in groups of one chunk per ring; each pass's partials cross
straight to their box (``_cross``), are reduced as they land in scratch at
the rail peer and join the own box's chain one place before the owner
(``_box_pass``).

Input invariant: boxes and ring orders from ``box_rings._layout``, a form
``forms.crossing_rings`` accepts.  Output invariant: ops whose schedule
``check_schedule`` proves for the reduce-scatter (in place and out of
place); scratch ``B N cf`` chunks.  Complexity: O(B N cf) ops.
"""

from __future__ import annotations

from collections.abc import Callable

from colc.compiler.rings.rings2d.placement import (IN, OUT, RINGS, SCR, _landing_places, _Ops,
                                                   _rail_channel, _ring_groups, _scatter_ring,
                                                   _send_first, _split_channel)
from colc.compiler.rings.rings2d.split import SPLIT_FREE_PART, _split_pass
from colc.ir.chunks import OpKind, Slot
from colc.ir.core import Collective


def _reduce_scatter(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                    cf: int, n: int, coll: Collective) -> None:
    """Box rings, then rail rings; partials in scratch ``[0, n cf)`` (box phase)
    and ``[n cf, 2 n cf)`` (rail phase)."""
    size, nb = len(groups[0]), len(groups)

    def rail_chunk(box: int, g: int, q: int) -> int:
        return groups[box][g] * cf + q

    def box_partial(rank: int, c: int) -> Slot:
        return Slot(rank, IN, c) if size == 1 else Slot(rank, SCR, c)

    # One ring pass per destination box, the other boxes' chunks first (their
    # network phase then overlaps the pass for the box's own chunks); passes
    # follow each other on the same channels, one message per ring step.
    for k in range(nb):
        for t in range(size - 1):
            for b, members in enumerate(groups):
                b2 = (b + 1 + k) % nb
                for q in range(cf):
                    order = orders[b][q % len(orders[b])]
                    for p in range(size):
                        owner = order[(p - t - 1) % size]
                        sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                        c = rail_chunk(b2, owner, q)
                        src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                        out.add(OpKind.REDUCE, src, Slot(receiver, SCR, c),
                                q % len(orders[b]), Slot(receiver, IN, c))
    for t in range(nb - 1):
        for g in range(size):
            rail = [members[g] for members in groups]
            for q in range(cf):
                for p in range(nb):
                    owner = (p - t - 1) % nb
                    sender, receiver = rail[p], rail[(p + 1) % nb]
                    c = rail_chunk(owner, g, q)
                    src = box_partial(sender, c) if t == 0 else Slot(sender, SCR, n * cf + c)
                    if receiver == rail[owner]:
                        dst = Slot(receiver, OUT, q if coll is Collective.REDUCESCATTER else c)
                    else:
                        dst = Slot(receiver, SCR, n * cf + c)
                    out.add(OpKind.REDUCE, src, dst, q % RINGS, box_partial(receiver, c))


def _reduce_scatter_crossing(out: _Ops, groups: list[list[int]],
                             orders: list[list[list[int]]], cf: int, n: int,
                             coll: Collective, shares: list[float], spread: bool = False,
                             two: int = 0, split: int = 0) -> None:
    """Reduce-scatter in which every partial crosses the network once, and no
    receive waits for the receiver's rings (``crossing_once``).

    The box rings reduce the other boxes' chunks first, nearest box first, in
    groups of one chunk per ring (chunks ``[i R, (i+1) R)``), so the network
    starts after the first group rather than after a whole pass.  The chain
    of box ``d``'s chunk for place ``g`` ends at ``g``'s predecessor ``h`` on
    that ring; ``h`` sends the partial to its rail peer, ``h`` of box ``d``
    (``_rail_channel``), whose landing receive adds it to its input and the
    partials landed before and writes the sum to scratch region ``k`` (the
    boxes between them, ``[k n cf, (k+1) n cf)``).  In the pass over its own
    box's chunks ``h`` reduces with that sum instead of its input, and the
    owner, last on the chain, writes the result to its output: no sum waits
    after the box rings, and a landing receive never waits for the
    receiver's rings (only for the same chunk's earlier landing), so the
    NIC is never held up by a full FIFO.  DGX A100 x2 at 1 GiB, 32 chunks
    per shard, 20 threadblocks (simulated): 250.4 GB/s (247.2 with 21 when a
    local threadblock summed each landed copy); the per-pass order, which
    reduces an arriving partial into the receiver's box result on arrival,
    gave 148.3 with 12 chunks and 24 threadblocks (the receiver waited for
    its own rings, and the sender's FIFO filled).  MI250 x4 (one group per
    pass: 64 steps), 16 chunks, 22 threadblocks: 162.9 at 1 GiB against
    148.4 for RCCL's rings as a file; 163.6 with 24, the next box's
    partials on two connections (``two`` = 1, ``next_box_twice``; an
    allreduce's, every box's where the budget holds them,
    ``second_connections``); 170.7 with 26, the first pass's first
    ``split`` chunks' chains in two halves (``split_chunks``,
    ``_split_pass``), a quarter of the group's chunks beside them and the
    rest held until the halves have taken ``SPLIT_HELD`` steps.
    Each pass's partials cross in the order of their rings' share of their
    most shared link (``ring_shares``, largest first): on an MI250 box 15 of
    16 rings share a single xGMI link three ways and one does not, so its
    partial is ready about 0.35 ms sooner, and sent first it starts the NIC
    at 0.73 ms of the call instead of 1.12 (MI250 x4 at 1 GiB: 160.0 -> 162.9
    GB/s, 140.9 -> 145.3 at 128 MiB; MI250 x2 219.4 -> 224.1).  Behind a box
    switch every ring's share is the same and the order stays ``q``.
    With more rings than chunks (``crossing_rings``) chunk ``q`` of the box
    ``k`` further goes on ring ``_scatter_ring``: the passes alternate
    between ring sets, and a chunk's partials land where the own box's ring
    for it puts them (``_landing_places``; the ring sets repeat one set of
    cycles, so that is next to the owner in every pass, but with
    ``spread``, the form for Simple files on boxes of direct links, where
    they take all the box's cycles).  MI250 x8, 8 chunks on 16 rings, 30
    threadblocks: 140.5 GB/s at 1 GiB against rails' 66.0 (133.6 with one
    set of 8 cycles repeated; spread, the share order only where a pass
    takes every ring: with half of them, in that order, 49.0 instead of
    77.7 at 16 MiB).
    """
    rings, nb = len(orders[0]), len(groups)

    def landed(rank: int, c: int, k: int = nb - 1) -> Slot:
        return Slot(rank, SCR, k * n * cf + c)

    scatter = coll is Collective.REDUCESCATTER
    for k in (*range(1, nb), 0):  # the other boxes' chunks first, then the own box's
        for i, qs in enumerate(_ring_groups(cf, rings)):
            if k == 1 and i == 0 and split:
                gate = _split_pass(out, groups, orders[0], qs[:split], cf, landed,
                                   _split_channel(rings, nb, two))
                free = split + len(qs) // SPLIT_FREE_PART
                _box_pass(out, groups, orders, qs[split:free], cf, k, landed, scatter)
                _box_pass(out, groups, orders, qs[free:], cf, k, landed, scatter, gate=gate)
            else:
                _box_pass(out, groups, orders, qs, cf, k, landed, scatter)
            if k:
                _cross(out, groups, orders[0], qs, cf, k, landed,
                       shares if len(qs) == rings or not spread else None, two=two)


def _cross(out: _Ops, groups: list[list[int]], orders: list[list[int]], qs: range, cf: int,
           k: int, landed: Callable[..., Slot], shares: list[float] | None = None, *,
           onto: Callable[[int, int], Slot] | None = None,
           two: int = 0, held: dict[int, int] | None = None) -> None:
    """Send the partials of chunks ``qs`` of the boxes ``k`` further over the
    rails; the landing receive adds each to the receiver's running sum
    (``_reduce_scatter_crossing``).  Chunks go largest ring share first
    (``shares``; None: in order), boxes in ``_send_first`` order; each
    partial lands at ``_landing_places``'.
    ``two``: the distances up to ``two`` cross on two connections
    (``_rail_channel``: the switched reduce-scatter's, and the crossing
    one's next box, ``next_box_twice``);
    ``onto``: the crossing goes from the owner's place to the owner, whose
    landing adds it to ``onto(rank, chunk)`` (its own box's sum, or the
    landing before) and writes region ``k``, or from the last distance, the
    output;
    ``held``: rank -> op after which the rank's first crossing of these
    chunks on each channel starts (``Schedule.gates``)."""
    rings, nb = len(orders), len(groups)
    if shares is not None:
        qs = sorted(qs, key=lambda q: -shares[_scatter_ring(q, k, cf, rings, nb)])
    started: set[tuple[int, int]] = set()  # (sender, channel) with a crossing
    for q in qs:
        order = orders[_scatter_ring(q, k, cf, rings, nb)]
        lands_at = _landing_places(orders, q, cf, nb)[0]
        for b in _send_first(nb, k):
            members, dest = groups[b], groups[(b + k) % nb]
            for g in order:
                h = lands_at[g] if onto is None else g
                c = dest[g] * cf + q
                if onto is None:
                    dst = landed(dest[h], c, k)
                    before = Slot(dst.rank, IN, c) if k == 1 else landed(dst.rank, c, k - 1)
                else:  # the last distance writes a reduce-scatter's result
                    dst = Slot(dest[g], OUT, q) if k == nb - 1 else landed(dest[g], c, k)
                    before = onto(dest[g], c)
                channel = _rail_channel(rings, nb, q, k, two)
                gate = -1
                if held is not None and (members[h], channel) not in started:
                    started.add((members[h], channel))
                    gate = held.get(members[h], -1)
                out.add(OpKind.REDUCE, Slot(members[h], SCR, c), dst, channel, before, gate)


def _box_pass(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
              qs: range, cf: int, k: int, landed: Callable[..., Slot],
              scatter: bool = True, *, to_place: bool = False, joins: int | None = None,
              gate: dict[int, int] | None = None, dests: list[int] | None = None,
              last: int = 0) -> None:
    """One ring pass of ``_reduce_scatter_crossing`` over chunks ``qs``: of
    the box ``k`` further (chains end one place early, or with ``to_place``
    at the place whose rail peer owns the chunk) or, ``k == 0``, of the own
    box (the chain's next-to-last rank reduces with its landed sum, region
    ``joins`` (default the last), and the owner writes its output, or with
    ``to_place`` its scratch, to which the last crossing adds).  ``gate``:
    rank -> op its chains' first sends wait for (``Schedule.gates``);
    ``dests``: box ``b``'s chunks are box ``dests[b]``'s, not the box ``k``
    further's; ``last``: the chain's last rank (with ``to_place`` the one
    before it) reduces with its landed sum, region ``last``, not its input
    (the grid's forwarded partials).  Where and what the chain joins is
    ``_landing_places``': a chain not ending at its owner's place ends at
    the place the own box's ring for the chunk has before the owner, and
    the landed sum joins at that place wherever the pass's ring has it
    (the same as above when every pass of the chunk takes one cycle)."""
    size, nb = len(groups[0]), len(groups)
    ends_at_place = to_place or not k
    region = nb - 1 if joins is None else joins
    # the landed sum joins the chain (k: region ``last``; the own box:
    # ``region``) at the chunk's landing place
    join = region if not k else last
    # the crossing forms' boxes ring alike (``rings2d_schedule``)
    places = {q: _landing_places(orders[0], q, cf, nb) for q in qs}
    for t in range(size - 1):
        for b, members in enumerate(groups):
            dest = groups[(b + k) % nb if dests is None else dests[b]]
            for q in qs:
                ring = _scatter_ring(q, k, cf, len(orders[b]), nb)
                order = orders[b][ring]
                before, after = places[q]
                for p in range(size):
                    sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                    end = order[(p - 1 - t) % size]  # the place this chain ends at
                    g = end if ends_at_place else after[end]
                    c = dest[g] * cf + q
                    src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                    dst, operand = Slot(receiver, SCR, c), Slot(receiver, IN, c)
                    if not k and t == size - 2 and not to_place:
                        dst = Slot(receiver, OUT, q if scatter else c)
                    if join and order[(p + 1) % size] == before[g]:
                        operand = landed(receiver, c, join)
                    elif join and t == 0 and order[p] == before[g]:
                        src = landed(sender, c, join)
                    held = gate.get(sender, -1) if gate and t == 0 else -1
                    out.add(OpKind.REDUCE, src, dst, ring, operand, held)
