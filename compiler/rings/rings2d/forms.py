"""Which form of ``rings2d`` a topology, collective and chunking take, and
whether it fits the runtime.

The crossing form (``crossing_rings``) needs every ring threadblock within
the runtime's 64 steps and every channel below 32; over 16 boxes and more it
crosses over a grid of boxes (``box_grid``), and an allreduce whose grid
form does not fit goes in paired halves (``paired_halves``, ``pair_grid``).
Behind box switches from three boxes a reduce-scatter takes the switched
form (``switched_form``).  ``crossing_threadblocks`` is the least budget of
the crossing form.

Input invariant: the boxes' ranks (``boxes``), place by place, all boxes of
one size.  Output invariant: pure answers; a form these functions accept
lowers within ``MAX_RING_STEPS`` steps per ring threadblock.
Complexity: O(B cf) per call (the ring loads).
"""

from __future__ import annotations

from colc.compiler.rings.grid import grid_dims
from colc.compiler.rings.rings2d.box_rings import _link_widths
from colc.compiler.rings.rings2d.placement import (MAX_CHANNELS, MAX_RING_STEPS, RAIL_CHANNELS,
                                                   RINGS, _gather_ring, _grid_spare, _ring_loads,
                                                   _scatter_ring, _two_last)
from colc.ir.core import Collective
from colc.ir.topology import Topology

#: Chunks per shard from which an allgather, and an allreduce on two boxes,
#: take the crossing form (``crossing_once``): with 8 the old form's extra
#: threadblocks win at 1M and 16M (MI250 x2 allreduce: 11.7 / 65.4 GB/s with
#: 24 against 7.4 / 56.3 with 13; allgather 20.3 / 110.4 with 32 against
#: 8.9 / 86.2 with 11), with 16 the crossing form at 128M and 1G (allreduce
#: 88.1 / 91.6 against 78.6 / 78.9).
CROSSING_GATHER_CHUNKS = 16
#: Chunks over all boxes from which an allgather takes the crossing form
#: with fewer than ``CROSSING_GATHER_CHUNKS`` per shard: on eight boxes 4
#: and 8 per shard (16 would need 120 steps per ring; MI250 x8: 16.2 / 91.0
#: GB/s at 1M / 16M with 4, 142.7 at 1 GiB with 8, 31 threadblocks, against
#: rails' 11.5 / 48.0 / 83.5), on four boxes 8 (on two the old form's 8).
CROSSING_GATHER_TOTAL = 32


def crossing_once(groups: list[list[int]], collective: Collective, chunks: int) -> bool:
    """Whether ``collective`` takes the crossing form (``crossing_rings``).

    >>> g2, g4 = [[0, 1, 2], [3, 4, 5]], [[4 * b + i for i in range(4)] for b in range(4)]
    >>> [crossing_once(g2, Collective.ALLREDUCE, c) for c in (8, 16, 32)]
    [False, True, False]
    >>> [crossing_once(g4, Collective.REDUCESCATTER, c) for c in (16, 32, 80)]
    [True, True, False]
    >>> [crossing_once(g4, c, 16) for c in (Collective.ALLGATHER, Collective.ALLREDUCE)]
    [True, True]
    >>> crossing_once(g4, Collective.ALLREDUCE, 32)  # two groups per pass
    False
    """
    return crossing_rings(groups, collective, chunks) > 0


def crossing_rings(groups: list[list[int]], collective: Collective, chunks: int) -> int:
    """Rings of the crossing form of ``collective`` on boxes that ring their
    places alike, or 0 where it is not taken: boxes of at least three ranks,
    one group of chunks per pass (a reduce-scatter may take more), every
    ring threadblock within ``MAX_RING_STEPS`` and every channel below 32.

    * reduce-scatter (``_reduce_scatter_crossing``): groups of one chunk
      per ring, as many a pass as the ring threadblocks' steps hold (DGX
      A100 x4 takes two with 32 chunks per shard, in the switched form);
    * allgather (``_allgather_crossing``): from ``CROSSING_GATHER_CHUNKS``
      chunks per shard, or ``CROSSING_GATHER_TOTAL`` over all boxes (with
      fewer, the old form's extra threadblocks win at 1M and 16M);
    * allreduce: on two boxes the reduce-scatter, then ``_allgather_two``,
      from ``CROSSING_GATHER_CHUNKS`` chunks per shard; from three boxes the
      reduce-scatter, then the crossing allgather from the owners' results,
      where both halves fit one ring threadblock's 64 steps.

    ``min(RINGS, chunks)`` rings where their steps fit, else ``RINGS``
    sharing the passes (``_scatter_ring``, ``_gather_ring``): MI250 x8, 8
    chunks per shard, takes 16 rings of 4 passes each (8 rings would take
    8 passes of 15 or 16 steps).  Network sends and receives land on
    threadblocks of their own (the pipeline lowers the form unpaired first;
    where those do not fit the budget, a threadblock per distance serves
    both, in the order ``_send_first`` lists them).  Where a pair per
    distance to every other box would not fit 32 beside the rings, the
    form crosses over a grid of boxes (``box_grid``): a channel per grid
    dimension and distance.

    Parameters
    ----------
    groups : list of list of int
        The boxes' ranks (``boxes``), place by place.
    collective : Collective
    chunks : int
        Chunks per shard.

    Returns
    -------
    int
        Rings of the crossing form, 0 where the old form is built.

    Examples
    --------
    >>> g8 = [[16 * b + i for i in range(16)] for b in range(8)]
    >>> [crossing_rings(g8, c, 8) for c in (Collective.ALLGATHER, Collective.REDUCESCATTER)]
    [16, 16]
    >>> crossing_rings(g8, Collective.ALLGATHER, 16)
    0
    """
    nb = len(groups)
    if nb < 2 or len(groups[0]) < 3:
        return 0
    for rings in sorted({min(RINGS, chunks), RINGS}):
        if _whole_fit(collective, nb, len(groups[0]), chunks, rings):
            return rings
        if collective is Collective.ALLREDUCE and _pairs_fit(nb, len(groups[0]), chunks, rings):
            return rings
    return 0


def paired_halves(groups: list[list[int]], collective: Collective, chunks: int) -> bool:
    """Whether ``collective`` takes the crossing form in paired halves
    (``_allreduce_pairs``): an allreduce whose grid form does not fit 64
    steps per ring, where each half's does.

    >>> g = [[8 * b + i for i in range(8)] for b in range(128)]
    >>> [paired_halves(g, Collective.ALLREDUCE, c) for c in (1, 2)]
    [True, False]
    """
    nb, size = len(groups), len(groups[0])
    if collective is not Collective.ALLREDUCE or nb < 2 or size < 3:
        return False
    rings = crossing_rings(groups, collective, chunks)
    return bool(rings) and not _whole_fit(collective, nb, size, chunks, rings)


def _whole_fit(collective: Collective, nb: int, size: int, cf: int, rings: int) -> bool:
    """Whether the crossing form over all ``nb`` boxes fits ``rings`` rings:
    its passes within 64 steps per ring (``_crossing_fit``), its channels
    (and an allgather's local copies') within ``MAX_CHANNELS``."""
    local = 1 if collective is Collective.ALLGATHER else 0  # its own shard's copies
    return (_crossing_fit(collective, nb, size, cf, rings)
            and rings + _network_channels(nb, rings, collective) + local <= MAX_CHANNELS)


def pair_grid(nb: int, rings: int) -> tuple[int, ...]:
    """Grid of each half of ``nb`` boxes in the paired allreduce, whose
    network threadblocks (a send and a receive per distance) and the
    exchange's two fit ``MAX_CHANNELS`` beside the rings: ``grid_dims``'
    (the fewest dimensions, then distances).  Measured (simulated,
    Simple), 16 / 128 MiB / 1 GiB: MI250 x16 (halves of 8 boxes, 4 chunks
    per shard) one stage 43.3 / 52.8 / 54.1 GB/s against 2 x 4 34.4 / 54.8
    / 57.3 (and 2 x 2 x 2 54.0 at 1 GiB); DGX A100 x16 (8 chunks) one
    stage 78.6 at 1 GiB against 2 x 4 81.8 (the grid over all the boxes
    with 4 chunks, 82.1, is the file there); DGX A100 x32 (4 chunks) 4 x 4
    79.4 at 1 GiB against 2 x 2 x 4 77.9 and 2^4 72.3, MI250 x32 4 x 4
    36.3 against 2^4 34.6; DGX A100 x64 (2 chunks) 2 x 4 x 4 60.7 / 75.7
    at 128 MiB / 1 GiB against 2^5 54.8 (rails) / 72.5; x128 (1 chunk,
    ranked from 1 GiB only) 2 x 2 x 2 x 2 x 4 74.3 against 2^6 70.0.
    Until the twenty-fourth session the halves of 64 boxes took 2^6 (one
    connection per stage), which led while the allgather's chunks landing
    together went round on one ring (2 x 2 x 2 x 2 x 4: 67.2; x64 2 x 4 x 4
    71.8 then).

    >>> pair_grid(16, 16), pair_grid(32, 16), pair_grid(64, 16), pair_grid(128, 16)
    ((8,), (4, 4), (2, 4, 4), (2, 2, 2, 2, 4))
    """
    return grid_dims(nb // 2, rings + 2, MAX_CHANNELS)


def _pairs_fit(nb: int, size: int, cf: int, rings: int) -> bool:
    """Whether the paired allreduce fits ``rings`` rings: a grid form on
    16 boxes or more, each half's passes within 64 steps per ring, its
    network threadblocks and the exchange's within ``MAX_CHANNELS``."""
    if nb % 2 or len(box_grid(nb, rings, Collective.ALLREDUCE)) < 2:
        return False
    links = sum(d - 1 for d in pair_grid(nb, rings))
    return (_crossing_fit(Collective.ALLREDUCE, nb // 2, size, cf, rings)
            and rings + 2 * links + 2 <= MAX_CHANNELS)


def crossing_threadblocks(groups: list[list[int]], collective: Collective, chunks: int) -> int:
    """Least threadblocks per rank of the crossing form (``crossing_rings``),
    or 0 where it is not taken: its rings, a threadblock per network
    distance serving a send and a receive, and the allgather's local copies.

    >>> g = [[8 * b + i for i in range(8)] for b in range(16)]
    >>> [crossing_threadblocks(g, c, 2) for c in (Collective.ALLGATHER, Collective.REDUCESCATTER)]
    [23, 23]
    """
    rings = crossing_rings(groups, collective, chunks)
    if not rings:
        return 0
    nb = len(groups)
    if paired_halves(groups, collective, chunks):
        return rings + sum(d - 1 for d in pair_grid(nb, rings)) + 1
    grid = box_grid(nb, rings, collective)
    spare = len(grid) > 1 and collective is not Collective.ALLGATHER and _grid_spare(rings, grid)
    gather = collective is Collective.ALLGATHER
    return rings + _network_channels(nb, rings, collective) + spare + gather + (
        gather and _two_last(grid))


def _network_channels(nb: int, rings: int, collective: Collective) -> int:
    """Network channels of the crossing form: one per grid dimension and
    distance (``box_grid``), else one per distance (two on two boxes)."""
    grid = box_grid(nb, rings, collective)
    return sum(d - 1 for d in grid) if len(grid) > 1 else max(RAIL_CHANNELS, nb - 1)


def box_grid(nb: int, rings: int, collective: Collective) -> tuple[int, ...]:
    """Grid of the crossing allgather or reduce-scatter on ``nb`` boxes with
    ``rings`` rings (``grid.grid_dims``): its network threadblocks, a send
    and a receive per distance, fit ``MAX_CHANNELS`` beside the rings (and
    the allgather's local copies); one dimension (every box at once) where
    that fits or no grid does.  An allreduce's halves share its channels.

    >>> g, r = Collective.ALLGATHER, Collective.REDUCESCATTER
    >>> box_grid(8, 16, g), box_grid(16, 16, g), box_grid(16, 8, r), box_grid(32, 16, r)
    ((8,), (4, 4), (4, 4), (2, 4, 4))
    >>> box_grid(16, 16, Collective.ALLREDUCE)
    (4, 4)
    """
    return grid_dims(nb, rings + (collective is Collective.ALLGATHER), MAX_CHANNELS)


def _crossing_fit(collective: Collective, nb: int, size: int, cf: int, rings: int) -> bool:
    """Whether the crossing form of ``collective`` fits ``rings`` rings
    (``crossing_rings``)."""
    one_group = cf <= rings
    repeats = rings % min(rings, cf) == 0  # a reduce-scatter's ring sets repeat its cycles
    if collective is Collective.REDUCESCATTER:
        scatter = _ring_loads(nb, cf, rings, _scatter_ring)
        return repeats and max(scatter) * size <= MAX_RING_STEPS
    if collective is Collective.ALLGATHER:
        gather = _ring_loads(nb, cf, rings, _gather_ring)
        return (one_group and max(gather) * (size - 1) <= MAX_RING_STEPS
                and (cf >= CROSSING_GATHER_CHUNKS or nb * cf >= CROSSING_GATHER_TOTAL))
    if collective is not Collective.ALLREDUCE:
        return False
    if nb == 2:
        return one_group and cf >= CROSSING_GATHER_CHUNKS
    steps = max(s * size + g * (size - 1) for s, g in
                zip(_ring_loads(nb, cf, rings, _scatter_ring),
                    _ring_loads(nb, cf, rings, _gather_ring), strict=True))
    return one_group and repeats and steps <= MAX_RING_STEPS


def switched_form(topo: Topology, groups: list[list[int]], collective: Collective,
                  chunks: int, rings: int) -> bool:
    """Whether the crossing reduce-scatter takes the switched form
    (``_reduce_scatter_switched``): a reduce-scatter on three boxes or more
    behind box switches, with a channel to spare for the second one to the
    next box (``_rail_channel``; with two groups of chunks a pass, where
    every distance has two, ``_reduce_scatter_switched`` takes them if they
    fit).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> from colc.ir.topology import boxes
    >>> t = dgx_a100(4)
    >>> [switched_form(t, boxes(t), Collective.REDUCESCATTER, c, 16) for c in (16, 32)]
    [True, True]
    >>> switched_form(t, boxes(t), Collective.ALLREDUCE, 16, 16)
    False
    >>> m = mi250(4)
    >>> switched_form(m, boxes(m), Collective.REDUCESCATTER, 16, 16)
    False
    """
    return (collective is Collective.REDUCESCATTER and len(groups) > 2
            and rings + len(groups) <= MAX_CHANNELS
            and _link_widths(topo, groups[0]) is None)
