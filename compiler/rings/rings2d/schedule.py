"""``rings2d_schedule``: the pass's entry point, which picks the form
(``forms``), the budget's options (``budget``) and writes the ops.

Input and output invariants: as the package's (``colc.compiler.rings.rings2d``).
Complexity: O(B N cf) ops, plus the box ring search (``box_rings``).
"""

from __future__ import annotations

from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.compiler.rings.rings2d.box_rings import _layout, ring_shares
from colc.compiler.rings.rings2d.budget import (_spread_form, narrowed, second_connections,
                                                split_chunks)
from colc.compiler.rings.rings2d.forms import (box_grid, crossing_rings, pair_grid, paired_halves,
                                               switched_form)
from colc.compiler.rings.rings2d.gather import (_allgather, _allgather_crossing, _allgather_grid,
                                                _allgather_two)
from colc.compiler.rings.rings2d.grid_scatter import _reduce_scatter_grid
from colc.compiler.rings.rings2d.pairs import _allreduce_pairs
from colc.compiler.rings.rings2d.placement import DEFAULT_CHUNKS, NAME, RINGS, _Ops
from colc.compiler.rings.rings2d.scatter import _reduce_scatter, _reduce_scatter_crossing
from colc.compiler.rings.rings2d.switched import _reduce_scatter_switched
from colc.errors import UnsupportedError
from colc.ir.chunks import Schedule
from colc.ir.core import Collective
from colc.ir.topology import Topology, boxes


def rings2d_schedule(topo: Topology, collective: Collective,
                     chunks: int | None = None, simple: bool = False,
                     budget: int = 0) -> Schedule:
    """Two-level ring schedule of ``collective`` (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
    chunks : int or None
        Chunks per shard (default ``DEFAULT_CHUNKS``); chunk ``q`` of each
        shard travels on box ring ``q mod RINGS`` (in the crossing
        allgather, a landed chunk on a ring further on).
    simple : bool
        The form for Simple files (``simple_form``): the first pass's
        split chains (``split_chunks``) and, on boxes of direct links, the
        crossing reduce-scatter's passes over all the box's cycles.
    budget : int
        Threadblocks per rank the file may take (0: no limit); it counts
        only where it takes the grid allgather's second last-stage
        connection, the crossing reduce-scatter's second one to the next
        box away or its split chains (``narrowed``).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        One box, boxes of different sizes, a rank that does not reach its
        rail peers, or a box without a Hamiltonian cycle.
    """
    cf = chunks or DEFAULT_CHUNKS
    if cf < 1:
        raise UnsupportedError("chunks must be at least 1")
    rings = crossing_rings(boxes(topo), collective, cf)
    crossing = rings > 0
    # a chunk's partials land at one place in every pass: a reduce-scatter's
    # ring sets repeat one set of cycles, so each pass's chains end next to
    # the owner, but in the form for Simple files on boxes of direct links
    # (``simple_form``), whose passes take all the box's cycles and end
    # where the own box's ring for the chunk puts them (``_landing_places``)
    cycles = rings if collective is Collective.ALLGATHER else min(rings, cf)
    spread = simple and _spread_form(topo, collective, cf)
    if spread:
        cycles = rings
    groups, orders = _layout(topo, cycles or min(RINGS, cf), crossing)
    if crossing and cycles < rings:
        orders = [o * (rings // cycles) for o in orders]
    if crossing and any(o != orders[0] for o in orders):  # boxes ring unlike
        crossing = False
        groups, orders = _layout(topo, min(RINGS, cf))
    n, nb = topo.num_ranks, len(groups)
    out = _Ops()
    grid = box_grid(nb, rings, collective) if crossing else (nb,)
    if crossing and paired_halves(groups, collective, cf):
        nchunks, scratch = _allreduce_pairs(out, groups, orders, cf, n, pair_grid(nb, rings))
        return _schedule(out, collective, n, nchunks, scratch)
    if collective is not Collective.ALLGATHER:
        if len(grid) > 1:
            _reduce_scatter_grid(out, groups, orders, cf, n, grid,
                                 collective is Collective.REDUCESCATTER,
                                 split=split_chunks(topo, groups, collective, cf, budget)
                                 if simple else 0)
        elif crossing and switched_form(topo, groups, collective, cf, len(orders[0])):
            _reduce_scatter_switched(out, groups, orders, cf, n,
                                     split_chunks(topo, groups, collective, cf, budget)
                                     if simple else 0)
        elif crossing:
            _reduce_scatter_crossing(out, groups, orders, cf, n, collective,
                                     ring_shares(topo, groups[0], orders[0]), spread,
                                     second_connections(topo, groups, collective, cf, budget),
                                     split_chunks(topo, groups, collective, cf, budget)
                                     if simple else 0)
        else:
            _reduce_scatter(out, groups, orders, cf, n, collective)
    if crossing and collective is Collective.ALLREDUCE and nb == 2:
        _allgather_two(out, groups, orders, cf)
    elif len(grid) > 1 and collective is not Collective.REDUCESCATTER:
        _allgather_grid(out, groups, orders, cf, grid,
                        reduced=collective is Collective.ALLREDUCE,
                        second=not narrowed(topo, groups, collective, cf, budget))
    elif crossing and collective is not Collective.REDUCESCATTER:
        _allgather_crossing(out, groups, orders, cf,
                            reduced=collective is Collective.ALLREDUCE)
    elif collective is not Collective.REDUCESCATTER:
        _allgather(out, groups, orders, cf, collective)
    scratch = (0 if collective is Collective.ALLGATHER
               else (nb if crossing else 2) * n * cf)
    return _schedule(out, collective, n, n * cf, scratch)


def _schedule(out: _Ops, collective: Collective, n: int, nchunks: int,
              scratch: int) -> Schedule:
    """The ``Schedule`` of ``out``'s ops (gates kept where any op has one),
    dependencies inferred."""
    gates = tuple(out.gates) if any(g >= 0 for g in out.gates) else ()
    return infer_dependencies(Schedule(collective, n, nchunks, scratch, tuple(out.ops),
                                       algorithm=NAME, gates=gates))
