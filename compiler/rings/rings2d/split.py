"""Split chains of ``rings2d``'s first reduce-scatter pass.

A ring threadblock moves one chunk a step, so a chain of ``G`` places holds
the NIC's first byte back ``G - 1`` steps.  ``_split_pass`` runs a chunk's
chain in two halves that meet at its end: one along the chunk's ring, one
backwards from the places after the end on a ring of its own (the chunk's
ring reversed, on a channel after the form's), landing in the end's scratch
region 1 where the forward half's last step adds it.  The constants here say
how many chunks split and which of the others wait (``Schedule.gates``).

Input invariant: a pass of the switched, crossing or grid reduce-scatter
(its ring set, chunks and destination boxes).  Output invariant: the ops of
the pass, each split chunk's sum complete at the chain's end as without the
split.  Complexity: O(B G) ops per split chunk.
"""

from __future__ import annotations

from collections.abc import Callable

from colc.compiler.rings.rings2d.placement import IN, SCR, _landing_places, _Ops, _scatter_ring
from colc.ir.chunks import OpKind, Slot

#: Chunks of the switched reduce-scatter's first pass whose chains run in
#: two halves, the second backwards on a ring of its own
#: (``split_chunks``, ``_split_pass``; with two groups of chunks a pass,
#: one threadblock each), ``1 / SPLIT_FREE_PART`` of the first group's
#: chunks whole beside them and the rest held until the halves have taken
#: ``SPLIT_HELD`` steps on the rank.  DGX A100 x4, 32 chunks per shard, 1
#: GiB (simulated): 211.2 GB/s without, 211.4 with 2 (30 threadblocks),
#: 214.3 with 3 (31), 217.1 with 4 (32; 512 MiB 193.0 -> 194.6, where 3
#: give 200.5); with 4, 2 free chunks gave 211.8, 3 214.7, 5 216.5; held
#: from the third step 216.4, from the first 215.6.
SPLIT_CHUNKS = 4
SPLIT_FREE_PART = 4
SPLIT_HELD = 2
#: The crossing reduce-scatter's split chunks (``split_chunks``): MI250 x4,
#: 16 chunks per shard, 1 GiB / 128 MiB (simulated): 163.6 / 144.3 GB/s
#: without (24 threadblocks), 170.7 / 159.1 with 2 (26); with the forward
#: halves listed first, 170.7 / 155.5 with 2, 169.7 / 148.8 with 3, 168.3
#: / 152.7 with 4, and beside 2 split ones 4 whole chunks gave the 170.7, 2
#: gave 166.9, 8 169.6.  Splitting the chunks whose rings share their
#: links least instead (``ring_shares``) lost (166.4).
CROSSING_SPLIT_CHUNKS = 2
#: The crossing reduce-scatter splits up to this many chains instead
#: (``split_chunks``; a budget that holds fewer splits fewer, and the
#: portfolio ranks each count, ``fewer_split_budgets``) on two boxes behind
#: box switches and in an allreduce from three boxes of direct links (whose
#: 8 chunks per shard are 2 MiB at 1 GiB, so its whole chains hold the NIC
#: longer than the reduce-scatter's).  Simulated (Simple), 128 MiB / 512 MiB
#: / 1 GiB: DGX A100 x2 reduce-scatter (32 chunks) 194.3 / 252.4 / 255.5 GB/s
#: with 2 (22 threadblocks), 189.5 / 254.6 / 257.7 with 3, 185.2 / 256.6 /
#: 259.7 with 4, 6 and 8 lost (253.3, 247.2 at 1 GiB); DGX A100 x2
#: allreduce (16 chunks) 101.3 / 116.2 / 125.9 with 2, 104.6 / 121.0 / 128.8
#: with 4 (24); MI250 x4 allreduce (8 chunks), 16 MiB / 128 MiB / 256 MiB /
#: 1 GiB: 54.4 / 71.4 / 71.9 / 72.0 with 2 (30), 50.2 / 74.1 / 74.2 / 73.8
#: with 3 (31), 48.8 / 73.5 / 74.3 / 73.9 with 4 (32); MI250 x3 allreduce
#: 128 MiB / 1 GiB 69.5 / 75.5 -> 70.1 / 76.4 with 4.  Elsewhere 4 lost:
#: MI250 x2 reduce-scatter (32 chunks) 217.3 / 221.5 / 222.3 -> 200.8 /
#: 214.1 / 214.7, allreduce (16 chunks) 97.5 / 99.4 -> 94.7 / 97.0 at 128
#: MiB / 1 GiB, MI250 x4 reduce-scatter 170.7 / 159.1 -> 168.3 / 152.7 at 1
#: GiB / 128 MiB.  Behind box switches from three boxes an allreduce's
#: rings2d file gains too (DGX A100 x4, 16 chunks: 93.6 -> 96.6 at 1 GiB),
#: but rails' 107.7 serves there and the portfolio took 217 s to build
#: instead of 174, so not there.
CROSSING_WIDE_SPLIT_CHUNKS = 4
#: Fewest split chunks a reduce-scatter takes (``split_chunks``):
#: one alone lost (DGX A100 x4 at 1 GiB, 29 threadblocks: 210.6 GB/s
#: against 211.2 without); two gain at every size from 128 MiB (116.8 ->
#: 128.0 GB/s there, 30 threadblocks), three from 256 MiB.
SPLIT_LEAST = 2
#: The grid's reduce-scatter (an allreduce's first half) splits
#: ``SPLIT_LEAST`` chunks of its first pass (``split_chunks``) where the pass
#: has at least this many, the last ``1 / GRID_SPLIT_HELD_PART`` of them held
#: until the halves have taken ``SPLIT_HELD`` steps and the rest whole
#: beside them; the held passes then wait for the whole chunks' chains
#: (``_reduce_scatter_grid``).  Simulated, 128 MiB / 1 GiB, 32 threadblocks:
#: DGX A100 x16 allreduce (4 chunks) 67.9 / 82.1 -> 71.4 / 83.2 GB/s (the
#: held passes waiting for the held chunk instead, 66.6 / 82.1; no chunk
#: held, 67.6 / 82.0), reduce-scatter (8 chunks) 114.8 / 172.1 -> 117.7 /
#: 173.7 (two held; one, 117.5 / 173.6; none, 123.1 / 172.1; six, 115.8 /
#: 170.1), MI250 x16 reduce-scatter (4 chunks) 124.0 / 133.2 -> 129.0 /
#: 138.2; DGX A100 x64 with 2 chunks, both split, 111.2 / 164.5 -> 120.0 /
#: 163.7, so not there.
GRID_SPLIT_CHUNKS = 4
GRID_SPLIT_HELD_PART = 4


def _split_pass(out: _Ops, groups: list[list[int]], orders: list[list[int]], qs: range,
                cf: int, landed: Callable[..., Slot], channel: int, k: int = 1,
                dests: list[int] | None = None) -> dict[int, int]:
    """The first pass (to the box ``k`` further, or box ``b``'s chunks to
    box ``dests[b]``, as ``_box_pass``) of the crossing reduce-scatter, its
    switched form or the grid's for chunks ``qs`` with every chain in two halves that
    meet at its end: one along the chunk's ring, ``G - 1 - (G - 1) // 2``
    steps, the other from the places after the end backwards, ``(G - 1) //
    2`` steps, on a ring of its own (channel ``channel + j`` for the
    ``j``-th chunk: the chunk's ring reversed).  The backward half lands in
    the end's scratch region 1 (a region for landings of its own box's
    chunks, unused for another box's) with the end's input; the forward
    half's last step reduces onto it, so the sum the rail crossing sends is
    the whole box's, as a whole chain's is.  Within a step the backward
    halves are listed first: on boxes of an odd size both halves take as
    many steps, and the backward one must land first.  DGX A100 boxes: a
    chain of 4 steps and one of 3, not 7; MI250 boxes, 8 and 7, not 15.
    ``O(G^2 |qs| B)`` ops.

    Returns
    -------
    dict
        Rank -> the op after which its held-back chains start: its last op
        before the halves' step ``SPLIT_HELD``.
    """
    size, nb, rings = len(groups[0]), len(groups), len(orders)
    back = (size - 1) // 2
    fwd = size - 1 - back
    after = {q: _landing_places(orders, q, cf, nb)[1] for q in qs}
    start, held_from = len(out.ops), None
    for t in range(fwd):
        if t == min(SPLIT_HELD, fwd - 1):
            held_from = len(out.ops)
        for b, members in enumerate(groups):
            dest = groups[(b + k) % nb if dests is None else dests[b]]
            for j, q in enumerate(qs):
                ring = _scatter_ring(q, k, cf, rings, nb)
                order = orders[ring]
                if t < back:
                    for p in range(size):  # the half backwards, into the end's region 1
                        end = order[(p - back + t) % size]
                        sender, receiver = members[order[p]], members[order[(p - 1) % size]]
                        c = dest[after[q][end]] * cf + q
                        src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                        dst = landed(receiver, c, 1) if t == back - 1 else Slot(receiver, SCR, c)
                        out.add(OpKind.REDUCE, src, dst, channel + j, Slot(receiver, IN, c))
                for p in range(size):  # the half along the ring, onto the backward one
                    end = order[(p - back - 1 - t) % size]
                    sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                    c = dest[after[q][end]] * cf + q
                    src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                    operand = landed(receiver, c, 1) if t == fwd - 1 else Slot(receiver, IN, c)
                    out.add(OpKind.REDUCE, src, Slot(receiver, SCR, c), ring, operand)
    return {op.dst.rank: op.op_id for op in out.ops[start:held_from]}
