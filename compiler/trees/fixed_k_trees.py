"""Pass ``fixed-k-trees``: the best allgather with exactly k trees per root.

Input invariant: an ``IntegerGraph`` (``b_e = beta_e * unit``) that passed
``check_tree_topology``, and ``k >= 1``.
Output invariant: ``U*`` (Fraction, trees per beta unit), the smallest
``U`` such that ``k`` edge-disjoint spanning out-trees per root exist in
``G({floor(U beta_e)})``; the time is ``(M/(N k)) U*`` (per beta unit), so
allgather algbw is ``N k unit / U*``.

Algorithm (seed 001 section 4.5.5, Algorithm 5, Theorems 33-35, B.5.4):
feasibility of ``U`` is ``min_v F(s, v) >= N k`` with source arcs ``k`` and
capacities ``floor(U beta_e)`` (Theorem 25), monotone in ``U`` (Theorem 34).
Bisect with exact Fractions on ``[(N-1)k / min_v B-(v), (N-1)k]`` until the
width is below ``1/max(beta)^2``; ``U*`` is then the unique fraction in the
interval with denominator at most ``max(beta)``, found by scanning the
denominators.  Each test is one batched call of N max-flows.

Complexity: O(log(N k max(beta)^2)) tests of N max-flows, plus
O(max(beta)) for the final fraction.

Example
-------
>>> from colc.frontends.families import mi250
>>> from colc.compiler.trees.find_optimal_throughput import integer_graph
>>> g = integer_graph(mi250(2))
>>> [str(32 * k * g.unit / fixed_k_scale(g, k)) for k in (1, 2)]
['320', '1024/3']
"""

from __future__ import annotations

import math
from fractions import Fraction

from colc.compiler.trees.find_optimal_throughput import IntegerGraph
from colc.compiler.trees.max_flow import FlowNetwork, solve_batch
from colc.errors import InternalError, UnsupportedError

NAME = "fixed-k-trees"


def floor_capacities(graph: IntegerGraph, scale: Fraction) -> dict[tuple[int, int], int]:
    """``floor(U beta_e)`` for every arc (arcs rounding to 0 dropped)."""
    out = {}
    for e, c in graph.arcs.items():
        v = math.floor(scale * c)
        if v > 0:
            out[e] = v
    return out


def feasible(graph: IntegerGraph, k: int, caps: dict[tuple[int, int], int]) -> bool:
    """Theorem 25 test: every max-flow ``s -> v`` with source arcs ``k`` is ``>= N k``."""
    n = len(graph.nodes)
    ranks = graph.ranks
    net = FlowNetwork(n + 1)
    for (u, v), c in caps.items():
        net.add_arc(u, v, c)
    src = [(n, r, k) for r in ranks]
    need = len(ranks) * k
    results = solve_batch([net.problem(n, v, src) for v in ranks], want_cut=False)
    return all(value >= need for value, _ in results)


def fixed_k_scale(graph: IntegerGraph, k: int) -> Fraction:
    """Smallest feasible ``U`` for ``k`` trees per root (Algorithm 5).

    Parameters
    ----------
    graph : IntegerGraph
    k : int
        Trees per root, >= 1.

    Returns
    -------
    Fraction
        ``U*`` in trees per beta unit.

    Raises
    ------
    UnsupportedError
        ``k < 1``.
    """
    if k < 1:
        raise UnsupportedError(f"k must be at least 1, got {k}")
    ranks = graph.ranks
    n_ranks = len(ranks)
    ingress = {r: 0 for r in ranks}
    for (_, v), c in graph.arcs.items():
        if v in ingress:
            ingress[v] += c
    max_b = max(graph.arcs.values())
    lo = Fraction((n_ranks - 1) * k, min(ingress.values()))
    hi = Fraction((n_ranks - 1) * k)
    if feasible(graph, k, floor_capacities(graph, lo)):
        return lo
    if not feasible(graph, k, floor_capacities(graph, hi)):
        raise InternalError("fixed-k search: the upper bound (N-1)k is infeasible")
    width = Fraction(1, max_b * max_b)
    while hi - lo >= width:
        mid = (lo + hi) / 2
        if feasible(graph, k, floor_capacities(graph, mid)):
            hi = mid
        else:
            lo = mid
    best: Fraction | None = None
    for d in range(1, max_b + 1):
        cand = Fraction(math.floor(lo * d) + 1, d)
        if cand <= hi and (best is None or cand < best):
            best = cand
    if best is None or not feasible(graph, k, floor_capacities(graph, best)):
        raise InternalError("fixed-k search: no feasible fraction in the final interval")
    return best
