"""What ``rings2d``'s optional connections and split chains take of the
threadblock budget (issue 18: a larger budget never predicts slower).

The crossing reduce-scatter sends the next box's (an allreduce's: every
box's) partials on a second connection (``next_box_twice``,
``second_connections``); the switched, crossing and grid forms split their
first pass's first chunks' chains in two halves (``split_chunks``); the grid
allgather's last stage may take a second connection (``narrowed``).  Each
costs threadblocks; these functions say what a budget holds, the least
budget of each level (``narrowing_budget``) and the smaller budgets that
split fewer chunks (``fewer_split_budgets``), so the compiler keys and ranks
each schedule by the least budget that builds it.  ``simple_form`` says
whether the Simple files' form differs from the LL files'.

Input invariant: the boxes' ranks (``boxes``), a collective and a chunking
the caller's form accepts.  Output invariant: pure answers, monotone in the
budget.  Complexity: O(B cf) per call.
"""

from __future__ import annotations

from colc.compiler.rings.rings2d.box_rings import _link_widths
from colc.compiler.rings.rings2d.forms import box_grid, crossing_rings, paired_halves, switched_form
from colc.compiler.rings.rings2d.placement import (DEFAULT_CHUNKS, MAX_CHANNELS, RINGS, _grid_spare,
                                                   _grid_split_channel, _ring_groups,
                                                   _split_channel, _two_last,
                                                   _unpaired_threadblocks)
from colc.compiler.rings.rings2d.split import (CROSSING_SPLIT_CHUNKS,
                                               CROSSING_WIDE_SPLIT_CHUNKS, GRID_SPLIT_CHUNKS,
                                               SPLIT_CHUNKS, SPLIT_LEAST)
from colc.ir.core import Collective
from colc.ir.topology import Topology, boxes

#: Least chunks per shard with which an allreduce's crossing reduce-scatter
#: sends every box's partials on two connections (``second_connections``),
#: not only the next box's: with fewer, a distance's few partials do not keep
#: two connections busy.  Simulated, 128 MiB / 1 GiB: MI250 x4 with 8 chunks
#: on 16 rings 65.9 / 67.1 -> 70.1 / 71.7 GB/s, x3 62.3 / 68.3 -> 67.0 /
#: 74.6; MI250 x5 with 4 (32 threadblocks) 58.3 / 62.4 -> 57.1 / 62.4.
EVERY_BOX_TWICE_CHUNKS = 8


def simple_form(topo: Topology, collective: Collective, chunks: int | None) -> bool:
    """Whether ``rings2d_schedule``'s form for Simple files differs here from
    the others': where its first pass splits chains (``split_chunks``; the
    LL files lose, MI250 x4 reduce-scatter, 16 chunks, 1 / 4 MiB: 15.8 /
    26.5 -> 15.6 / 25.3 GB/s), or where the passes spread over the box's
    cycles (``_spread_form``).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> [simple_form(mi250(n), Collective.REDUCESCATTER, c) for n, c in ((2, 32), (4, 16), (8, 8))]
    [True, True, True]
    >>> [simple_form(dgx_a100(4), Collective.REDUCESCATTER, c) for c in (32, 16)]
    [True, False]
    """
    cf = chunks or DEFAULT_CHUNKS
    groups = boxes(topo)
    if len({len(g) for g in groups}) != 1:
        return False
    return _spread_form(topo, collective, cf) or split_chunks(topo, groups, collective, cf) > 0


def _spread_form(topo: Topology, collective: Collective, chunks: int | None) -> bool:
    """Whether the form for Simple files spreads the passes over the box's
    cycles: a crossing reduce-scatter (or allreduce) on boxes of direct
    links with fewer chunks per shard than rings, whose passes then take
    all the box's cycles (``_landing_places``) instead of repeating one set
    of ``cf``.  The Simple files gain from 16 MiB (MI250 x64 reduce-scatter
    at 1 GiB 42.3 -> 121.0 GB/s, x8 74.5 / 124.7 / 133.6 -> 77.7 / 131.6 /
    140.5 at 16 MiB / 128 MiB / 1 GiB); the LL files at 1 MiB lose (x32
    reduce-scatter 11.9 -> 10.3, x16 12.9 -> 12.6): a chain that joins a
    landed sum before its end waits for it sooner, and at 1 MiB the
    latency is all.  The pipeline builds a separate schedule for its Simple
    files only then (``Compiler._simple_form``).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> [_spread_form(mi250(n), Collective.REDUCESCATTER, c) for n, c in ((4, 16), (8, 8), (64, 1))]
    [False, True, True]
    >>> (_spread_form(mi250(8), Collective.ALLGATHER, 8),
    ...  _spread_form(dgx_a100(16), Collective.ALLREDUCE, 4))
    (False, False)
    """
    cf = chunks or DEFAULT_CHUNKS
    groups = boxes(topo)
    if collective is Collective.ALLGATHER or len({len(g) for g in groups}) != 1:
        return False
    rings = crossing_rings(groups, collective, cf)
    return 0 < cf < rings and _link_widths(topo, groups[0]) is not None


def split_chunks(topo: Topology, groups: list[list[int]], collective: Collective,
                 chunks: int, budget: int = 0) -> int:
    """How many chunks of the first pass of the crossing reduce-scatter (an
    allreduce's first half) or its switched form run their chains in two
    halves (``_split_pass``) within ``budget`` (0: no limit): up to
    ``CROSSING_SPLIT_CHUNKS`` (``CROSSING_WIDE_SPLIT_CHUNKS`` on two boxes
    behind box switches and in an allreduce from three boxes of direct
    links; switched, with two groups of chunks a pass, where every distance
    crosses on two connections: ``SPLIT_CHUNKS``) and at least
    ``SPLIT_LEAST``, each a threadblock and a channel beyond the
    form's (``_split_form``), on boxes of three places or more; in the
    grid's reduce-scatter (``_reduce_scatter_grid``; not in paired halves)
    ``SPLIT_LEAST`` of its first pass's chunks where it has at least
    ``GRID_SPLIT_CHUNKS``.  MI250 x2 with 32 chunks per shard (two groups
    a pass) gains at 128 MiB, 186.3 -> 217.3 GB/s, and loses at 1 GiB,
    225.3 -> 222.3 (the portfolio ranks the unsplit file beside it,
    ``fewer_split_budgets``).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> t, m = dgx_a100(4), mi250(4)
    >>> [split_chunks(t, boxes(t), Collective.REDUCESCATTER, 32, b) for b in (0, 28, 29, 30, 32)]
    [4, 0, 0, 2, 4]
    >>> split_chunks(t, boxes(t), Collective.REDUCESCATTER, 16)  # one group a pass
    0
    >>> [split_chunks(m, boxes(m), Collective.REDUCESCATTER, 16, b) for b in (0, 24, 25, 26)]
    [2, 0, 0, 2]
    >>> [split_chunks(m, boxes(m), Collective.ALLREDUCE, 8, b) for b in (28, 30, 31, 32)]
    [0, 2, 3, 4]
    >>> split_chunks(m, boxes(m), Collective.ALLGATHER, 16)
    0
    >>> m2 = mi250(2)
    >>> [split_chunks(m2, boxes(m2), Collective.REDUCESCATTER, c) for c in (16, 32)]
    [2, 2]
    """
    most, channel, base = _split_form(topo, groups, collective, chunks, budget)
    if not most:
        return 0
    spare = MAX_CHANNELS - channel
    if budget:
        spare = min(spare, budget - base)
    rings = crossing_rings(groups, collective, chunks)
    split = min(most, spare, len(_ring_groups(chunks, rings)[0]))
    return split if split >= SPLIT_LEAST else 0


def fewer_split_budgets(topo: Topology, groups: list[list[int]], collective: Collective,
                        chunks: int, budget: int) -> tuple[int, ...]:
    """Budgets below ``budget`` whose schedules split fewer chunks of the
    first pass (``split_chunks``), each the least with as many: none split
    (the form's own threadblocks) and ``SPLIT_LEAST`` up to one less than
    ``budget``'s.  A portfolio ranks them beside ``budget``'s schedule, so a
    larger budget never predicts slower (DGX A100 x16 reduce-scatter at 512
    MiB, 8 chunks: 168.8 GB/s unsplit with 30 threadblocks, 165.7 split
    with 32; DGX A100 x4 at 512 MiB, 32 chunks: 200.5 with 3 split, 194.6
    with 4).

    >>> from colc.frontends.families import dgx_a100
    >>> t = dgx_a100(4)
    >>> [fewer_split_budgets(t, boxes(t), Collective.REDUCESCATTER, 32, b) for b in (0, 32, 30, 29)]
    [(28, 30, 31), (28, 30, 31), (28,), ()]
    """
    split = split_chunks(topo, groups, collective, chunks, budget)
    if not split:
        return ()
    base = _split_form(topo, groups, collective, chunks, budget)[2]
    return tuple(base + s for s in (0, *range(SPLIT_LEAST, split)))


def _split_form(topo: Topology, groups: list[list[int]], collective: Collective,
                chunks: int, budget: int) -> tuple[int, int, int]:
    """``(most split chunks, the first one's channel, threadblocks without
    them)`` of the crossing reduce-scatter's form under ``budget``
    (``split_chunks``; with network sends and receives apart: the crossing
    forms' ``_unpaired_threadblocks`` with their second connections, the
    grid's ``R + 2 sum(d_i - 1)`` and two with ``_grid_spare``), ``(0, 0,
    0)`` where it splits none."""
    rings, nb = crossing_rings(groups, collective, chunks), len(groups)
    if (not rings or collective is Collective.ALLGATHER or len(groups[0]) < 3
            or paired_halves(groups, collective, chunks)):
        return 0, 0, 0
    dims = box_grid(nb, rings, collective)
    if len(dims) > 1:
        if chunks < GRID_SPLIT_CHUNKS:
            return 0, 0, 0
        channel = _grid_split_channel(rings, dims)
        return SPLIT_LEAST, channel, channel + sum(d - 1 for d in dims) + _grid_spare(rings, dims)
    if switched_form(topo, groups, collective, chunks, rings):
        two = nb - 1 if len(_ring_groups(chunks, rings)) > 1 else 0
        most = SPLIT_CHUNKS if two else 0
    else:
        switches = _link_widths(topo, groups[0]) is None
        wide = nb == 2 if switches else collective is Collective.ALLREDUCE and nb >= 3
        most = CROSSING_WIDE_SPLIT_CHUNKS if wide else CROSSING_SPLIT_CHUNKS
        two = second_connections(topo, groups, collective, chunks, budget)
    return most, _split_channel(rings, nb, two), _unpaired_threadblocks(rings, nb, two)


def narrowed(topo: Topology, groups: list[list[int]], collective: Collective,
             chunks: int, budget: int) -> bool:
    """Whether ``budget`` takes a connection of the crossing form away.

    * the grid allgather's second last-stage connection (``_two_last``) at
      exactly the budget that holds the form's threadblocks with network
      sends and receives apart (the lowering's first choice) without that
      connection and not with it, ``R + 2 sum(d - 1) + 1``;
    * the crossing reduce-scatter's second one to the next box
      (an allreduce's, every box's) at every budget below ``R + 2 B`` (an
      allreduce's below ``R + 4 (B - 1)``): its unpaired threadblocks, ``R
      + 2 (B - 1)``, and two per such connection (below ``R + 2 (B - 1)``
      the lowering pairs the network sends and receives, and each would
      take one more), ``second_connections``;
    * the split chains' rings (``split_chunks``) at every budget below
      the form's own and its split chunks': the switched reduce-scatter's
      ``R + 4 (B - 1) + SPLIT_CHUNKS``, the grid's ``R + 2 sum(d_i - 1)``
      (and two with ``_grid_spare``) ``+ SPLIT_LEAST``.

    DGX A100 x128 at 31 threadblocks, 1 GiB (simulated): 151.6 GB/s
    without the allgather's (31 threadblocks), 84.2 with it (lowered
    paired: 25).  MI250 x4's reduce-scatter takes 22 threadblocks without
    the second connection to the next box and 24 with it.

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> t = dgx_a100(128)
    >>> [narrowed(t, boxes(t), Collective.ALLGATHER, 1, b) for b in (0, 30, 31, 32)]
    [False, False, True, False]
    >>> narrowed(t, boxes(t), Collective.REDUCESCATTER, 1, 31)
    False
    >>> m = mi250(4)
    >>> [narrowed(m, boxes(m), Collective.REDUCESCATTER, 16, b) for b in (0, 16, 23, 24, 26, 32)]
    [False, True, True, True, False, False]
    """
    if not budget:
        return False
    if collective is not Collective.ALLGATHER:
        return (second_connections(topo, groups, collective, chunks, budget)
                < second_connections(topo, groups, collective, chunks)
                or split_chunks(topo, groups, collective, chunks, budget)
                < split_chunks(topo, groups, collective, chunks))
    rings = crossing_rings(groups, collective, chunks)
    dims = box_grid(len(groups), rings, collective) if rings else ()
    if len(dims) < 2 or not _two_last(dims):
        return False
    return budget == rings + 2 * sum(d - 1 for d in dims) + 1  # the local copies' one


def second_connections(topo: Topology, groups: list[list[int]], collective: Collective,
                       chunks: int, budget: int = 0) -> int:
    """The distances ``1 .. two`` whose partials the crossing reduce-scatter
    sends on two connections within ``budget`` (0: no limit): where
    ``next_box_twice`` says, a reduce-scatter the next box's, an allreduce
    every box's (its distances cross one after the other, each alone on
    the NIC; from ``EVERY_BOX_TWICE_CHUNKS`` chunks per shard), where the
    budget holds the form's unpaired threadblocks, ``R + 2 (B - 1)``, and
    two more per distance (an allreduce whose budget holds only the next
    box's takes that) and the channels fit (the second ones after the
    first, ``_rail_channel``).  MI250 x4 allreduce,
    8 chunks on 16 rings, simulated, 16 MiB / 128 MiB / 1 GiB: 45.5 / 65.9
    / 67.1 GB/s with the next box's (24 threadblocks), 53.0 / 70.1 / 71.7
    with every box's (28); MI250 x3 (24) 1 GiB 68.3 -> 74.6.  A
    reduce-scatter with every box's lost at 1 GiB (MI250 x4, 16 chunks,
    28 threadblocks: 162.6 against 163.6).

    >>> from colc.frontends.families import mi250
    >>> m = mi250(4)
    >>> [second_connections(m, boxes(m), Collective.ALLREDUCE, 8, b) for b in (0, 23, 24, 28)]
    [3, 0, 1, 3]
    >>> second_connections(m, boxes(m), Collective.REDUCESCATTER, 16)
    1
    """
    if not next_box_twice(topo, groups, collective, chunks):
        return 0
    rings, nb = crossing_rings(groups, collective, chunks), len(groups)
    every = collective is Collective.ALLREDUCE and chunks >= EVERY_BOX_TWICE_CHUNKS
    for two in dict.fromkeys((nb - 1 if every else 1, 1)):
        if ((not budget or _unpaired_threadblocks(rings, nb, two) <= budget)
                and rings + nb - 1 + two <= MAX_CHANNELS):
            return two
    return 0


def narrowing_budget(topo: Topology, groups: list[list[int]], collective: Collective,
                     chunks: int, budget: int) -> int:
    """The budget a rings2d schedule under ``budget`` is keyed and built
    with (``Compiler._narrowing``): 0 where ``budget`` narrows nothing
    (``narrowed``); the grid allgather's, ``budget``; the crossing
    reduce-scatter's, the least budget with as many second connections
    (``second_connections``; 1 for none) and split chunks
    (``split_chunks``; in the switched and grid forms too), so the budgets
    that build one schedule share it.

    >>> from colc.frontends.families import mi250
    >>> m = mi250(4)
    >>> budgets = (0, 16, 26, 28, 30, 31, 32)
    >>> [narrowing_budget(m, boxes(m), Collective.ALLREDUCE, 8, b) for b in budgets]
    [0, 1, 26, 28, 30, 31, 0]
    >>> from colc.frontends.families import dgx_a100
    >>> t = dgx_a100(4)
    >>> [narrowing_budget(t, boxes(t), Collective.REDUCESCATTER, 32, b) for b in (24, 30, 32)]
    [1, 30, 0]
    """
    if collective is Collective.ALLGATHER:
        return budget if narrowed(topo, groups, collective, chunks, budget) else 0
    if not budget:
        return 0
    two = second_connections(topo, groups, collective, chunks, budget)
    split = split_chunks(topo, groups, collective, chunks, budget)
    if (two, split) == (second_connections(topo, groups, collective, chunks),
                        split_chunks(topo, groups, collective, chunks)):
        return 0
    if not two and not split:
        return 1
    return _split_form(topo, groups, collective, chunks, budget)[2] + split


def next_box_twice(topo: Topology, groups: list[list[int]], collective: Collective,
                   chunks: int) -> bool:
    """Whether the crossing reduce-scatter (``_reduce_scatter_crossing``;
    an allreduce's first half) sends its partials for the next box on two
    connections (``_rail_channel``, ``two=1``: the odd chunks on the second,
    so at least two chunks per shard; an allreduce every box's where the
    budget holds them, ``second_connections``) where the budget holds them
    (``narrowed``): three boxes or more in one row of the grid, with the
    channel to spare (``rings + B <= MAX_CHANNELS``: not MI250 x17), on
    boxes of direct links (behind a box switch the reduce-scatter takes the
    switched form, which plans its own), on all ``RINGS`` rings.
    Those partials cross alone, before the farther boxes' passes end, and
    one connection does not fill the NIC; on fewer rings the box's rings
    bound the passes, and a second connection only splits the NIC.
    Simulated at 1 GiB / 256 MiB / 128 MiB / 64 MiB (Simple): MI250 x4
    reduce-scatter, 16 chunks per shard, 162.9 -> 163.6 / 154.4 -> 159.3 /
    145.3 -> 144.3 / 127.9 -> 132.1 GB/s (22 -> 24 threadblocks); with 8
    (8 rings) 148.4 -> 148.3 / 143.8 -> 142.5 / 140.2 -> 136.5 / 125.8 ->
    119.6, and 78.7 -> 72.6 at 16 MiB; allreduce, 8 chunks on 16 rings,
    66.3 -> 67.1 at 1 GiB, 64.2 -> 65.9 at 128 MiB; MI250 x8 (8 chunks on
    16 rings, 30 -> 32 threadblocks) 140.5 -> 141.1, 133.7 -> 134.2 at 128
    MiB; MI250 x3, 16 chunks, 169.6 -> 169.0, 144.1 -> 150.2 at 128 MiB.
    Every distance on two (28 threadblocks on x4) gave 162.6 at 1 GiB.
    Behind box switches the allreduce's crossing form, 16 chunks, is not
    given it: DGX A100 x3 lost (128 MiB 83.6 -> 76.2, 256 MiB 90.7 ->
    87.5), x4 gained (74.4 -> 77.7, 83.4 -> 88.3, 1 GiB 92.1 -> 92.9;
    rails serves 1 GiB there).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> m = mi250(4)
    >>> rs, ag = Collective.REDUCESCATTER, Collective.ALLGATHER
    >>> [next_box_twice(m, boxes(m), c, 16) for c in (rs, ag)]
    [True, False]
    >>> next_box_twice(m, boxes(m), rs, 8)  # on 8 rings
    False
    >>> t, m2, m17 = dgx_a100(4), mi250(2), mi250(17)
    >>> next_box_twice(t, boxes(t), Collective.ALLREDUCE, 16), next_box_twice(m2, boxes(m2), rs, 16)
    (False, False)
    >>> next_box_twice(m17, boxes(m17), rs, 2), next_box_twice(mi250(9), boxes(mi250(9)), rs, 1)
    (False, False)
    """
    rings, nb = crossing_rings(groups, collective, chunks), len(groups)
    return (collective is not Collective.ALLGATHER and chunks > 1 and rings == RINGS
            and nb > 2 and rings + nb <= MAX_CHANNELS
            and len(box_grid(nb, rings, collective)) == 1  # so not in paired halves
            and _link_widths(topo, groups[0]) is not None)
