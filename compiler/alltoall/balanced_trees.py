"""Pass ``balanced-trees``: all-to-all routes without a linear program.

LP (A.1) gives the optimal all-to-all routes, but on 1024 ranks without a
symmetry to exploit (generalized Kautz) it alone takes about ten minutes.
This pass routes in seconds: every source sends every block along one path,
and the paths of one source form a tree, chosen so that link loads stay
even.  Loads accumulate over the sources in rank order; each later *sweep*
takes one source's tree off the loads and grows it again against all the
others.

1. *Fewest-hop sweeps* (``SWEEPS``): ranks are visited from the farthest to
   the nearest; each rank ``t`` picks, among its in-neighbours one hop nearer
   the source, the parent whose link would carry the least after adding
   ``t``'s whole subtree (load over bandwidth; ties to the lower rank).
2. *Detour sweeps* (``DETOUR_SWEEPS``): each source's tree is the shortest-path
   tree under link costs ``1 + (x / x_max) ** DETOUR_POWER``, ``x`` a link's
   load over its bandwidth and ``x_max`` the busiest link's at the start of
   the sweep, so paths step around the busiest links at the price of a hop.
   The best trees of all sweeps (least busiest link) are kept.

On the generalized Kautz graph Pi_{4,1024} the busiest link carries 1589
blocks after the fewest-hop sweeps (the restricted LP's 78.6% of the
optimum) and 1414 after the detours, against 1248 at LP (A.1)'s optimum
(88.3%); on tori and hypercubes the fewest-hop sweeps reach 82-85%.

Input invariant: a validated ``Topology`` of ranks only, every rank reaching
every other.
Output invariant: ``RouteTrees`` whose ``parent[s]`` is a spanning tree of
rank ``s``'s paths over links (``level[s, t]`` = hops from ``s`` to ``t``
along it, at least their distance).

Complexity: O(N (N + E)) per fewest-hop sweep and O(N E log N) per detour
sweep for N ranks and E links (Pi_{4,1024}: about 4 s per sweep).
Seed: 001 appendix A.1 (LP (A.1) and the distance bound, Definition 18,
which balanced trees approach); the sweeps are this project's.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from colc.errors import InfeasibleError, UnsupportedError
from colc.ir.topology import Topology

NAME = "balanced-trees"
#: Passes over the sources: after the first, each source's tree is taken off
#: the loads and grown again against every other source's.
SWEEPS = 3
#: Sweeps of congestion-priced shortest-path trees after those, and the power
#: of their price (Pi_{4,1024}, busiest link: 1589 blocks before, 1475 after
#: 3 sweeps at power 8, 1444 after 6 at 16 (17 s), 1455 at 32, 1414 after
#: 12 at 16 (30 s), 1418 at 12; LP (A.1): 1248).
DETOUR_SWEEPS = 12
DETOUR_POWER = 16


@dataclass(frozen=True, slots=True, eq=False)
class RouteTrees:
    """One routing tree per source.

    Attributes
    ----------
    ranks : int
    parent : numpy.ndarray
        ``parent[s, t]``: the rank before ``t`` on the path from ``s`` (-1 at ``t == s``).
    level : numpy.ndarray
        ``level[s, t]``: hops from ``s`` to ``t`` along the tree.
    capacity : dict
        GB/s of every link ``(u, v)`` of ranks.
    """

    ranks: int
    parent: np.ndarray
    level: np.ndarray
    capacity: dict[tuple[int, int], float]

    def link_loads(self) -> dict[tuple[int, int], int]:
        """Blocks crossing each link when every source sends one block to every rank.

        Returns
        -------
        dict
            ``(u, v) -> blocks`` for every link the trees use.
        """
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
        one byte when every link streams (the routes' throughput is its inverse).

        Returns
        -------
        float
        """
        load = self.link_loads()
        return max(k / (self.capacity[e] * 1e9) for e, k in load.items())


def balanced_trees(topo: Topology) -> RouteTrees:
    """Route an all-to-all on balanced trees (see module docstring).

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    RouteTrees

    Raises
    ------
    UnsupportedError
        The fabric has switches.
    InfeasibleError
        Some rank does not reach another (the message names the pair).

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> t = balanced_trees(ring(4, 10))
    >>> t.level[0].tolist(), t.parent[0].tolist()
    ([0, 1, 2, 1], [-1, 0, 1, 0])
    """
    if len(topo.node) != topo.num_ranks:
        raise UnsupportedError("hop-relay routes over direct-connect fabrics (links between "
                               "ranks); this one has switches (direct serves a fabric whose "
                               "ranks meet through switches or one relay)")
    n = topo.num_ranks
    if n < 2:
        raise UnsupportedError(f"{NAME}: an all-to-all needs at least 2 ranks, {topo.name} "
                               f"has {n}")
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
                _shift(load, parent[s], order, -1)
            _grow(parent[s], lev, order, pred, load, inv)
    _detour(parent, level, visits, succ, load, inv)
    return RouteTrees(n, parent, level, capacity)


def _detour(parent: np.ndarray, level: np.ndarray, visits: list, succ: list[list[int]],
            load: dict[tuple[int, int], float], inv: dict[tuple[int, int], float]) -> None:
    """The detour sweeps, in place; the best sweep's trees are kept."""
    def busiest() -> float:
        return max(x * inv[e] for e, x in load.items())

    best = (busiest(), parent.copy(), level.copy())
    for _ in range(DETOUR_SWEEPS):
        peak = busiest()
        for s in range(len(visits)):
            _shift(load, parent[s], visits[s][1], -1)
            lev, order = _priced_tree(parent[s], s, succ, load, inv, peak)
            visits[s] = (lev, order)
            level[s] = lev
            _shift(load, parent[s], order, 1)
        if busiest() < best[0]:
            best = (busiest(), parent.copy(), level.copy())
    parent[:], level[:] = best[1], best[2]


def _priced_tree(par: np.ndarray, s: int, succ: list[list[int]],
                 load: dict[tuple[int, int], float], inv: dict[tuple[int, int], float],
                 peak: float) -> tuple[list[int], list[int]]:
    """Dijkstra from ``s`` under the detour price into ``par``: the tree's hop
    counts and its ranks in settling order (parents before children)."""
    n = len(succ)
    dist = [math.inf] * n
    dist[s] = 0.0
    lev = [0] * n
    heap = [(0.0, s)]
    order: list[int] = []
    done = [False] * n
    while heap:
        du, u = heapq.heappop(heap)
        if done[u]:
            continue
        done[u] = True
        order.append(u)
        if u != s:
            lev[u] = lev[int(par[u])] + 1
        for v in succ[u]:
            cost = du + 1.0 + (load[(u, v)] * inv[(u, v)] / peak) ** DETOUR_POWER
            if cost < dist[v]:
                dist[v] = cost
                par[v] = u
                heapq.heappush(heap, (cost, v))
    return lev, order


def _shift(load: dict[tuple[int, int], float], par: np.ndarray, order: list[int],
           sign: int) -> None:
    """Put one source's tree on the link loads (``sign`` 1) or take it off (-1);
    ``order``: the tree's ranks, parents first."""
    weight = [1] * len(par)
    for t in reversed(order[1:]):
        p = int(par[t])
        weight[p] += weight[t]
        load[(p, t)] += sign * weight[t]


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


__all__ = ["NAME", "RouteTrees", "balanced_trees"]
