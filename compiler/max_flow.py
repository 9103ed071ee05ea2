"""Integer max-flow for the tree passes (helper, not a pass).

Input: a directed network on nodes ``0..n-1`` given as parallel arrays of
tails, heads and non-negative integer capacities (parallel arcs add up).
Output: the exact maximum flow value from a source to a sink and, on
request, the *minimal* source side of a minimum cut (the nodes reachable
from the source in the residual network).

Algorithm: Edmonds-Karp in C++ (networkit, MIT licence).  Its capacities
are doubles, which represent every integer below 2**53 exactly, and sums
of such integers stay exact, so the flow values are exact integers; larger
totals go to the exact pure-Python preflow-push of networkx, so no result
ever depends on a tolerance.  About 0.1 ms for the few-hundred-arc networks
of the tree passes; ``SolverNetwork`` keeps one graph across questions so
nothing is rebuilt per call.  Complexity O(n m^2) per call.

Reference: seed 001 B.6 (the authors use push-relabel); the flow networks
themselves are built by the passes that call this module.

Example
-------
>>> net = FlowNetwork(3)
>>> net.add_arc(0, 1, 2); net.add_arc(1, 2, 1); net.add_arc(0, 2, 1)
>>> net.max_flow(0, 2)
2
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import networkit as nk

from colc.errors import InternalError



@dataclass(frozen=True, slots=True)
class FlowProblem:
    """One max-flow instance: arcs as int64 arrays on nodes ``0..n-1``."""

    n: int
    tails: np.ndarray
    heads: np.ndarray
    caps: np.ndarray
    source: int
    sink: int


class FlowNetwork:
    """A reusable integer network: fixed arcs plus per-call extra arcs.

    Parameters
    ----------
    n : int
        Number of nodes; nodes are ``0..n-1``.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.tails: list[int] = []
        self.heads: list[int] = []
        self.caps: list[int] = []

    def add_arc(self, u: int, v: int, cap: int) -> None:
        """Append arc ``u -> v`` with integer capacity ``cap >= 0``."""
        self.tails.append(u)
        self.heads.append(v)
        self.caps.append(cap)

    def problem(self, source: int, sink: int,
                extra: Iterable[tuple[int, int, int]] = ()) -> FlowProblem:
        """The instance ``source -> sink`` with ``extra`` arcs added."""
        ex = list(extra)
        tails = self.tails + [u for u, _, _ in ex]
        heads = self.heads + [v for _, v, _ in ex]
        caps = self.caps + [c for _, _, c in ex]
        return FlowProblem(self.n, np.asarray(tails, dtype=np.int64),
                           np.asarray(heads, dtype=np.int64),
                           np.asarray(caps, dtype=np.int64), source, sink)

    def max_flow(self, source: int, sink: int,
                 extra: Iterable[tuple[int, int, int]] = ()) -> int:
        """Maximum flow value."""
        return solve_batch([self.problem(source, sink, extra)], want_cut=False)[0][0]

    def max_flow_cut(
        self,
        source: int,
        sink: int,
        extra: Iterable[tuple[int, int, int]] = (),
        *,
        want_cut: bool = True,
    ) -> tuple[int, frozenset[int] | None]:
        """Maximum flow and the minimal source side of a minimum cut.

        Parameters
        ----------
        source, sink : int
            Distinct node indices.
        extra : iterable of (tail, head, capacity)
            Arcs added for this call only.
        want_cut : bool
            Whether to compute the source side.

        Returns
        -------
        (int, frozenset or None)
            Flow value and the residual-reachable set of ``source``.
        """
        return solve_batch([self.problem(source, sink, extra)], want_cut=want_cut)[0]


#: Capacities are handed to the C++ solver as doubles: exact below 2**53.
_EXACT = 2**53


def _graph(n: int, tails: np.ndarray, heads: np.ndarray, caps: np.ndarray) -> nk.Graph:
    """A weighted directed networkit graph with parallel arcs merged."""
    keys = tails * n + heads
    uniq, inverse = np.unique(keys, return_inverse=True)
    weights = np.bincount(inverse, weights=caps.astype(np.float64))
    g = nk.Graph(n, weighted=True, directed=True)
    g.addEdges((weights, (uniq // n, uniq % n)))
    g.indexEdges()
    return g


class SolverNetwork:
    """A fixed set of distinct arcs whose capacities change between solves.

    For passes that ask many max-flow questions of one network with small
    changes in between: the C++ graph is built once.

    Parameters
    ----------
    n : int
        Number of nodes.
    tails, heads, caps : sequence of int
        The arcs (no two with the same ends); arc ``i`` keeps index ``i``
        for ``set_capacity``.
    """

    def __init__(self, n: int, tails: Sequence[int], heads: Sequence[int],
                 caps: Sequence[int]) -> None:
        self.n = n
        self.ends = list(zip(tails, heads))
        if len(set(self.ends)) != len(self.ends):
            raise InternalError("SolverNetwork needs distinct arcs")
        self.total = sum(caps)
        self.graph = _graph(n, np.asarray(tails, dtype=np.int64),
                            np.asarray(heads, dtype=np.int64), np.asarray(caps, dtype=np.int64))
        self.caps = list(caps)

    def set_capacity(self, arc: int, cap: int) -> None:
        """Set the capacity of arc ``arc`` (its index at construction)."""
        self.total += cap - self.caps[arc]
        self.caps[arc] = cap
        u, v = self.ends[arc]
        self.graph.setWeight(u, v, float(cap))

    def flow(self, source: int, sink: int) -> int:
        """Maximum flow value from ``source`` to ``sink`` with the current capacities."""
        if self.total >= _EXACT:
            raise InternalError("max-flow: capacities beyond 2**53 cannot be solved exactly")
        solver = nk.flow.EdmondsKarp(self.graph, source, sink)
        solver.run()
        return int(solver.getMaxFlow())


def solve_batch(problems: Sequence[FlowProblem], *, want_cut: bool
                ) -> list[tuple[int, frozenset[int] | None]]:
    """Solve independent max-flow instances, each by one C++ call.

    Parameters
    ----------
    problems : sequence of FlowProblem
    want_cut : bool

    Returns
    -------
    list of (int, frozenset or None)
        Per instance, in order: the flow value and, when asked, the minimal
        source side of a minimum cut (the ranks reachable from the source in
        the residual network).
    """
    out: list[tuple[int, frozenset[int] | None]] = []
    for prob in problems:
        if prob.source == prob.sink:
            raise InternalError("max-flow with source == sink")
        if int(prob.caps.sum()) >= _EXACT:
            out.append(_networkx_flow(prob.n, prob.tails.tolist(), prob.heads.tolist(),
                                      prob.caps.tolist(), prob.source, prob.sink, want_cut))
            continue
        solver = nk.flow.EdmondsKarp(_graph(prob.n, prob.tails, prob.heads, prob.caps),
                                     prob.source, prob.sink)
        solver.run()
        side = frozenset(solver.getSourceSet()) if want_cut else None
        out.append((int(solver.getMaxFlow()), side))
    return out


def _networkx_flow(
    n: int,
    tails: Sequence[int],
    heads: Sequence[int],
    caps: Sequence[int],
    source: int,
    sink: int,
    want_cut: bool,
) -> tuple[int, frozenset[int] | None]:
    """Exact fallback for capacities beyond int32 (Python integers)."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for u, v, c in zip(tails, heads, caps):
        if g.has_edge(u, v):
            g[u][v]["capacity"] += c
        else:
            g.add_edge(u, v, capacity=c)
    value, (side, _) = nx.minimum_cut(g, source, sink)
    if not want_cut:
        return int(value), None
    # networkx's partition is a minimum cut; recompute the minimal source side.
    residual = nx.algorithms.flow.preflow_push(g, source, sink)
    reach = {source}
    stack = [source]
    while stack:
        u = stack.pop()
        for v, attr in residual[u].items():
            if v not in reach and attr["capacity"] - attr["flow"] > 0:
                reach.add(v)
                stack.append(v)
    del side
    return int(value), frozenset(reach)
