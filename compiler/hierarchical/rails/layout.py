"""rails' boxes: the layout of ranks by box and place, and on boxes without
a switch (MI250) a spanning tree of the box's links per place.

Input: a validated ``Topology``.  Output: ``_layout``, the boxes' ranks by
place, each rank reaching its rail peers through the network (else
``UnsupportedError``); ``box_trees``, per place the ``(parent, child)``
edges of its tree, top-down, the trees loading links in proportion to their
bandwidth.  O(N G) path lookups for the layout, O(G^3 deg) for the trees.
Seed 004 section 5.3.
"""

from __future__ import annotations

from colc.ir.routing import Router
from colc.ir.topology import Topology, boxes

from colc.errors import UnsupportedError


def _layout(topo: Topology, mesh: bool = False) -> list[list[int]]:
    """Boxes of equal size, every place with its rail; each box behind switches
    (or, with ``mesh``, boxes without a switch: ``box_trees`` checks their links)."""
    groups = boxes(topo)
    if len(groups) < 2:
        raise UnsupportedError("rails need at least two boxes; on one box use trees or ring "
                               "(all-to-all: direct or mcf)")
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise UnsupportedError("rails need boxes of equal size")
    router = Router(topo)
    switched = not (mesh and _meshed(topo, groups[0]))
    for members in groups:
        for a in members:
            paths = router.switch_paths(a)
            for b in members if switched else ():
                if a != b and (b not in paths or len(paths[b]) != 3):
                    raise UnsupportedError(
                        f"rails need every box peer one switch away; {topo.ranks[a]} does "
                        f"not reach {topo.ranks[b]} through one box switch")
            for other in groups:
                peer = other[members.index(a)]
                if peer != a and peer not in paths:
                    raise UnsupportedError(f"rank {topo.ranks[a]} does not reach its rail "
                                           f"peer {topo.ranks[peer]} through the network")
    return groups


def _meshed(topo: Topology, members: list[int]) -> bool:
    """Whether a box has no switch of its own (its ranks joined by their links)."""
    ids = {topo.ranks[r] for r in members}
    node = topo.node
    return not any(link.src in ids and not node[link.dst].is_compute
                   and not node[link.dst].is_network for link in topo.links)


def box_trees(topo: Topology, groups: list[list[int]]
              ) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Spanning trees of a box's links, one per place, for boxes without a switch
    (MI250: 16 GCDs on xGMI links of 50-200 GB/s, 3 or 4 neighbours each).

    Every box must be wired alike (place ``i`` of every box linked to the same
    places, at the same bandwidths).  Tree ``g`` grows from ``g`` (Prim's
    order) by the edge whose link would then carry the fewest trees per
    narrowest link's bandwidth (rounded up), then the fewest hops: the trees
    together load links in proportion to their bandwidth (MI250: at most 3
    trees per 50 GB/s, against 2.1 on average; breadth-first trees put 6 on
    one 50 GB/s link), 7 hops deep at most.  O(G^3 deg) for boxes of ``G``
    places.

    Returns
    -------
    tuple
        Per place, its tree's ``(parent, child)`` edges, top-down.

    Raises
    ------
    UnsupportedError
        Boxes wired differently, or a box its own links do not connect.

    Examples
    --------
    >>> from colc.frontends.families import mi250
    >>> t = mi250(2)
    >>> trees = box_trees(t, boxes(t))
    >>> len(trees), {len(e) for e in trees}, trees[0][:3]
    (16, {15}, ((0, 1), (0, 4), (0, 8)))
    """
    cap = topo.capacity()
    rank_of = topo.rank_of
    place = {r: (b, g) for b, members in enumerate(groups) for g, r in enumerate(members)}
    wiring: list[dict[tuple[int, int], object]] = [{} for _ in groups]
    for (u, v), c in cap.items():
        if u in rank_of and v in rank_of:
            (bu, gu), (bv, gv) = place[rank_of[u]], place[rank_of[v]]
            if bu == bv:
                wiring[bu][(gu, gv)] = c
    for b in range(1, len(groups)):
        if wiring[b] != wiring[0]:
            raise UnsupportedError(
                f"rails need boxes wired alike; the box of {topo.ranks[groups[b][0]]} "
                f"differs from the box of {topo.ranks[groups[0][0]]}")
    links = sorted(wiring[0])
    unit = min(wiring[0].values(), default=1)
    load: dict[tuple[int, int], int] = {}
    trees = []
    size = len(groups[0])
    for root in range(size):
        depth, edges = {root: 0}, []
        while len(depth) < size:
            reach = [(-(-(load.get((u, v), 0) + 1) * unit // wiring[0][(u, v)]), depth[u] + 1,
                      (load.get((u, v), 0) + 1) / wiring[0][(u, v)], u, v)
                     for u, v in links if u in depth and v not in depth]
            if not reach:
                raise UnsupportedError(
                    f"rails: the links of the box of {topo.ranks[groups[0][0]]} do not "
                    f"connect {topo.ranks[groups[0][root]]} to every box peer")
            _, d, _, u, v = min(reach)
            depth[v] = d
            edges.append((u, v))
            load[(u, v)] = load.get((u, v), 0) + 1
        trees.append(tuple(edges))
    return tuple(trees)
