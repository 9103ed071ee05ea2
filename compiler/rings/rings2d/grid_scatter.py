"""``rings2d``'s reduce-scatter in stages over a grid of boxes (an allreduce's
first half), from 16 boxes.

The grid (``forms.box_grid``) goes backwards, the last dimension first: each
box's chain for box ``X`` ends one place early and its last rank reduces
with the partials landed for ``X`` in the stages before; the home passes
(each stage's last) land at the owner.  The first pass may take a second
connection (``_grid_spare``) and split chains (``split``); the later passes
of the first stage wait (``GRID_HELD``, ``GRID_HELD_PART``,
``HALF_HELD_AT_ONCE``); on grids whose first two dimensions are 2s the last
stage forwards as it lands (``_fuses_last``).

Input invariant: boxes and ring orders from ``box_rings._layout``, a grid
of at least two dimensions.  Output invariant: ops whose schedule
``check_schedule`` proves; landings chained in scratch region ``l``.
Complexity: O(B N cf) ops.
"""

from __future__ import annotations

from colc.compiler.rings.grid import landing_order, line_sends, shifted, stage_of
from colc.compiler.rings.rings2d.placement import (IN, OUT, SCR, _fuses_last, _grid_channel,
                                                   _grid_spare, _grid_split_channel,
                                                   _landing_places, _Ops, _scatter_ring,
                                                   _send_first)
from colc.compiler.rings.rings2d.scatter import _box_pass
from colc.compiler.rings.rings2d.split import GRID_SPLIT_HELD_PART, _split_pass
from colc.ir.chunks import OpKind, Slot

#: Steps from the ends of the first pass's chains at which the held passes
#: start in the grid's reduce-scatter (``_reduce_scatter_grid``): the first
#: alone crosses sooner.  DGX A100 x16 at 1 GiB, 8 chunks per shard: 168.0
#: GB/s with both at once, 168.7 with 1 step, 170.3 with 2, 170.1 with 3;
#: x64 (2 chunks, the last four of eight passes held): 163.5 with 4, 162.7
#: with 6, 164.0 with 2.
GRID_HELD = 2
#: Passes of the grid's first stage at once (``R / cf``) from which an
#: allreduce holds back the second half of them (a reduce-scatter a
#: quarter, ``GRID_HELD_PART``), not only the second pass
#: (``_reduce_scatter_grid``).  Simulated at 1 GiB (twenty-fifth session):
#: DGX A100 x64 (paired halves, 2 chunks, 8 at once) 75.7 -> 76.4 GB/s (128
#: MiB 60.7 -> 61.2), x128 (1 chunk, 16) 74.3 -> 75.2, MI250 x32 (2 chunks)
#: 59.9 -> 60.9 (56.8 -> 57.5), MI250 x64 (1 chunk) 59.3 -> 59.1; with 4 at
#: once the half lost (x16 82.1 -> 81.9, x32 79.4 -> 79.1).
HALF_HELD_AT_ONCE = 8
#: A reduce-scatter holds back the last ``1 / GRID_HELD_PART`` of the first
#: stage's passes at once (``_reduce_scatter_grid``; an allreduce the second
#: half, ``HALF_HELD_AT_ONCE``): twelve of sixteen passes at once fill the
#: NIC sooner than eight.  Simulated at 1 GiB (twenty-eighth session), with
#: a half / a quarter held: DGX A100 x32 (4 chunks, 4 at once) 166.5 /
#: 166.8 GB/s, x64 (2 chunks, 8 at once) 164.1 / 164.5, x128 (1 chunk, 16
#: at once) 161.3 / 161.8; x16 (8 chunks, 2 at once) holds the second pass
#: either way.  Holding the last eighth lost at x128 (159.5).
GRID_HELD_PART = 4


def _reduce_scatter_grid(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                         cf: int, n: int, dims: tuple[int, ...], scatter: bool = True,
                         spare: bool = True, split: int = 0) -> None:
    """The crossing reduce-scatter in stages over a grid of boxes
    (``grid``): the allgather's stages backwards, the last dimension first.

    Box ``b``'s partials for box ``X`` cross at the stage of the last
    dimension they still differ in, ``s``, to the box along ``s`` that
    agrees with ``X`` there; the partials a box forwards are its own box's
    chain's sum with the partials landed for ``X`` in the stages before
    (``_box_pass`` ``last``).  So in stage ``s`` a rank sends, to its rail
    peer in each box along dimension ``s``, the partials for every box that
    differs from that one only in the dimensions before ``s``: as many as
    the allgather forwards there.  A landing adds to the chunk's landing
    before it (the first to the receiver's input), in scratch region ``l``
    (its ``l``-th landing of that chunk).  A reduce-scatter's passes whose
    partials are for the receiving box itself (each stage's last, the
    *home* passes) end at the owner's place and cross to the owner: the
    first landing adds to the own box's sum (region 0: its pass, which
    joins nothing, runs after the first stage's passes), each later one to
    the landing before, the last into the output.  So no ring step waits
    for a landing, and after the network's last byte only the landings
    that arrived with it are left (DGX A100 x64 at 1 GiB: 159.7 -> 161.4
    GB/s, x32 165.4 -> 166.9, x16 172.3 -> 172.1, under the simulator of
    2026-11-29; before, only the last stage's landed at the owner, onto a
    sum the own box's pass made one place before it from the other
    stages' landings, and that pass's last ring steps ran after the
    network's last byte).  Where the grid's first two dimensions are 2s
    (``_fuses_last``: DGX A100 x64 and x128, MI250 x64; at most two chunks
    per shard) the last stage's partial for a box takes one landing from the
    stage before, the last to arrive: that landing goes to the owner's
    place, onto the last stage's chain there (which joins the earlier
    landings one place before), and the last stage sends it from there on
    the landing's channel, so the lowering fuses the receive with the
    forwarding send and the last crossing starts as its input lands, not
    after two more ring steps (x128 at 1 GiB: the NIC idled from 6.4 ms
    while a single chunk crossed the last stage; 160.3 -> 161.3 GB/s, x64
    164.0 -> 164.1, with two threadblocks fewer, ``pair_mirrors``).  An
    allreduce's landings all go one place before the owner and its own
    box's pass comes last, joining them (its
    allgather's first sends would wait in the threadblock of the last
    landing, whose FIFO the landings have filled).  Passes go stage by
    stage, taking the ring sets in turn in the order listed (with more
    rings than chunks, ``R / cf`` run at once), the first on two
    connections where a threadblock pair more fits (``_grid_spare``); the
    last quarter of the first stage's passes that run at once
    (``GRID_HELD_PART``; the second pass with 8 chunks on 16 rings, the
    last 2 of 8 with 2; an allreduce's second half) is held back
    until the first's chains are ``GRID_HELD`` steps from their ends
    (``Schedule.gates``): the network starts sooner, on more connections
    (x64 161.4 -> 164.0, x128 157.6 -> 160.3 where only the second pass was
    held; x32 166.9 -> 166.5); an allreduce with fewer than
    ``HALF_HELD_AT_ONCE`` (8) passes at once holds only its second pass (x16
    82.1 against 81.9 with the half, x32 79.4 against 79.1; from 8 the half:
    DGX A100 x64 75.7 -> 76.4, x128 74.3 -> 75.2).  With ``split``
    (``split_chunks``) the first pass's first chunks run their chains in
    two halves (``_split_pass``, on the channels after the grid's,
    ``_grid_split_channel``), its last ``1 / GRID_SPLIT_HELD_PART`` waits
    until the halves have taken ``SPLIT_HELD`` steps, the rest go whole at
    once, and the held passes wait for those whole chunks' chains: the
    network's first byte at 0.49 ms instead of 0.82 (DGX A100 x16
    allreduce at 1 GiB, 82.1 -> 83.2 GB/s, 32 threadblocks).  Network
    sends and receives on threadblocks of their own: ``R + 2 sum(d_i - 1)``
    per rank, 2 more with the second connection, 2 fewer with a fused last
    stage (lowered with ``pair_mirrors``; 1 without), one per split chunk.
    DGX A100 x16 (4 x 4) at 1 GiB, 8 chunks per shard, 30 threadblocks
    (simulated): 171.2 GB/s (80% of the cut bound: 170.7; rails 162.0);
    170.3 with the last stage landing one place before the owner, 164.9
    with the passes' rings by their offsets, one connection and no held
    pass; x32 (2 x 4 x 4, 4 chunks, 32): 164.9 before the landings at the
    owner (159.5 before that; rails 144.7).
    """
    nb, rings = len(groups), len(orders[0])
    offsets = landing_order(dims)
    qs = range(cf)

    def landed(rank: int, c: int, k: int) -> Slot:
        return Slot(rank, SCR, k * n * cf + c)

    def before(s: int) -> int:  # landings of a chunk before stage ``s`` (1-based) sends it
        return sum(d - 1 for d in dims[s:])

    def onward(x: int, s: int) -> tuple[int, ...]:  # the offset left after stage ``s``
        return tuple(0 if j == s - 1 else o for j, o in enumerate(offsets[x]))

    spare = spare and _grid_spare(rings, dims)
    # the last stage forwards the stage before's landings as they arrive
    fused = scatter and _fuses_last(dims, cf)
    stages: dict[int, list[int]] = {}
    ks: dict[int, int] = {}  # pass -> its ring set (``_scatter_ring``)
    for s in range(len(dims), 0, -1):
        # the partials the receiver forwards first go first, those for itself last
        stages[s] = sorted((x for x, off in enumerate(offsets) if stage_of(off) == s),
                           key=lambda x: (-stage_of(onward(x, s)), onward(x, s)[::-1],
                                          offsets[x][s - 1]))
        ks.update({x: len(ks) + 1 + i for i, x in enumerate(stages[s])})
    # the first stage's passes that run at once, on ring sets of their own:
    # the last quarter of them is held back (an allreduce's second half, or
    # its second pass only below ``HALF_HELD_AT_ONCE`` at once)
    at_once = max(2, rings // cf)
    if scatter:  # no more than the stage has
        at_once = min(at_once, len(stages[len(dims)]))
        held = range(at_once - max(1, at_once // GRID_HELD_PART), at_once)
    else:
        if at_once < HALF_HELD_AT_ONCE:
            at_once = 2
        held = range(at_once // 2, at_once)
    # the home passes: partials for the receiving box itself (a reduce-scatter's)
    homes = {x for s, xs in stages.items() for x in xs if scatter and not any(onward(x, s))}
    # with ``fused``, the stage before the last's partials that the last forwards
    forwarded = ({x for x in stages[2] if stage_of(onward(x, 2)) == 1} if fused
                 else set())

    def passes(s: int) -> None:  # stage ``s``'s box passes
        gate = None
        for i, x in enumerate(stages[s]):
            dests = [shifted(b, offsets[x], dims) for b in range(nb)]
            first = s == len(dims) and i == 0
            pqs = qs
            if first and split:  # split chunks, the whole ones, the held ones
                halves = _split_pass(out, groups, orders[0], range(split), cf, landed,
                                     _grid_split_channel(rings, dims), k=ks[x], dests=dests)
                pqs = range(split, cf - cf // GRID_SPLIT_HELD_PART)
            start = len(out.ops)
            _box_pass(out, groups, orders, pqs, cf, ks[x], landed, dests=dests,
                      last=before(2 if fused and s == 1 else s),
                      gate=gate if s == len(dims) and i in held else None,
                      to_place=x in homes or x in forwarded)
            if first:
                # the held passes' chains start on a rank once the first's
                # (with ``split``, its whole chunks') are ``GRID_HELD`` steps
                # from their ends there
                end = len(out.ops)
                steps = (end - start) // (len(groups[0]) - 1)
                gate = {op.dst.rank: op.op_id for op in out.ops[start:end - GRID_HELD * steps]}
            if first and split:
                _box_pass(out, groups, orders, range(pqs.stop, cf), cf, ks[x], landed,
                          dests=dests, last=before(s), gate=halves,
                          to_place=x in homes or x in forwarded)

    def crossings(s: int, i: int, x: int) -> None:  # the crossings of stage ``s``'s pass ``x``
        t = offsets[x][s - 1]
        region = before(s) + t
        pairs = [(sender, groups[shifted(sender, offsets[x], dims)], groups[receiver])
                 for sender, receiver in line_sends(dims, s - 1, t, _send_first)]
        for q in qs:
            order = orders[0][_scatter_ring(q, ks[x], cf, rings, nb)]
            lands_at = _landing_places(orders[0], q, cf, nb)[0]
            # a fused last stage sends on the channel of the landings it forwards
            channel = _grid_channel(rings, dims, 2 if fused and s == 1 else s, t)
            if spare and s == len(dims) and i == 0 and q % 2 and x not in forwarded:
                channel = rings + sum(d - 1 for d in dims)  # the first pass's second
            for sender, owner, there in pairs:
                for g in order:
                    h, c = lands_at[g], owner[g] * cf + q
                    if x in forwarded:  # at the owner's place, onto the last stage's chain
                        out.add(OpKind.REDUCE, Slot(groups[sender][g], SCR, c),
                                landed(there[g], c, region), channel, Slot(there[g], SCR, c))
                    elif x not in homes:  # to the place before the owner's
                        out.add(OpKind.REDUCE, Slot(groups[sender][h], SCR, c),
                                landed(there[h], c, region), channel,
                                Slot(there[h], IN, c) if region == 1
                                else landed(there[h], c, region - 1))
                    else:  # in the own box to the owner, onto its own box's sum
                        # (region 0) or the landing before, the last into the output
                        dst = (Slot(there[g], OUT, q) if region == before(0)
                               else landed(there[g], c, region))
                        src = (landed(groups[sender][g], c, before(1)) if fused and s == 1
                               else Slot(groups[sender][g], SCR, c))
                        out.add(OpKind.REDUCE, src, dst, channel,
                                landed(there[g], c, region - 1))

    for s in range(len(dims), 0, -1):
        if not (fused and s == 1):
            passes(s)
        if fused and s == 2:  # the last stage's chains, which the forwarded landings join
            passes(1)
        if s == len(dims) and scatter:  # the own box's sum, which the home landings add to
            _box_pass(out, groups, orders, qs, cf, 0, landed, scatter, joins=0, to_place=True)
        for i, x in enumerate(stages[s]):
            crossings(s, i, x)
    if not scatter:  # an allreduce's allgather would send from the landing's threadblock
        _box_pass(out, groups, orders, qs, cf, 0, landed, scatter, joins=before(0))
