"""Rings inside one box for ``rings2d`` (seed 002's rings, one level down).

Over direct links (MI250) the box's ``R`` rings are Hamiltonian cycles
chosen by a small HiGHS MIP that minimises the largest number of rings per
unit of link width (``_packed_rings``); behind a box switch (DGX) they are
NCCL's spread rings of the box alone (``nccl_rings``).  ``_layout`` finds
them once per box shape and checks that every rank reaches its rail peers.

Input invariant: a validated ``Topology`` of boxes (``boxes``).
Output invariant: per box, ``R`` orders of its places, each a Hamiltonian
cycle over the box's own fabric; boxes alike get alike orders.
Complexity: the cycle enumeration is capped at ``MAX_CYCLES`` and the MIP
at 10 s; one search per box shape.
"""

from __future__ import annotations

from colc.compiler.rings.nccl_baseline import nccl_rings
from colc.errors import UnsupportedError
from colc.ir.routing import Router
from colc.ir.topology import Topology, box_topology, boxes

#: Most Hamiltonian cycles of a box enumerated for the ring packing.
MAX_CYCLES = 4000


def _cycles(n: int, width: dict[tuple[int, int], float]) -> list[tuple[int, ...]]:
    """Directed Hamiltonian cycles from place 0 over the box's direct links (capped)."""
    succ = {u: sorted(v for (a, v) in width if a == u) for u in range(n)}
    found: list[tuple[int, ...]] = []
    path, seen = [0], {0}

    def extend() -> None:
        if len(found) >= MAX_CYCLES:
            return
        u = path[-1]
        if len(path) == n:
            if (u, 0) in width:
                found.append(tuple(path))
            return
        for v in succ[u]:
            if v not in seen:
                path.append(v)
                seen.add(v)
                extend()
                seen.discard(path.pop())

    extend()
    return found


def _packed_rings(n: int, width: dict[tuple[int, int], float], rings: int
                  ) -> list[list[int]] | None:
    """``rings`` Hamiltonian cycles (repeats allowed) minimising the largest
    rings-per-unit-width over the links (a small MIP solved with HiGHS), or
    None when the box has no cycle over its direct links."""
    import highspy
    import numpy as np
    from colc.compiler.highs_solver import new_highs

    cycles = _cycles(n, width)
    if not cycles:
        return None
    links = sorted(width)
    index = {e: i for i, e in enumerate(links)}
    h = new_highs()
    h.setOptionValue("time_limit", 10.0)
    m = len(cycles)
    inf = highspy.kHighsInf
    h.addVars(m + 1, np.zeros(m + 1), np.full(m + 1, inf))
    h.changeColsCost(m + 1, np.arange(m + 1, dtype=np.int32),
                     np.concatenate((np.zeros(m), [1.0])))
    h.changeColsIntegrality(m, np.arange(m, dtype=np.int32),
                            np.full(m, highspy.HighsVarType.kInteger))
    h.addRow(rings, rings, m, np.arange(m, dtype=np.int32), np.ones(m))
    uses: list[list[int]] = [[] for _ in links]
    for c, cyc in enumerate(cycles):
        for a, b in zip(cyc, cyc[1:] + cyc[:1], strict=True):
            uses[index[(a, b)]].append(c)
    for e, cols in enumerate(uses):
        if cols:  # sum of the cycles through e <= z * width(e)
            idx = np.array([*cols, m], dtype=np.int32)
            val = np.array([1.0] * len(cols) + [-float(width[links[e]])])
            h.addRow(-inf, 0.0, len(idx), idx, val)
    h.run()
    x = np.asarray(h.getSolution().col_value)
    picked: list[list[int]] = []
    for c in range(m):
        picked += [list(cycles[c])] * int(round(x[c]))
    return picked if len(picked) == rings else None


def _link_widths(topo: Topology, members: list[int]) -> dict[tuple[int, int], float] | None:
    """Width (GB/s) of each direct link between two places of the box, or
    None when the box has a switch inside."""
    place = {r: i for i, r in enumerate(members)}
    box = box_topology(topo, members)
    if not all(nd.is_compute for nd in box.nodes):
        return None
    width: dict[tuple[int, int], float] = {}
    for lk in box.links:
        e = (place[topo.rank_of[lk.src]], place[topo.rank_of[lk.dst]])
        width[e] = width.get(e, 0.0) + float(lk.bandwidth)
    return width


def _box_rings(topo: Topology, members: list[int], rings: int) -> list[list[int]]:
    """Rings of one box as orders of places: packed over the direct links when
    the box has no internal switch, else NCCL's spread rings."""
    place = {r: i for i, r in enumerate(members)}
    width = _link_widths(topo, members)
    if width is not None:
        packed = _packed_rings(len(members), width, rings)
        if packed is not None:
            return packed
    box = box_topology(topo, members)
    local = [topo.rank_of[i] for i in box.ranks]
    try:
        found = nccl_rings(box, rings)
    except UnsupportedError as err:
        raise UnsupportedError(f"two-level rings: {err}") from None
    return [[place[local[r]] for r in ring.order] for ring in found]


def ring_shares(topo: Topology, members: list[int], orders: list[list[int]]) -> list[float]:
    """Each ring's share of its most shared link (GB/s): the width of the link
    over the rings that use it, the least along the ring; 1.0 for every ring
    behind a box switch, or where a ring steps between places that no direct
    link joins.  A ring runs at about this pace, so in the crossing
    reduce-scatter the partials of the rings with the largest share are ready
    first (MI250: one of 16 rings has no link it shares three ways).

    Parameters
    ----------
    topo : Topology
    members : list of int
        The box's ranks, place by place.
    orders : list of list of int
        The box's rings as orders of places.

    Returns
    -------
    list of float
        One share per ring, in the order of ``orders``.

    Examples
    --------
    >>> from colc.frontends.families import mi250
    >>> t = mi250(2)
    >>> g = boxes(t)[0]
    >>> ring_shares(t, g, [[0, 1, 5, 4, 6, 7, 3, 2, 10, 11, 15, 14, 12, 13, 9, 8]] * 2)
    [25.0, 25.0]
    >>> ring_shares(t, g, [list(range(16))])  # places 1 and 2 share no link
    [1.0]
    """
    width = _link_widths(topo, members)
    edges = [list(zip(o, o[1:] + o[:1], strict=True)) for o in orders]
    if width is None or any(e not in width for ring in edges for e in ring):
        return [1.0] * len(orders)
    uses: dict[tuple[int, int], int] = {}
    for ring in edges:
        for e in ring:
            uses[e] = uses.get(e, 0) + 1
    return [min(width[e] / uses[e] for e in ring) for ring in edges]


def _layout(topo: Topology, rings: int,
            crossing: bool = False) -> tuple[list[list[int]], list[list[list[int]]]]:
    """Boxes (rank lists) and, per box, its rings as local orders (places
    0..G-1); at most ``32 // B`` rings unless ``crossing`` (a channel per
    (ring, box) in the allgather's box phase)."""
    groups = boxes(topo)
    if len(groups) < 2:
        raise UnsupportedError("two-level rings need at least two boxes; use ring")
    if not crossing:
        rings = max(1, min(rings, 32 // len(groups)))  # a channel per (ring, box)
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise UnsupportedError("two-level rings need boxes of equal size")
    router = Router(topo)
    for g in range(size):
        for a in groups:
            for b in groups:
                if a is not b and b[g] not in router.switch_paths(a[g]):
                    raise UnsupportedError(
                        f"rank {topo.ranks[a[g]]} does not reach its rail peer "
                        f"{topo.ranks[b[g]]} through the network")
    found: dict[tuple, list[list[int]]] = {}  # boxes alike get alike rings
    orders = []
    for members in groups:
        key = _box_shape(topo, members)
        if key not in found:
            found[key] = [[0]] * rings if size == 1 else _box_rings(topo, members, rings)
        orders.append([list(o) for o in found[key]])
    return groups, orders


def _box_shape(topo: Topology, members: list[int]) -> tuple:
    """What ``_box_rings`` reads of one box, its node names replaced by their
    place in the box's node list (and their rank in name order, which breaks
    ties): boxes of one shape get the same rings as orders of places, so
    they are found once (DGX A100 x128: 18 s of 128 boxes' ring searches)."""
    box = box_topology(topo, members)
    index = {nd.id: i for i, nd in enumerate(box.nodes)}
    by_name = {name: k for k, name in enumerate(sorted(index))}
    place = {topo.ranks[r]: p for p, r in enumerate(members)}
    nodes = tuple((by_name[nd.id], nd.kind, nd.multicast, nd.net, place.get(nd.id))
                  for nd in box.nodes)
    links = tuple((index[lk.src], index[lk.dst], lk.bandwidth, lk.latency)
                  for lk in box.links)
    return nodes, links
