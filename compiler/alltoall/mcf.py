"""All-to-all throughput: the multi-commodity flow LP (A.1) and its bounds.

Seed 001, appendix A.1.5 (inventory 1.1): every rank sends the same amount to
every other rank; with ``y[s, e]`` the flow of source ``s`` on link ``e``,

    max f   s.t.   sum_s y[s, e] <= c(e)                     for every link e
                   f + out_s(u) <= in_s(u)                     for every rank u != s
                   out_s(v) <= in_s(v)                         for every switch v
                   y >= 0

``f`` is then the rate at which every rank reaches every other one (GB/s with
the links' bandwidths, or per unit of link capacity with ``unit=True``, the
seed's convention), so an all-to-all of ``M`` bytes per rank (``M/N`` to each
peer) takes ``M / (N f)`` and its algbw is ``N f``.

Vertex-transitive fabrics (rings, circulants, tori, hypercubes, complete
graphs) need one source: the LP is invariant under the fabric's
automorphisms, so some optimal solution is too, and with ``pi_s`` an
automorphism taking rank 0 to ``s`` it is ``y[s, e] = y[0, pi_s^-1(e)]``; the
LP keeps source 0's flow, its conservation rows and one capacity row per link
summing the translates (``E`` columns instead of ``N E``).  Fabrics of
ranks whose numbering hides their automorphisms (line-graph expansions,
generalized Kautz graphs) are searched for them past ``SYMMETRY_COLUMNS``
(``fabric_symmetry.rank_classes``): one source per class of ranks that
automorphisms join, the others translates of their class's representative
(``K E`` columns for ``K`` classes; L^3(C(16,{3,4})): 32 classes, the LP in
under a minute by the interior point method).  Other fabrics
solve the whole LP: by the simplex up to ``MAX_FULL_COLUMNS`` columns, by
HiGHS's first-order PDLP (matrix-vector products, relative gap ``PDLP_GAP``)
up to ``PDLP_MAX_COLUMNS`` (Table 3.4's 1024-rank graphs of degree 4: 4.2
million columns, minutes).

Bounds: ``moore_mcf`` (the theoretical bound of the seed: ``d / sum_i i n_i``
with ``n_i`` the layers of a Moore tree of degree ``d`` over ``N`` nodes) and
``distance_mcf`` (``sum_e c(e) / sum_{s != t} dist(s, t)``: every byte from
``s`` to ``t`` crosses at least ``dist(s, t)`` links; exact where shortest
paths can be loaded evenly).

Input invariant: a validated ``Topology`` whose ranks reach each other.
Output invariant: an ``McfResult`` whose flows meet the LP's constraints
(checked by ``check_flows`` in the tests).

Complexity: one HiGHS LP of ``E`` (symmetric), ``K E`` (``K`` rank classes;
the capacity rows built from ``N E`` entries) or ``N E`` columns (the whole
LP's matrix built with numpy, ``3 N E`` entries).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from colc.errors import ColcError, InfeasibleError, InternalError
from colc.ir.topology import Topology

#: Columns above which the full LP is solved by HiGHS's first-order PDLP instead
#: of the simplex (time and memory on 2 cores).
MAX_FULL_COLUMNS = 3_000_000
#: Columns above which the full LP is not attempted (generalized Kautz and line
#: graphs of 1024 ranks and degree 4 have 4.2 million: 10 minutes for
#: Pi_{4,1024}, over 25 for L^3(C(16,{3,4}))).
PDLP_MAX_COLUMNS = 8_000_000
#: PDLP's duality gap (relative to 1 + |objective|; its feasibility tolerances
#: are HiGHS's defaults, 1e-7, which is what makes f accurate: Pi_{4,64} within
#: 4e-8 of the simplex, Pi_{4,1024} 8.0106e-4 against the seed's 8.01e-4).
#: Scaling the LP so that f is near 1 with looser tolerances ran over 13
#: minutes without converging.
PDLP_GAP = 1e-5
#: Columns of the whole LP above which a fabric without family translations
#: is searched for automorphisms (``fabric_classes``; a second at 1024 ranks)
#: and solved with one source per rank class.
SYMMETRY_COLUMNS = 200_000
#: The class LP is used when its distinct capacity rows are at most one per
#: this many links (L^3(C(16,{3,4})): 128 rows for 4096 links).
CLASS_ROWS_PER_LINK = 8


@dataclass(frozen=True, slots=True)
class McfResult:
    """The optimum of LP (A.1) on one fabric.

    Attributes
    ----------
    f : float
        Rate from every rank to every other rank (GB/s, or per unit of link
        capacity when solved with ``unit=True``).
    nodes : tuple of str
        Node ids, ranks first (in rank order), then the switches.
    edges : tuple of (int, int)
        Directed links as node indices.
    capacity : tuple of float
        Per edge, as solved.
    flows : dict
        Source rank -> ``numpy`` array of its flow per edge (every source when
        ``translates`` is None; else the representatives only, the others
        their translates).
    translates : tuple of tuple of int or None
        For a symmetric solve, ``translates[s][e]``: the edge of the
        representative of ``s`` that carries source ``s``'s flow on edge
        ``e`` (``pi_s^-1(e)``).
    method : str
        ``"symmetric LP"``, ``"LP over K rank classes"`` or ``"LP"`` (and how).
    reps : tuple of int or None
        With ``translates``: per source, its representative (None: rank 0
        for every source, a vertex-transitive fabric).
    """

    f: float
    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    capacity: tuple[float, ...]
    flows: dict[int, np.ndarray]
    translates: tuple[tuple[int, ...], ...] | None
    method: str
    reps: tuple[int, ...] | None = None

    @property
    def ranks(self) -> int:
        """Compute nodes (commodity sources)."""
        return len(self.flows) if self.translates is None else len(self.translates)

    def flow(self, source: int) -> np.ndarray:
        """Flow of ``source`` on every edge."""
        if self.translates is None:
            return self.flows[source]
        return self.flows[self.rep(source)][np.asarray(self.translates[source])]

    def rep(self, source: int) -> int:
        """The source whose flow ``source``'s is a translate of (itself without
        symmetry)."""
        if self.translates is None:
            return source
        return 0 if self.reps is None else self.reps[source]

    def algbw(self) -> float:
        """All-to-all algbw (GB/s) this rate allows: ``N f``."""
        return self.ranks * self.f


def fabric(topo: Topology, unit: bool = False):
    """``(nodes, edges, capacity)`` of ``topo``: ranks first, then switches;
    capacities in GB/s (1 per link with ``unit``; parallel links add up)."""
    nodes = tuple(topo.ranks) + tuple(n for n in topo.node if n not in set(topo.ranks))
    index = {n: i for i, n in enumerate(nodes)}
    count: dict[tuple[str, str], int] = {}  # links per pair: a unit each
    for link in topo.links:
        count[(link.src, link.dst)] = count.get((link.src, link.dst), 0) + 1
    caps: dict[tuple[int, int], float] = {}
    for (u, v), c in sorted(topo.capacity().items()):
        key = (index[u], index[v])
        caps[key] = caps.get(key, 0.0) + (float(count[(u, v)]) if unit else float(c))
    edges = tuple(sorted(caps))
    return nodes, edges, tuple(caps[e] for e in edges)


def alltoall_mcf(topo: Topology, unit: bool = False, shortest: bool = False) -> McfResult:
    """Solve LP (A.1) on ``topo`` (see module docstring).

    Parameters
    ----------
    topo : Topology
    unit : bool
        Every link of capacity 1 (the seed's tables), else the links' GB/s.
    shortest : bool
        Every byte on a shortest path (fewest hops) from its source: source
        ``s``'s flow only on links ``(u, v)`` with ``dist(s, v) = dist(s, u)
        + 1``.  The optimum is at most the unrestricted one; no block takes
        more hops than its distance (the latency of small messages).

    Returns
    -------
    McfResult

    Raises
    ------
    InfeasibleError
        A rank does not reach another (f would be 0), or the LP is too large
        to solve here (no symmetry found and more than ``MAX_FULL_COLUMNS``
        columns).
    """
    nodes, edges, capacity = fabric(topo, unit)
    n = topo.num_ranks
    _check_reach(topo, nodes, edges)
    # the symmetries keep each pair's GB/s; with unit links they must keep
    # its link count too, which they do where every link has one bandwidth
    uniform = not unit or len({link.bandwidth for link in topo.links}) == 1
    perms = rank_translations(topo) if uniform else None
    reduction = fabric_classes(topo) if perms is None and uniform else None
    columns = lp_columns(topo)
    if columns > PDLP_MAX_COLUMNS:
        raise InfeasibleError(
            f"the all-to-all LP of {topo.name} has {columns} columns (too little symmetry "
            f"found), more than the {PDLP_MAX_COLUMNS} solved here")
    allowed = _shortest_edges(nodes, edges, n) if shortest else None
    if perms is not None:
        res = _symmetric(nodes, edges, capacity, n, perms, allowed)
    elif reduction is not None:
        res = _class_lp(nodes, edges, capacity, n, reduction, allowed)
    else:
        res = _full(nodes, edges, capacity, n, allowed)
    if shortest:
        res = dataclasses.replace(res, method=res.method + " on shortest paths")
    return _canonical(res)


def _shortest_edges(nodes, edges, n: int) -> np.ndarray:
    """``allowed[s, e]``: edge ``e = (u, v)`` lies on a shortest path from rank
    ``s`` (``dist(s, v) = dist(s, u) + 1``, hops through links and switches)."""
    dist = _hops_from_ranks(nodes, edges, n)
    us = np.array([u for u, _ in edges])
    vs = np.array([v for _, v in edges])
    return dist[:, vs] == dist[:, us] + 1


def _hops_from_ranks(nodes, edges, n: int) -> np.ndarray:
    """Hop counts from every rank to every node (``n x len(nodes)``)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    rows = [u for u, _ in edges]
    cols = [v for _, v in edges]
    graph = csr_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(nodes), len(nodes)))
    return shortest_path(graph, unweighted=True, indices=list(range(n)))


def _canonical(res: McfResult) -> McfResult:
    """The LP's optimum with a flow that does not depend on which optimal vertex
    the solver returns, when there is one: every block split evenly over all
    its shortest paths, if that reaches ``f`` (tori, hypercubes, circulants,
    complete graphs; a file's bytes then do not change with the HiGHS
    release).  Otherwise the solver's flow."""
    split = {s: _shortest_path_split(res, s) for s in sorted(res.flows)}
    total = (sum(split[res.rep(s)][np.asarray(t)] for s, t in enumerate(res.translates))
             if res.translates is not None else sum(split.values()))
    cap = np.asarray(res.capacity)
    used = total > 0
    reach = float(np.min(cap[used] / total[used])) if used.any() else 0.0
    if reach < res.f * (1 - 1e-9):
        return res
    flows = {s: y * res.f for s, y in split.items()}
    return McfResult(res.f, res.nodes, res.edges, res.capacity, flows, res.translates,
                     res.method + ", even shortest paths", res.reps)


def _shortest_path_split(res: McfResult, s: int) -> np.ndarray:
    """Per edge, the flow of one unit from ``s`` to every other rank split
    evenly over all shortest paths (each path carries its share of the
    pair's unit: ``sigma(s, u) sigma(v, t) / sigma(s, t)`` on edge ``(u, v)``)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    m = len(res.nodes)
    us = np.array([u for u, _ in res.edges])
    vs = np.array([v for _, v in res.edges])
    graph = csr_matrix((np.ones(len(us)), (us, vs)), shape=(m, m))
    dist = shortest_path(graph, unweighted=True)
    sigma_from_s = _path_counts(dist[s], us, vs, m)
    ranks = np.arange(res.ranks)
    # sigma(v, t) for every node v and rank t: paths counted backwards from t
    sigma_to = np.stack([_path_counts(dist[:, t], vs, us, m) for t in ranks], axis=1)
    d_st = dist[s, ranks]
    on = dist[s, us][:, None] + 1 + dist[vs][:, ranks] == d_st[None, :]
    share = sigma_from_s[us][:, None] * sigma_to[vs] / np.maximum(sigma_from_s[ranks], 1)[None, :]
    share[:, s] = 0.0
    return np.where(on, share, 0.0).sum(axis=1)


def _path_counts(dist: np.ndarray, us: np.ndarray, vs: np.ndarray, m: int) -> np.ndarray:
    """Shortest paths from the node at distance 0 to every node, over the edges
    ``us -> vs`` (dist: distances from that node)."""
    count = np.zeros(m)
    count[np.flatnonzero(dist == 0)] = 1.0
    finite = np.isfinite(dist)
    for d in range(1, int(dist[finite].max()) + 1 if finite.any() else 0):
        step = (dist[vs] == d) & (dist[us] == d - 1)
        np.add.at(count, vs[step], count[us[step]])
    return count


def _check_reach(topo: Topology, nodes, edges) -> None:
    """Every rank reaches every other (through ranks or switches)."""
    succ: list[list[int]] = [[] for _ in nodes]
    for u, v in edges:
        succ[u].append(v)
    for s in range(topo.num_ranks):
        seen = [False] * len(nodes)
        seen[s] = True
        stack = [s]
        while stack:
            u = stack.pop()
            for v in succ[u]:
                if not seen[v]:
                    seen[v] = True
                    stack.append(v)
        missing = next((t for t in range(topo.num_ranks) if not seen[t]), None)
        if missing is not None:
            raise InfeasibleError(f"{topo.name}: rank {nodes[s]} cannot reach rank "
                                  f"{nodes[missing]}; all-to-all needs every pair connected")


def _solve(cols_rows: list[np.ndarray], cols_vals: list[np.ndarray],
           row_lo: np.ndarray, row_hi: np.ndarray, cost: np.ndarray,
           off: np.ndarray | None = None) -> np.ndarray:
    """Maximise ``cost . x`` (x >= 0; ``x[off] = 0``) with column-wise sparse rows;
    the optimum ``x``."""
    lengths = np.array([len(r) for r in cols_rows], dtype=np.int64)
    start = np.concatenate(([0], np.cumsum(lengths)))
    return _solve_csc(start, np.concatenate(cols_rows), np.concatenate(cols_vals),
                      row_lo, row_hi, cost, off)


def _solve_csc(start: np.ndarray, index: np.ndarray, value: np.ndarray, row_lo: np.ndarray,
               row_hi: np.ndarray, cost: np.ndarray, off: np.ndarray | None = None,
               first_order: bool = False, interior: bool = False) -> np.ndarray:
    """``_solve`` on a column-compressed matrix; ``first_order``: HiGHS's PDLP
    (matrix-vector products only: LPs too large for the simplex on two cores);
    ``interior``: HiGHS's interior point method, then crossover to a vertex
    (the class LP of a 1024-rank line graph: 54 s against the simplex's 14
    minutes)."""
    import highspy

    from colc.compiler.highs_solver import new_highs

    ncol = len(cost)
    lp = highspy.HighsLp()
    lp.num_col_ = ncol
    lp.num_row_ = len(row_lo)
    lp.col_cost_ = -cost
    lp.col_lower_ = np.zeros(ncol)
    upper = np.full(ncol, highspy.kHighsInf)
    if off is not None:
        upper[off] = 0.0
    lp.col_upper_ = upper
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = start.astype(np.int32)
    lp.a_matrix_.index_ = index.astype(np.int32)
    lp.a_matrix_.value_ = value.astype(float)
    h = new_highs()
    if first_order:
        h.setOptionValue("solver", "pdlp")
        h.setOptionValue("pdlp_d_gap_tol", PDLP_GAP)
    elif interior:
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "on")
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise ColcError(f"the all-to-all LP did not solve ({h.modelStatusToString(h.getModelStatus())})")
    return np.asarray(h.getSolution().col_value)


def _conservation_rows(nodes, edges, n: int, source: int, first_row: int):
    """Per edge, its rows in source ``source``'s conservation block: ``+1`` at
    its head (inflow), ``-1`` at its tail (outflow); rows for every node but
    the source, numbered from ``first_row``."""
    row_of = {}
    r = first_row
    for u in range(len(nodes)):
        if u != source:
            row_of[u] = r
            r += 1
    rows, vals = [], []
    for u, v in edges:
        rr, vv = [], []
        if v in row_of:
            rr.append(row_of[v])
            vv.append(1.0)
        if u in row_of:
            rr.append(row_of[u])
            vv.append(-1.0)
        rows.append(rr)
        vals.append(vv)
    # f enters every rank row except the source's: in - out >= f
    f_rows = [row_of[u] for u in range(n) if u != source]
    return rows, vals, f_rows, r


def _full(nodes, edges, capacity, n: int, allowed: np.ndarray | None = None) -> McfResult:
    """The whole LP: ``n E`` flow columns and ``f``; rows: the links' capacities,
    then per source one conservation row per other node.  Simplex up to
    ``MAX_FULL_COLUMNS`` columns, first-order PDLP above (``PDLP_MAX_COLUMNS``)."""
    m, v = len(edges), len(nodes)
    us = np.array([a for a, _ in edges], dtype=np.int64)
    vs = np.array([b for _, b in edges], dtype=np.int64)
    src = np.repeat(np.arange(n), m)
    tail, head = np.tile(us, n), np.tile(vs, n)

    def row(s: np.ndarray, u: np.ndarray) -> np.ndarray:  # node u of source s's block
        return m + s * (v - 1) + np.where(u < s, u, u - 1)

    has_head, has_tail = head != src, tail != src
    count = 1 + has_head + has_tail  # capacity row, inflow at the head, outflow at the tail
    start = np.concatenate(([0], np.cumsum(count)))
    index = np.empty(start[-1], dtype=np.int64)
    value = np.empty(start[-1])
    at = start[:-1].copy()
    index[at], value[at] = np.tile(np.arange(m), n), 1.0
    at += 1
    index[at[has_head]], value[at[has_head]] = row(src[has_head], head[has_head]), 1.0
    at[has_head] += 1
    index[at[has_tail]], value[at[has_tail]] = row(src[has_tail], tail[has_tail]), -1.0
    # f enters every rank row but the source's: in - out >= f
    pairs = np.array([(s, u) for s in range(n) for u in range(n) if u != s], dtype=np.int64)
    f_rows = row(pairs[:, 0], pairs[:, 1]) if len(pairs) else np.zeros(0, dtype=np.int64)
    index = np.concatenate((index, f_rows))
    value = np.concatenate((value, -np.ones(len(f_rows))))
    start = np.concatenate((start, [len(index)]))
    nrow = m + n * (v - 1)
    first_order = n * m > MAX_FULL_COLUMNS
    row_lo = np.concatenate((np.full(m, -np.inf), np.zeros(nrow - m)))
    row_hi = np.concatenate((np.array(capacity), np.full(nrow - m, np.inf)))
    cost = np.zeros(n * m + 1)
    cost[-1] = 1.0
    off = None if allowed is None else np.flatnonzero(~allowed.reshape(-1))
    x = _solve_csc(start, index, value, row_lo, row_hi, cost, off, first_order)
    flows = {s: np.maximum(x[s * m:(s + 1) * m], 0.0) for s in range(n)}
    method = f"LP (first-order PDLP, within {PDLP_GAP:g})" if first_order else "LP"
    return McfResult(float(x[-1]), nodes, edges, capacity, flows, None, method)


def _symmetric(nodes, edges, capacity, n: int, perms: list[list[int]],
               allowed: np.ndarray | None = None) -> McfResult:
    """Source 0's flow; capacity row of edge e sums its translates' flows."""
    m = len(edges)
    index = {e: i for i, e in enumerate(edges)}
    # translates[s][e] = pi_s^-1(e): the edge of source 0 whose image under pi_s is e
    translates = []
    for p in perms:
        inv = [0] * n
        for a, b in enumerate(p):
            inv[b] = a
        translates.append(tuple(index[(inv[u], inv[v])] for u, v in edges))
    # column e0 (source 0's flow on edge e0) appears in the capacity row of every
    # edge e with translates[s][e] == e0
    cap_rows: list[list[int]] = [[] for _ in range(m)]
    for t in translates:
        for e, e0 in enumerate(t):
            cap_rows[e0].append(e)
    rows, vals, f_rows, row = _conservation_rows(nodes, edges, n, 0, m)
    cols_rows = [np.array(cap_rows[e] + rows[e]) for e in range(m)]
    cols_vals = [np.array([1.0] * len(cap_rows[e]) + vals[e]) for e in range(m)]
    cols_rows.append(np.array(f_rows))
    cols_vals.append(-np.ones(len(f_rows)))
    row_lo = np.concatenate((np.full(m, -np.inf), np.zeros(row - m)))
    row_hi = np.concatenate((np.array(capacity), np.full(row - m, np.inf)))
    cost = np.zeros(m + 1)
    cost[-1] = 1.0
    off = None if allowed is None else np.flatnonzero(~allowed[0])
    x = _solve(cols_rows, cols_vals, row_lo, row_hi, cost, off)
    return McfResult(float(x[-1]), nodes, edges, capacity, {0: np.maximum(x[:m], 0.0)},
                     tuple(translates), "symmetric LP")


def _class_lp(nodes, edges, capacity, n: int, reduction: _Reduction,
              allowed: np.ndarray | None = None) -> McfResult:
    """One source per rank class (``fabric_symmetry.rank_classes``): source
    ``s``'s flow is its representative's carried by ``perm[s]``.  The capacity
    row of a link sums every source's translate; identical rows (the links of
    one orbit, when the automorphisms act freely) are kept once, with the
    least capacity.  Interior point (and crossover) up to ``MAX_FULL_COLUMNS``
    columns, PDLP above."""
    from scipy.sparse import coo_matrix

    classes, rows_cols, row_of = reduction.classes, reduction.rows, reduction.row_of
    m, k, v = len(edges), len(classes.reps), len(nodes)
    us = np.array([a for a, _ in edges], dtype=np.int64)
    vs = np.array([b for _, b in edges], dtype=np.int64)
    nr = len(rows_cols)
    cap = np.full(nr, np.inf)
    np.minimum.at(cap, row_of, np.asarray(capacity, dtype=float))
    entries_r = [np.repeat(np.arange(nr), n)]
    entries_c = [rows_cols.reshape(-1)]
    entries_v = [np.ones(nr * n)]
    # conservation: per class, a row for every node but its representative
    for j, o in enumerate(classes.reps):
        def row(u: np.ndarray, o: int = o, j: int = j) -> np.ndarray:
            return nr + j * (v - 1) + np.where(u < o, u, u - 1)
        cols = j * m + np.arange(m)
        head, tail = vs != o, us != o
        entries_r += [row(vs[head]), row(us[tail])]
        entries_c += [cols[head], cols[tail]]
        entries_v += [np.ones(int(head.sum())), -np.ones(int(tail.sum()))]
        ranks = np.array([u for u in range(n) if u != o], dtype=np.int64)
        entries_r.append(row(ranks))
        entries_c.append(np.full(len(ranks), k * m))
        entries_v.append(-np.ones(len(ranks)))
    nrow = nr + k * (v - 1)
    a = coo_matrix((np.concatenate(entries_v),
                    (np.concatenate(entries_r), np.concatenate(entries_c))),
                   shape=(nrow, k * m + 1)).tocsc()
    a.sum_duplicates()
    row_lo = np.concatenate((np.full(nr, -np.inf), np.zeros(nrow - nr)))
    row_hi = np.concatenate((cap, np.full(nrow - nr, np.inf)))
    cost = np.zeros(k * m + 1)
    cost[-1] = 1.0
    off = None if allowed is None else np.flatnonzero(
        ~allowed[np.asarray(classes.reps)].reshape(-1))
    first_order = k * m > MAX_FULL_COLUMNS
    x = _solve_csc(a.indptr.astype(np.int64), a.indices.astype(np.int64), a.data, row_lo,
                   row_hi, cost, off, first_order, interior=not first_order)
    flows = {o: np.maximum(x[j * m:(j + 1) * m], 0.0) for j, o in enumerate(classes.reps)}
    how = f" (first-order PDLP, within {PDLP_GAP:g})" if first_order else ""
    return McfResult(float(x[-1]), nodes, edges, capacity, flows,
                     tuple(tuple(t) for t in reduction.translates.tolist()),
                     f"LP over {k} rank classes{how}", classes.rep)


def _capacity_rows(edges, n: int, classes):
    """``(translates, rows, row_of)`` of the class LP: per source and link the
    representative's link carried there; the distinct capacity rows (each
    the sorted columns of every source's translate); each link's row."""
    m = len(edges)
    us = np.array([a for a, _ in edges], dtype=np.int64)
    vs = np.array([b for _, b in edges], dtype=np.int64)
    lookup = np.full(n * n, -1, dtype=np.int64)
    lookup[us * n + vs] = np.arange(m)
    column = {o: j for j, o in enumerate(classes.reps)}
    translates = np.empty((n, m), dtype=np.int64)
    first_col = np.empty(n, dtype=np.int64)
    for s in range(n):
        inv = np.argsort(classes.perm[s])
        translates[s] = lookup[inv[us] * n + inv[vs]]
        first_col[s] = column[classes.rep[s]] * m
    if (translates < 0).any():
        raise InternalError("mcf: a rank class's permutation is not an automorphism")
    per_link = np.sort((translates + first_col[:, None]).T, axis=1)
    rows_cols, row_of = np.unique(per_link, axis=0, return_inverse=True)
    return translates, rows_cols, row_of.reshape(-1)


@dataclass(frozen=True, slots=True)
class _Reduction:
    """Rank classes with the class LP's capacity rows (``_capacity_rows``)."""

    classes: object
    translates: np.ndarray
    rows: np.ndarray
    row_of: np.ndarray


@functools.lru_cache(maxsize=8)
def fabric_classes(topo: Topology) -> _Reduction | None:
    """``fabric_symmetry.rank_classes`` of a fabric of ranks only whose whole
    LP has more than ``SYMMETRY_COLUMNS`` columns and no family translations
    (``rank_translations``), or None (switches, small, a vertex-transitive
    family, or no two ranks joined by an automorphism)."""
    from colc.compiler.alltoall.fabric_symmetry import rank_classes

    n = topo.num_ranks
    nodes, edges, capacity = fabric(topo)
    if len(nodes) != n or n * len(edges) <= SYMMETRY_COLUMNS or rank_translations(topo):
        return None
    classes = rank_classes(n, list(edges), list(capacity))
    if len(classes.reps) == n:
        return None
    # worth it only when the capacity rows collapse (automorphisms acting
    # freely: one row per orbit of links); else the class LP is as dense as
    # the whole one and harder (generalized Kautz 1024: 51 classes of 4-24
    # ranks, 4092 rows, over 16 minutes against PDLP's 10 on the whole LP)
    reduction = _Reduction(classes, *_capacity_rows(edges, n, classes))
    return reduction if len(reduction.rows) * CLASS_ROWS_PER_LINK <= len(edges) else None


def lp_columns(topo: Topology) -> int:
    """Flow columns of LP (A.1) as ``alltoall_mcf`` solves it on ``topo``."""
    _, edges, _ = fabric(topo)
    if rank_translations(topo) is not None:
        return len(edges)
    reduction = fabric_classes(topo)
    return (topo.num_ranks if reduction is None else len(reduction.classes.reps)) * len(edges)


@functools.lru_cache(maxsize=8)
def rank_translations(topo: Topology) -> list[list[int]] | None:
    """Automorphisms ``pi_s`` (``pi_s(0) = s``, one per rank, as permutations of
    rank indices) of a fabric of ranks only whose links all have one
    bandwidth, from the translations of its family's numbering (cyclic
    shifts, torus translations in row-major order, XOR for hypercubes); None
    when none of them is an automorphism of every link (or switches take
    part)."""
    n = topo.num_ranks
    if len(topo.node) != n or n < 2:
        return None
    index = {r: i for i, r in enumerate(topo.ranks)}
    caps = {(index[u], index[v]): c for (u, v), c in topo.capacity().items()}
    for candidate, generators in _candidate_groups(topo):
        if all(all(caps.get((candidate[g][u], candidate[g][v])) == c
                   for (u, v), c in caps.items()) for g in generators):
            return candidate
    return None


def _candidate_groups(topo: Topology):
    """``(perms, generators)`` of each group of translations the fabric's
    family may have: ``perms[s]`` takes rank 0 to ``s``, and the group is
    generated by ``perms[g]`` for ``g`` in ``generators``, so checking those
    proves every one an automorphism."""
    n = topo.num_ranks
    # cyclic shifts (rings, circulants): the shift by one
    yield [[(i + s) % n for i in range(n)] for s in range(n)], [1]
    if n & (n - 1) == 0:  # XOR (hypercubes): by each power of two
        yield [[i ^ s for i in range(n)] for s in range(n)], [1 << b for b in range(n.bit_length() - 1)]
    try:
        from colc.compiler.rings.dimrings import torus_dims

        dims = torus_dims(topo)
    except ColcError:
        dims = None
    if dims and len(dims) > 1:  # torus translations: a unit step along each dimension
        units = [math.prod(dims[i + 1:]) for i in range(len(dims))]
        yield [_torus_shift(dims, s) for s in range(n)], units


def _torus_shift(dims: tuple[int, ...], s: int) -> list[int]:
    """Row-major translation by the coordinates of rank ``s``."""
    def coords(i: int) -> list[int]:
        out = []
        for d in reversed(dims):
            out.append(i % d)
            i //= d
        return out[::-1]

    shift = coords(s)
    out = []
    for i in range(math.prod(dims)):
        c = coords(i)
        j = 0
        for d, a, b in zip(dims, c, shift, strict=True):
            j = j * d + (a + b) % d
        out.append(j)
    return out


def moore_mcf(n: int, d: int, neighbours: int | None = None) -> Fraction:
    """The seed's theoretical MCF bound ``d / sum_i i n_i`` (unit links):
    a Moore tree of degree ``d`` puts ``d^i`` nodes at distance ``i`` (the
    rest in the last layer), the least total distance a source can have.
    With parallel links a rank sends on ``d`` unit links but reaches only
    ``neighbours`` distinct ranks in one hop: the tree then widens by
    ``neighbours`` (a doubled complete graph K4: 6 unit links, 3 ranks at
    one hop, 6 / 3 = 2; counting neighbours for ``d`` too gave 3 / 3 = 1,
    below its f of 2).

    Examples
    --------
    >>> float(moore_mcf(1024, 4))  # seed Table A.1: 8.571e-4
    0.0008570816370259267
    >>> round(float(moore_mcf(32, 4)), 6)  # 5.797e-2
    0.057971
    >>> moore_mcf(4, 6, neighbours=3)
    Fraction(2, 1)
    """
    if n < 2 or d < 1:
        raise ColcError("the Moore bound needs at least two nodes and degree 1")
    left, layer, total, width = n - 1, 1, 0, neighbours or d
    while left > 0:
        here = min(width, left)
        total += layer * here
        left -= here
        layer += 1
        width *= neighbours or d
    return Fraction(d, total)


def distance_mcf(topo: Topology, unit: bool = False) -> float:
    """``sum_e c(e) / sum_{s != t} dist(s, t)`` (hops over links and switches
    between ranks): an upper bound on ``f``, since every byte from ``s`` to
    ``t`` takes at least ``dist(s, t)`` links' capacity."""
    _, _, capacity = fabric(topo, unit)
    return sum(capacity) / float(rank_distances(topo).sum())


def rank_distances(topo: Topology) -> np.ndarray:
    """Hop counts between ranks (``N x N``, through links and switches).

    Raises
    ------
    InfeasibleError
        Some rank does not reach another.
    """
    nodes, edges, _ = fabric(topo)
    n = topo.num_ranks
    dist = _hops_from_ranks(nodes, edges, n)[:, :n]
    if not np.isfinite(dist).all():
        raise InfeasibleError(f"{topo.name}: some rank cannot reach another")
    return dist


#: Columns (``lp_columns``: after the symmetry reductions) up to which
#: ``alltoall_bound`` solves the LP (a few seconds; L^2(C(16,{3,4})), 256
#: ranks in 8 classes: 1.5 s); beyond it, it gives the cut bounds.
BOUND_COLUMNS = 200_000
#: Ranks above which ``alltoall_bound`` gives the cut and distance bounds
#: only (the symmetric LP's capacity rows hold N E entries: a 50x50 torus,
#: 25 million).
BOUND_RANKS = 256


def alltoall_bound(topo: Topology) -> dict:
    """The all-to-all bounds ``colc analyze`` prints (``bounds.alltoall``).

    Returns
    -------
    dict
        ``algbw`` (GB/s: ``N f`` of LP (A.1) with the links' bandwidths when
        the LP is solved, else the best cut bound), ``method``, ``mcf`` (f of
        LP (A.1) with unit links, the seed's convention; None when not
        solved), ``moore_mcf`` (the Moore-tree bound for the ranks' degree on
        direct-connect fabrics; None with switches), ``cut`` (the per-rank
        and per-box cut bound, GB/s).
    """
    n = topo.num_ranks
    cut = cut_bound(topo)
    out = {"algbw": cut, "method": "per-rank and per-box cut", "mcf": None,
           "moore_mcf": None, "cut": round(cut, 3)}
    direct = len(topo.node) == n
    if direct:
        # unit links out of a rank (parallel links each count, as in the
        # unit LP) and distinct ranks it reaches in one hop
        links = Counter(link.src for link in topo.links)
        reach = Counter(u for u, _v in topo.capacity())
        out["moore_mcf"] = float(max(moore_mcf(n, links[u], reach[u]) for u in reach))
    _, edges, _ = fabric(topo)
    if n > BOUND_RANKS or lp_columns(topo) > BOUND_COLUMNS:
        if direct:
            out["algbw"] = min(cut, n * distance_mcf(topo))
            out["method"] += " and distance"
        out["method"] += f" bounds (LP (A.1) not solved here: {n} ranks, {len(edges)} links)"
        return out
    real = alltoall_mcf(topo)
    out.update(algbw=real.algbw(), method=f"all-to-all LP (A.1), {real.method}",
               mcf=alltoall_mcf(topo, unit=True).f)
    return out


def cut_bound(topo: Topology) -> float:
    """Least of the per-rank (egress, ingress) and per-box cut bounds on
    all-to-all algbw (GB/s): a set ``S`` of ``g`` ranks sends ``g (N - g) / N``
    of the per-rank buffer across its cut."""
    from colc.ir.topology import boxes

    n = topo.num_ranks
    if n < 2:
        return 0.0
    best = min(float(min(topo.egress(r), topo.ingress(r))) * n / (n - 1) for r in topo.ranks)
    groups = boxes(topo)
    if len(groups) > 1:
        caps = topo.capacity()
        where: dict[str, int] = {}
        for i, members in enumerate(groups):
            for r in members:
                where[topo.ranks[r]] = i
        inside = _box_nodes(topo, where)
        for i, members in enumerate(groups):
            g = len(members)
            out_cap = sum(float(c) for (u, v), c in caps.items()
                          if inside.get(u) == i and inside.get(v) != i)
            if out_cap:
                best = min(best, out_cap * n / (g * (n - g)))
    return best


def _box_nodes(topo: Topology, where: dict[str, int]) -> dict[str, int]:
    """Box of every node that is not a network node (ranks and box switches)."""
    out = dict(where)
    changed = True
    while changed:
        changed = False
        for (u, v) in topo.capacity():
            for a, b in ((u, v), (v, u)):
                if a in out and b not in out and not topo.node[b].is_network:
                    out[b] = out[a]
                    changed = True
    return out


__all__ = ["BOUND_COLUMNS", "MAX_FULL_COLUMNS", "McfResult", "alltoall_bound", "alltoall_mcf",
           "cut_bound", "distance_mcf", "fabric", "moore_mcf", "rank_distances",
           "rank_translations"]
