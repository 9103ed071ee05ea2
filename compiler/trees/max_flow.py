"""Integer max-flow for the tree passes (helper, not a pass).

Input: a directed network on nodes ``0..n-1`` given as parallel arrays of
tails, heads and non-negative integer capacities (parallel arcs add up).
Output: the exact maximum flow value from a source to a sink and, on
request, the *minimal* source side of a minimum cut (the nodes reachable
from the source in the residual network).

Two engines, each where it is fastest:

* ``solve_batch`` -- Dinic's algorithm in C (``scipy.sparse.csgraph``) on
  a disjoint union of many instances (one call per group), which needs
  int32 capacities; for the few large flows of the optimum search and of
  edge splitting (large values, dense switch fans).  When the total does
  not fit int32, the exact pure-Python preflow-push of networkx is used.
* ``SolverNetwork`` -- Edmonds-Karp in C++ (networkit, MIT licence) on a
  graph built once whose capacities change between questions: about
  0.1 ms per question for the many small flows of tree packing, where
  scipy's per-call set-up (~2.5 ms) would dominate.  networkit's
  capacities are doubles, exact for integer totals below 2**53 (checked).

No result depends on a tolerance.  Complexity O(n^2 m) per Dinic call,
O(n m^2) per Edmonds-Karp call.

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
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from colc.errors import InternalError

_INT32_MAX = 2**31 - 1

# Our flows are small: networkit's OpenMP threads only spin against each other
# (and against other processes: on 2 busy cores a packing ran 50x slower).
nk.setNumberOfThreads(1)


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
        # networkit's Edmonds-Karp can return a flow too large when the graph
        # has two antiparallel edges (checked against networkx: 1 in 3000
        # random 6-node networks; zero-weight edges alone are fine, 0 in 6000;
        # the spread switch splitting hit it and packed no trees).  So of two
        # antiparallel arcs the one with the larger tail goes through a relay
        # node of its own.  Edges are never removed or added after
        # construction (networkit never reuses edge ids, and every flow would
        # allocate for all ids ever used).
        present = set(self.ends)
        self.relay: dict[int, int] = {}
        for i, (u, v) in enumerate(self.ends):
            if u > v and (v, u) in present:
                self.relay[i] = n + len(self.relay)
        self.graph = nk.Graph(n + len(self.relay), weighted=True, directed=True)
        self.caps = list(caps)
        for i, c in enumerate(caps):
            for a, b in self._hops(i):
                self.graph.addEdge(a, b, float(c))
        self.graph.indexEdges()

    def _hops(self, arc: int) -> list[tuple[int, int]]:
        u, v = self.ends[arc]
        if arc not in self.relay:
            return [(u, v)]
        return [(u, self.relay[arc]), (self.relay[arc], v)]

    def set_capacity(self, arc: int, cap: int) -> None:
        """Set the capacity of arc ``arc`` (its index at construction)."""
        self.total += cap - self.caps[arc]
        self.caps[arc] = cap
        for a, b in self._hops(arc):
            self.graph.setWeight(a, b, float(cap))

    def flow(self, source: int, sink: int) -> int:
        """Maximum flow value from ``source`` to ``sink`` with the current capacities."""
        if self.total >= _EXACT:
            raise InternalError("max-flow: capacities beyond 2**53 cannot be solved exactly")
        solver = nk.flow.EdmondsKarp(self.graph, source, sink)
        solver.run()
        return int(solver.getMaxFlow())


def solve_batch(problems: Sequence[FlowProblem], *, want_cut: bool
                ) -> list[tuple[int, frozenset[int] | None]]:
    """Solve independent max-flow instances with one C call per group.

    The instances are placed side by side (a disjoint union) under a super
    source and super sink whose arcs exceed each instance's total capacity;
    a maximum flow of the union restricted to one instance is a maximum flow
    of that instance, so the flow on its super-source arc is its value, and
    the residual-reachable set is its minimal min-cut source side.

    Parameters
    ----------
    problems : sequence of FlowProblem
    want_cut : bool

    Returns
    -------
    list of (int, frozenset or None)
        Per instance, in order.
    """
    out: list[tuple[int, frozenset[int] | None]] = []
    group: list[FlowProblem] = []
    budget = 0
    for prob in problems:
        if prob.source == prob.sink:
            raise InternalError("max-flow with source == sink")
        weight = 3 * int(prob.caps.sum()) + 3
        if weight > _INT32_MAX:
            out.extend(_solve_union(group, want_cut))
            group, budget = [], 0
            out.append(_networkx_flow(prob.n, prob.tails.tolist(), prob.heads.tolist(),
                                      prob.caps.tolist(), prob.source, prob.sink, want_cut))
            continue
        if group and (budget + weight > _INT32_MAX or len(group) >= _MAX_GROUP):
            out.extend(_solve_union(group, want_cut))
            group, budget = [], 0
        group.append(prob)
        budget += weight
    out.extend(_solve_union(group, want_cut))
    return out


_MAX_GROUP = 256


def _solve_union(group: list[FlowProblem], want_cut: bool
                 ) -> list[tuple[int, frozenset[int] | None]]:
    if not group:
        return []
    offsets = []
    total_n = 0
    for prob in group:
        offsets.append(total_n)
        total_n += prob.n
    big_s, big_t = total_n, total_n + 1
    tails = [prob.tails + off for prob, off in zip(group, offsets)]
    heads = [prob.heads + off for prob, off in zip(group, offsets)]
    caps = [prob.caps for prob in group]
    bigs = np.asarray([int(p.caps.sum()) + 1 for p in group], dtype=np.int64)
    srcs = np.asarray([p.source + off for p, off in zip(group, offsets)], dtype=np.int64)
    snks = np.asarray([p.sink + off for p, off in zip(group, offsets)], dtype=np.int64)
    tails += [np.full(len(group), big_s, dtype=np.int64), snks]
    heads += [srcs, np.full(len(group), big_t, dtype=np.int64)]
    caps += [bigs, bigs]
    size = total_n + 2
    t_all = np.concatenate(tails)
    keys = t_all * size + np.concatenate(heads)
    uniq, inverse = np.unique(keys, return_inverse=True)
    data = np.bincount(inverse, weights=np.concatenate(caps)).astype(np.int32)
    rows = uniq // size
    indptr = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
    mat = csr_array((data, (uniq % size).astype(np.int32), indptr), shape=(size, size))
    res = maximum_flow(mat, big_s, big_t, method="dinic")
    flow = res.flow
    row = slice(flow.indptr[big_s], flow.indptr[big_s + 1])
    by_col = dict(zip(flow.indices[row].tolist(), flow.data[row].tolist()))
    values = [int(by_col.get(int(s), 0)) for s in srcs]
    if not want_cut:
        return [(v, None) for v in values]
    residual = (mat - flow).tocsr()
    residual.data = (residual.data > 0).astype(np.int32)
    residual.eliminate_zeros()
    order = np.sort(breadth_first_order(residual, big_s, directed=True,
                                        return_predecessors=False))
    result: list[tuple[int, frozenset[int] | None]] = []
    for prob, off, val in zip(group, offsets, values):
        lo, hi = np.searchsorted(order, [off, off + prob.n])
        result.append((val, frozenset((order[lo:hi] - off).tolist())))
    return result


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
