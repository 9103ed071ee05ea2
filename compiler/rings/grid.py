"""The box grid of rings2d's staged allgather: boxes as points of a grid.

rings2d's crossing allgather sends every shard straight to every other box,
a network connection per distance: ``B - 1`` send and ``B - 1`` receive
threadblocks per rank beside the rings.  From 16 boxes that no longer fits
32 threadblocks, and with a threadblock serving a send and a receive the
NIC dips at every step (DGX A100 x16 at 1 GiB, 8 chunks per shard: 132.3
GB/s).  Placing the boxes on a grid ``d_1 x d_2 x ... x d_m`` (box ``b`` at
mixed-radix coordinates, the first fastest) lets each rank cross in
stages: in stage ``i`` it sends, to its rail peer in each of the ``d_i - 1``
boxes along dimension ``i``, the shards of the boxes that differ from its
own only in the dimensions before ``i`` (its own and those landed in the
earlier stages).  Every shard still crosses the network once on its way to
each box and every rank still sends ``B - 1`` shards, on
``sum(d_i - 1)`` connections (4 x 4: 6 instead of 15).

This module is the geometry only (``grid_dims``, ``stage_sends``,
``landing_order``, ``landing_times``: when each chunk lands, estimated);
``rings2d.gather._allgather_grid`` writes the ops.

Complexity: ``grid_dims`` enumerates the ordered factorisations of ``B``
(a few hundred for ``B <= 1024``); ``landing_times`` is ``O(B cf sum(d_i - 1))``;
the others are linear in their output.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class StageSend:
    """What one box sends along one grid dimension to one box.

    ``sources``: the boxes whose shards it forwards (its own first, then
    those landed in earlier stages, in ``landing_order``).
    """

    stage: int
    distance: int
    sender: int
    dest: int
    sources: tuple[int, ...]


def _factorisations(n: int, smallest: int = 2) -> Iterator[tuple[int, ...]]:
    """Non-decreasing factorisations of ``n`` into factors of at least 2."""
    if n == 1:
        yield ()
        return
    for d in range(smallest, n + 1):
        if n % d == 0:
            for rest in _factorisations(n // d, d):
                yield (d, *rest)


def grid_dims(nb: int, fixed: int, limit: int) -> tuple[int, ...]:
    """Grid of ``nb`` boxes for the staged allgather: the fewest dimensions
    whose network threadblocks (a send and a receive per distance,
    ``2 sum(d_i - 1)``) fit ``limit`` beside ``fixed`` others (the rings and
    the local copies), then the fewest distances; smaller dimensions first
    (a stage forwards the shards of the ones before it, so the large last
    stage starts with most of them landed).  ``(nb,)`` (one stage: the
    plain crossing) where that fits or no grid does.

    >>> grid_dims(8, 17, 32), grid_dims(16, 17, 32), grid_dims(32, 17, 32)
    ((8,), (4, 4), (2, 4, 4))
    >>> grid_dims(12, 17, 32), grid_dims(13, 17, 32)
    ((3, 4), (13,))
    >>> grid_dims(128, 17, 32)
    (2, 2, 2, 2, 2, 2, 2)
    """
    best: tuple[int, ...] = (nb,)
    if fixed + 2 * (nb - 1) <= limit or nb < 4:
        return best
    key = None
    for dims in _factorisations(nb):
        links = sum(d - 1 for d in dims)
        if len(dims) > 1 and fixed + 2 * links <= limit:
            k = (len(dims), links)
            if key is None or k < key:
                best, key = dims, k
    return best


def coords(box: int, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Mixed-radix coordinates of ``box`` (the first dimension fastest)."""
    out = []
    for d in dims:
        box, c = divmod(box, d)
        out.append(c)
    return tuple(out)


def box_at(cs: tuple[int, ...] | list[int], dims: tuple[int, ...]) -> int:
    """The box at coordinates ``cs`` (``coords``' inverse, modulo each dimension)."""
    box, stride = 0, 1
    for c, d in zip(cs, dims, strict=True):
        box += (c % d) * stride
        stride *= d
    return box


def shifted(box: int, offset: tuple[int, ...], dims: tuple[int, ...]) -> int:
    """The box ``offset`` further than ``box`` along every dimension."""
    return box_at([c + o for c, o in zip(coords(box, dims), offset, strict=True)], dims)


def stage_of(offset: tuple[int, ...]) -> int:
    """Stage (1-based) in which a shard from ``offset`` back lands: the last
    dimension it differs in (0: the own box)."""
    return max((i + 1 for i, o in enumerate(offset) if o), default=0)


def landing_order(dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Offsets back to every box's source boxes, in the order their shards
    land: the own box, then stage by stage, within a stage by the later
    dimensions' offsets first.

    >>> landing_order((2, 2))
    [(0, 0), (1, 0), (0, 1), (1, 1)]
    """
    offsets = list(itertools.product(*[range(d) for d in dims]))
    offsets.sort(key=lambda off: (stage_of(off), off[::-1]))
    return offsets


def stage_sends(dims: tuple[int, ...],
                send_order: Callable[[int, int], list[int]] | None = None
                ) -> Iterator[StageSend]:
    """Every box's sends, stage by stage and distance by distance; along each
    line of the grid the senders go in ``send_order(d, s)`` (rings2d's
    ``_send_first``), so a threadblock that serves a send and a receive
    sends before it receives in all boxes but one per cycle.

    >>> [(s.sender, s.dest, s.sources) for s in stage_sends((2, 2))][:3]
    [(0, 1, (0,)), (1, 0, (1,)), (2, 3, (2,))]
    >>> [(s.sender, s.dest, s.sources) for s in stage_sends((2, 2))][4]
    (0, 2, (0, 1))
    """
    earlier = landing_order(dims)
    for i, d in enumerate(dims):
        back = [tuple(-o for o in off) for off in earlier if stage_of(off) <= i]
        for s in range(1, d):
            for sender, dest in line_sends(dims, i, s, send_order):
                yield StageSend(i + 1, s, sender, dest,
                                tuple(shifted(sender, off, dims) for off in back))


def landing_times(dims: tuple[int, ...], cf: int,
                  two_last: bool = False) -> dict[tuple[tuple[int, ...], int], float]:
    """When each chunk of every box's shard lands at a rank in the staged
    allgather, estimated: offset back (as in ``landing_order``) and chunk
    ``q`` to the time, in chunks sent by a whole NIC.

    Every connection (a stage and a distance) sends its chunks in the
    order ``rings2d.gather._allgather_grid`` lists them (chunk by chunk, the
    sources in ``landing_order``), a chunk only once it has landed at the
    sender (the same time as at this rank: every box is alike), and the
    connections with a chunk to send share the NIC equally.  ``two_last``:
    the last stage (one distance) sends on two connections, the first
    taking its chunks at even places of that order and the second those
    at odd places.  The own box's chunks are there at time 0.  Exact
    arithmetic on the shares keeps the result independent of the
    platform.

    >>> t = landing_times((2, 2), 1)
    >>> [float(t[off, 0]) for off in landing_order((2, 2))]
    [0.0, 2.0, 2.0, 3.0]
    >>> t = landing_times((2, 2), 1, two_last=True)
    >>> [float(t[off, 0]) for off in landing_order((2, 2))]
    [0.0, 2.0, 2.0, 3.0]

    Complexity: ``O(n c)`` for ``n = cf B`` chunks on ``c = sum(d_i - 1)``
    connections.
    """
    earlier = landing_order(dims)
    queues = []
    for i, d in enumerate(dims):
        back = [off for off in earlier if stage_of(off) <= i]
        for s in range(1, d):
            queue = [(q, off, off[:i] + (s,) + off[i + 1:]) for q in range(cf) for off in back]
            queues += ([queue[0::2], queue[1::2]] if two_last and i == len(dims) - 1
                       else [queue])
    zero = tuple(0 for _ in dims)
    landed: dict[tuple[tuple[int, ...], int], Fraction] = {(zero, q): Fraction(0)
                                                          for q in range(cf)}
    at, left, now = [0] * len(queues), [Fraction(1)] * len(queues), Fraction(0)
    while True:
        pending = [c for c, queue in enumerate(queues) if at[c] < len(queue)]
        if not pending:
            return {key: float(t) for key, t in landed.items()}
        ready = [c for c in pending if (queues[c][at[c]][1], queues[c][at[c]][0]) in landed]
        if not ready:  # cannot happen: every source lands in an earlier stage
            raise ValueError("staged allgather waits on a chunk that never lands")
        step = min(left[c] for c in ready)
        now += step * len(ready)
        for c in ready:
            left[c] -= step
            if left[c] == 0:
                q, _, dest = queues[c][at[c]]
                landed[dest, q] = now
                at[c], left[c] = at[c] + 1, Fraction(1)


def line_sends(dims: tuple[int, ...], i: int, distance: int,
               send_order: Callable[[int, int], list[int]] | None = None
               ) -> Iterator[tuple[int, int]]:
    """Every box with the box ``distance`` further along dimension ``i``
    (0-based), line by line, along each line in ``send_order(d, distance)``
    (default: by coordinate).

    >>> list(line_sends((2, 3), 1, 1))
    [(0, 2), (2, 4), (4, 0), (1, 3), (3, 5), (5, 1)]
    """
    nb, d = math.prod(dims), dims[i]
    step = tuple(distance if j == i else 0 for j in range(len(dims)))
    for base in (b for b in range(nb) if coords(b, dims)[i] == 0):
        cs = coords(base, dims)
        line = [box_at([*cs[:i], c, *cs[i + 1:]], dims) for c in range(d)]
        for c in (send_order(d, distance) if send_order is not None else range(d)):
            yield line[c], shifted(line[c], step, dims)


__all__ = ["StageSend", "box_at", "coords", "grid_dims", "landing_order", "landing_times",
           "line_sends", "shifted", "stage_of", "stage_sends"]
