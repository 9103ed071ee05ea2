"""``rings2d``'s allreduce in paired halves (DGX A100 x32 to x128, MI250 x16
and up).

Where the grid form over all boxes does not fit 64 steps per ring, each
half of the boxes runs the grid's reduce-scatter on its own, every owner
exchanges its half's sum with its rail peer in the other half
(``_exchange``), and each half runs the grid's allgather, its chunks named
by the first half's owners (``_named_by_first_half``).  Every rank still
sends ``2 (B-1) / N`` of the buffer over the network.

Input invariant: an even number of boxes, ``forms.paired_halves`` true.
Output invariant: ops of an allreduce ``check_schedule`` proves.
Complexity: O(B N cf) ops.
"""

from __future__ import annotations

import dataclasses

from colc.compiler.rings.rings2d.gather import _allgather_grid
from colc.compiler.rings.rings2d.grid_scatter import _reduce_scatter_grid
from colc.compiler.rings.rings2d.placement import OUT, SCR, _Ops
from colc.ir.chunks import Op, OpKind, Slot


def _allreduce_pairs(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                     cf: int, n: int, dims: tuple[int, ...]) -> tuple[int, int]:
    """An allreduce in paired halves: each half of the boxes runs the grid's
    allreduce over ``dims`` on its own, except that between its
    reduce-scatter and its allgather every owner exchanges its half's sum
    with its rail peer in the partner box of the other half (box ``b`` and
    ``b + B/2``), each adding the other's.  A chunk then has two owners, one
    per half: ``N cf / 2`` chunks, half as many ring steps as the grid's
    allreduce over all the boxes (which does not fit 64 per ring at 1024
    GPUs with one chunk per shard), and the same network traffic (the
    exchange of a sum of ``2/B`` of the buffer replaces the last stage of
    the reduce-scatter and the first of the allgather).

    The half whose owners send first (the second) leaves its sum in
    scratch, so the first half's landing adds onto it in its output while
    the second's is still unread: ``R + 2 sum(d_i - 1) + 2`` threadblocks
    per rank, the exchange's send and receive on a channel after the
    grid's (the first pass's second connection is left out).

    Returns
    -------
    tuple of int
        Chunks of the schedule and scratch chunks.  Ops name chunks by
        the first half's owners, ``(b mod B/2, g)``.
    """
    half, links = len(groups) // 2, sum(d - 1 for d in dims)
    tops = [groups[:half], groups[half:]]
    held = (links + 1) * n * cf  # scratch of the second half's sums
    for h, part in enumerate(tops):
        start = len(out.ops)
        _reduce_scatter_grid(out, part, orders[h * half:(h + 1) * half], cf, n, dims,
                             scatter=False, spare=False)
        if h:  # the second half's sums stay in scratch
            for i in range(start, len(out.ops)):
                op = out.ops[i]
                if op.dst.buffer is OUT:
                    out.ops[i] = dataclasses.replace(
                        op, dst=Slot(op.dst.rank, SCR, held + op.dst.index))
    _exchange(out, groups, cf, len(orders[0]) + links, held)
    for h, part in enumerate(tops):
        _allgather_grid(out, part, orders[h * half:(h + 1) * half], cf, dims, reduced=True)
    out.ops = _named_by_first_half(out.ops, groups, cf, n)
    m = n // 2 * cf
    return m, (links + 2) * m


def _exchange(out: _Ops, groups: list[list[int]], cf: int, channel: int, held: int) -> None:
    """The paired allreduce's exchange on ``channel``: each owner ``(b, g)``
    of the first half sends its half's sum (its output) to ``(b + B/2, g)``,
    which adds its own (scratch ``held`` on) into its output; then the
    second half's owner sends that scratch sum back, added into the first
    owner's output (listed second, it reads the scratch the first left
    alone and writes the output the first has sent)."""
    half, size = len(groups) // 2, len(groups[0])
    for b in range(half):
        for q in range(cf):
            for g in range(size):
                r0, r1 = groups[b][g], groups[b + half][g]
                c0, c1 = r0 * cf + q, r1 * cf + q
                out.add(OpKind.REDUCE, Slot(r0, OUT, c0), Slot(r1, OUT, c1), channel,
                        Slot(r1, SCR, held + c1))
                out.add(OpKind.REDUCE, Slot(r1, SCR, held + c1), Slot(r0, OUT, c0), channel,
                        Slot(r0, OUT, c0))


def _named_by_first_half(ops: list[Op], groups: list[list[int]], cf: int, n: int) -> list[Op]:
    """``ops`` with every chunk named by its first half's owner: chunk ``q``
    of rank ``(b, g)``'s shard becomes ``((b mod B/2) G + g) cf + q``, and
    scratch region ``k`` (``k N cf`` on) starts at ``k N cf / 2``."""
    half, size = len(groups) // 2, len(groups[0])
    name = {r: (b % half) * size + g for b, members in enumerate(groups)
            for g, r in enumerate(members)}
    m = n // 2 * cf

    def rename(slot: Slot | None) -> Slot | None:
        if slot is None:
            return None
        region, c = divmod(slot.index, n * cf)
        r, q = divmod(c, cf)
        return Slot(slot.rank, slot.buffer, region * m + name[r] * cf + q)

    return [dataclasses.replace(op, src=rename(op.src), dst=rename(op.dst),
                                operand=rename(op.operand)) for op in ops]
