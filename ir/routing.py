"""Routing: switch paths between ranks and relay paths between ranks.

A *switch path* joins two ranks through switches only (what the fabric
routes by itself).  A *relay path* is a sequence of ranks, consecutive ones
joined by switch paths (what a schedule must forward explicitly).

Paths are chosen deterministically: fewest hops, then the widest bottleneck,
then the lexicographically smallest node sequence (file order).
Complexity: O(V + E) per source.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction

from colc.errors import TopologyError
from colc.ir.topology import Topology


class Router:
    """Cached shortest switch paths and relay paths of a topology.

    Parameters
    ----------
    topo : Topology
    """

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.cap = topo.capacity()
        order = {n.id: i for i, n in enumerate(topo.nodes)}
        succ: dict[str, list[str]] = {n.id: [] for n in topo.nodes}
        for (u, v) in self.cap:
            succ[u].append(v)
        self.succ = {u: sorted(vs, key=order.__getitem__) for u, vs in succ.items()}
        self._switch: dict[int, dict[int, tuple[str, ...]]] = {}

    def switch_paths(self, src: int) -> dict[int, tuple[str, ...]]:
        """Node paths from rank ``src`` to every rank it reaches through switches."""
        if src not in self._switch:
            self._switch[src] = self._bfs_switch(src)
        return self._switch[src]

    def _bfs_switch(self, src: int) -> dict[int, tuple[str, ...]]:
        topo = self.topo
        start = topo.ranks[src]
        best: dict[str, tuple[int, Fraction, tuple[str, ...]]] = {
            start: (0, Fraction(10**12), (start,))}
        frontier = [start]
        result: dict[int, tuple[str, ...]] = {}
        depth = 0
        while frontier:
            depth += 1
            layer: dict[str, tuple[int, Fraction, tuple[str, ...]]] = {}
            for u in frontier:
                _, width, path = best[u]
                for v in self.succ[u]:
                    if v in best:
                        continue
                    cand = (depth, min(width, self.cap[(u, v)]), (*path, v))
                    old = layer.get(v)
                    if old is None or (-cand[1], cand[2]) < (-old[1], old[2]):
                        layer[v] = cand
            best.update(layer)
            frontier = [v for v in sorted(layer, key=lambda n: layer[n][2])
                        if not topo.node[v].is_compute]
            for v, (_, _, path) in layer.items():
                if topo.node[v].is_compute:
                    result[topo.rank_of[v]] = path
        return result

    def bottleneck(self, path: tuple[str, ...]) -> Fraction:
        """Smallest link capacity along a node path."""
        return min(self.cap[(a, b)] for a, b in zip(path, path[1:], strict=False))

    def relay_path(self, src: int, dst: int) -> tuple[int, ...]:
        """Fewest-relay rank sequence ``src, ..., dst`` (BFS over switch reach)."""
        prev: dict[int, int] = {src: src}
        queue = deque([src])
        while queue:
            u = queue.popleft()
            if u == dst:
                break
            for v in sorted(self.switch_paths(u)):
                if v not in prev:
                    prev[v] = u
                    queue.append(v)
        if dst not in prev:
            raise TopologyError(f"{self.topo.source}: rank {dst} ({self.topo.ranks[dst]}) "
                                f"cannot be reached from rank {src} ({self.topo.ranks[src]})")
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        return tuple(reversed(path))
