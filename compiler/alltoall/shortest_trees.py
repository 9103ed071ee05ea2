"""Pass ``shortest-trees``: all-to-all routes without a linear program.

LP (A.1) gives the optimal all-to-all routes, but on 1024 ranks without a
symmetry to exploit (generalized Kautz) it alone takes about ten minutes.
This pass routes in seconds: every source sends every block along a
fewest-hop path, and the paths of one source form a tree (a shortest-path
tree), chosen so that link loads stay even.  Per source, ranks are visited
from the farthest to the nearest; each rank ``t`` picks, among its
in-neighbours one hop nearer the source, the parent whose link would carry
the least after adding ``t``'s whole subtree (load over bandwidth; ties to
the lower rank).  Loads accumulate over the sources in rank order, so later
sources avoid the links earlier ones filled.

A block never takes more hops than its distance, so the routes reach the
distance bound only where shortest paths can share the links evenly; where
the optimum needs detours they fall short of LP (A.1): on the generalized
Kautz graph Pi_{4,1024} the busiest link carries 1589 blocks, against 1248
at the LP's optimum (78.6% of it).

Input invariant: a validated ``Topology`` of ranks only, every rank reaching
every other.
Output invariant: ``ShortestTrees`` whose ``parent[s]`` is a spanning tree
of rank ``s``'s fewest-hop paths (``level[s, t]`` = hops from ``s`` to ``t``).

Complexity: O(N (N + E)) for N ranks and E links (Pi_{4,1024}: 2 s).
Seed: 001 appendix A.1 (the distance bound, Definition 18, is what balanced
shortest paths approach); the tree per source is this project's.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from colc.errors import InfeasibleError, UnsupportedError
from colc.ir.topology import Topology

NAME = "shortest-trees"
#: Passes over the sources: after the first, each source's tree is taken off
#: the loads and grown again against every other source's.
SWEEPS = 3


@dataclass(frozen=True, slots=True, eq=False)
class ShortestTrees:
    """One fewest-hop tree per source.

    Attributes
    ----------
    ranks : int
    parent : numpy.ndarray
        ``parent[s, t]``: the rank before ``t`` on the path from ``s`` (-1 at ``t == s``).
    level : numpy.ndarray
        ``level[s, t]``: hops from ``s`` to ``t``.
    capacity : dict
        GB/s of every link ``(u, v)`` of ranks.
    """

    ranks: int
    parent: np.ndarray
    level: np.ndarray
    capacity: dict[tuple[int, int], float]

    def link_loads(self) -> dict[tuple[int, int], int]:
        """Blocks crossing each link when every source sends one block to every rank."""
        n = self.ranks
        load: dict[tuple[int, int], int] = {}
        for s in range(n):
            weight = _subtree_sizes(self.parent[s], self.level[s], s)
            for t in range(n):
                if t != s:
                    key = (int(self.parent[s, t]), t)
                    load[key] = load.get(key, 0) + int(weight[t])
        return load

    def time_per_block(self) -> float:
        """Seconds per byte of block, bandwidth only: the busiest link's blocks over
        its bandwidth (in bytes per second), i.e. the all-to-all time for blocks of
        one byte when every link streams (the routes' throughput is its inverse)."""
        load = self.link_loads()
        return max(k / (self.capacity[e] * 1e9) for e, k in load.items())


def shortest_trees(topo: Topology) -> ShortestTrees:
    """Route an all-to-all on balanced fewest-hop trees (see module docstring).

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    ShortestTrees

    Raises
    ------
    UnsupportedError
        The fabric has switches.
    InfeasibleError
        Some rank does not reach another (the message names the pair).

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> t = shortest_trees(ring(4, 10))
    >>> t.level[0].tolist(), t.parent[0].tolist()
    ([0, 1, 2, 1], [-1, 0, 1, 0])
    """
    if len(topo.node) != topo.num_ranks:
        raise UnsupportedError(f"{NAME} routes over direct-connect fabrics (links between "
                               "ranks); this one has switches")
    n = topo.num_ranks
    index = topo.rank_of
    capacity: dict[tuple[int, int], float] = {}
    for (a, b), c in sorted(topo.capacity().items()):
        key = (index[a], index[b])
        capacity[key] = capacity.get(key, 0.0) + float(c)
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in sorted(capacity):
        succ[u].append(v)
        pred[v].append(u)
    parent = np.full((n, n), -1, dtype=np.int32)
    level = np.zeros((n, n), dtype=np.int16)
    load = {e: 0.0 for e in capacity}
    inv = {e: 1.0 / c for e, c in capacity.items()}
    visits = []
    for s in range(n):
        lev, order = _bfs(succ, s, n)
        if len(order) < n:
            t = next(t for t in range(n) if lev[t] < 0)
            raise InfeasibleError(f"{topo.name}: rank {topo.ranks[s]} cannot reach "
                                  f"{topo.ranks[t]}, so no all-to-all exists")
        level[s] = lev
        visits.append((lev, order))
    for sweep in range(SWEEPS):
        for s in range(n):
            lev, order = visits[s]
            if sweep:
                _unload(load, parent[s], lev, order)
            _grow(parent[s], lev, order, pred, load, inv)
    return ShortestTrees(n, parent, level, capacity)


def _grow(par: np.ndarray, lev: list[int], order: list[int], pred: list[list[int]],
          load: dict[tuple[int, int], float], inv: dict[tuple[int, int], float]) -> None:
    """One source's tree, farthest ranks first, into ``par``; adds its load."""
    weight = [1] * len(lev)
    for t in reversed(order[1:]):
        up, w = lev[t] - 1, weight[t]
        best, best_cost = -1, 0.0
        for p in pred[t]:
            if lev[p] == up:
                cost = (load[(p, t)] + w) * inv[(p, t)]
                if best < 0 or cost < best_cost:
                    best, best_cost = p, cost
        par[t] = best
        weight[best] += w
        load[(best, t)] += w


def _unload(load: dict[tuple[int, int], float], par: np.ndarray, lev: list[int],
            order: list[int]) -> None:
    """Take one source's tree off the link loads."""
    weight = [1] * len(lev)
    for t in reversed(order[1:]):
        p = int(par[t])
        weight[p] += weight[t]
        load[(p, t)] -= weight[t]


def _bfs(succ: list[list[int]], s: int, n: int) -> tuple[list[int], list[int]]:
    """Hop counts from ``s`` (-1: unreached) and the ranks in visiting order."""
    lev = [-1] * n
    lev[s] = 0
    order = [s]
    queue = deque([s])
    while queue:
        u = queue.popleft()
        for v in succ[u]:
            if lev[v] < 0:
                lev[v] = lev[u] + 1
                order.append(v)
                queue.append(v)
    return lev, order


def _subtree_sizes(parent: np.ndarray, level: np.ndarray, s: int) -> np.ndarray:
    """Ranks in each rank's subtree of one source's tree (itself included)."""
    weight = np.ones(len(parent), dtype=np.int64)
    for t in np.argsort(-level.astype(np.int64), kind="stable").tolist():
        if t != s:
            weight[parent[t]] += weight[t]
    return weight


__all__ = ["NAME", "ShortestTrees", "shortest_trees"]
